"""On the GPU: hand-written TMA copies on user-managed mbarriers and cp.async copies with explicit
groups (plugins/cuda/lower/tma_copy.py) give torch's results on the Hopper path ("cuda" on an
H200: cp.async.bulk.tensor loads completing on the barriers' transaction counts, TMA stores) and
on the sm_80-class one ("cuda:sm_90": ordinary copies for T.tma_copy)."""

from __future__ import annotations

import pytest
import torch

import tilelang_x
from tests.kernels import tma_copy as K

TARGETS = ["cuda", "cuda:sm_90"]


def _operands(M: int, N: int, k: int, seed: int = 7) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(M, k, generator=g).half().cuda(), torch.randn(k, N, generator=g).half().cuda()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("M", "N", "k", "options"), [
    (1024, 768, 2048, {}),
    (1000, 520, 1000, {"block_N": 64}),  # partial tiles: the copy engine zero-fills them
    (512, 512, 1024, {"consumers": 2, "num_stages": 2}),
    (256, 384, 512, {"block_M": 64, "block_K": 32, "num_stages": 2}),
])
def test_warp_specialized_ring_gemm(M: int, N: int, k: int, options: dict[str, int], target: str) -> None:
    a, b = _operands(M, N, k)
    with tilelang_x.knobs.scope(target_default=target):
        c = K.gemm_tma_ring(M, N, k, **options)(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("num_stages", [2, 3])
def test_tilelang_pipelined_tma_copy(num_stages: int, target: str) -> None:
    a, b = _operands(256, 256, 1024)
    with tilelang_x.knobs.scope(target_default=target):
        c = K.gemm_tma_pipelined(256, 256, 1024, num_stages=num_stages)(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)


@pytest.mark.parametrize("target", TARGETS)
def test_emit_arrive_rows(target: str) -> None:
    x = torch.randn(1000, 64).cuda()
    with tilelang_x.knobs.scope(target_default=target):
        y = K.rows_arrive_expect_tx(1000, 64)(x)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x * 2)



@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("M", "N", "k"), [(1024, 768, 2048), (1000, 520, 1000)])
def test_double_buffered_async_copy_gemm(M: int, N: int, k: int, target: str) -> None:
    a, b = _operands(M, N, k)
    with tilelang_x.knobs.scope(target_default=target):
        c = K.gemm_async_copy(M, N, k)(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("direct_store", [True, False])
def test_tma_store_gemm(direct_store: bool, target: str) -> None:
    a, b = _operands(1000, 520, 512)
    kernel = tilelang_x.compile(K.gemm_tma_store.get_ir(1000, 520, 512), target=target,
                                pass_configs={"tlx.direct_store": direct_store})
    c = kernel(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)
