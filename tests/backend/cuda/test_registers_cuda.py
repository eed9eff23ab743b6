"""On the GPU: kernels that move registers between warpgroups (tests/kernels/register_control.py)
give torch's results on the Hopper path ("cuda" on an H200: setmaxnreg in the producer and
consumer regions, under ``__launch_bounds__(threads, 1)``) and on the sm_80-class one
("cuda:sm_90": the calls dropped). A setmaxnreg.inc the register file cannot grant waits forever,
so a wrong split shows up here as a hang. The suite's ``regs_*`` cases run in test_suite_cuda.py."""

from __future__ import annotations

import pytest
import torch

import tilelang_x
from tests.kernels import register_control as R

TARGETS = ["cuda", "cuda:sm_90"]


def _operands(M: int, N: int, K: int, seed: int = 11) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(M, K, generator=g).half().cuda(), torch.randn(K, N, generator=g).half().cuda()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("options", [{}, {"hints": True}, {"manual_wgmma": True}, {"num_stages": 2}])
@pytest.mark.parametrize(("M", "N", "K"), [(1024, 768, 2048), (1000, 520, 1000)])
def test_hand_specialized_gemm_with_setmaxnreg(M: int, N: int, K: int, options: dict, target: str) -> None:
    a, b = _operands(M, N, K)
    with tilelang_x.knobs.scope(target_default=target):
        c = R.gemm_ws_setmaxnreg(M, N, K, **options)(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("M", "N", "K"), [(1024, 768, 2048), (1000, 520, 1000)])
def test_gemm_specialized_by_a_branch_on_the_thread_index(M: int, N: int, K: int, target: str) -> None:
    a, b = _operands(M, N, K)
    with tilelang_x.knobs.scope(target_default=target):
        c = R.gemm_branch_specialized(M, N, K, num_stages=3)(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("options", [{}, {"producer": 24}, {"producer": 24, "consumer": 240}, {"consumer": 200},
                                     {"no_realloc": True}])
def test_register_split_of_the_compilers_warp_specialization(options: dict, target: str) -> None:
    a, b = _operands(2048, 1024, 1024)
    with tilelang_x.knobs.scope(target_default=target):
        c = R.gemm_split_hints(2048, 1024, 1024, **options)(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)


@pytest.mark.parametrize("target", TARGETS)
def test_branches_on_the_thread_index(target: str) -> None:
    x = torch.randn(100_000, device="cuda")
    with tilelang_x.knobs.scope(target_default=target):
        y = R.rows_by_warpgroup(100_000)(x)
    torch.cuda.synchronize()
    upper = (torch.arange(100_000, device="cuda") % 384) >= 256
    torch.testing.assert_close(y, torch.where(upper, x + 1, x * 2))
