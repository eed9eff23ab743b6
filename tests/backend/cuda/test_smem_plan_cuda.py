"""Shared tiles that reuse each other's bytes (plugins/cuda/smem_plan.py) on the GPU against torch:
merging forced on kernels that fit without it, on the device's path and the sm_80-class one."""

from __future__ import annotations

import pytest
import torch

import tilelang_x
from tests.kernels import attention, gemm
from tilelang_x import knobs

TARGETS = ["cuda", "cuda:sm_90"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("stages", [2, 3])
def test_gemm_with_c_in_the_pipeline_stages_matches_torch(target: str, stages: int) -> None:
    m, n, k = 1000, 776, 1024
    gen = torch.Generator(device="cuda").manual_seed(stages)
    a = torch.randn(m, k, device="cuda", generator=gen).half()
    b = torch.randn(k, n, device="cuda", generator=gen).half()
    with knobs.scope(target_default=target):
        kernel = gemm.matmul(m, n, k, block_M=128, block_N=128, block_K=32, num_stages=stages, threads=128,
                             staged_C=True, merge_shared=True)
        c = kernel(a, b)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=1e-1, rtol=1e-2)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_with_its_output_in_the_q_tile_matches_sdpa(causal: bool) -> None:
    shape = (2, 4, 512, 128)
    gen = torch.Generator(device="cuda").manual_seed(int(causal))
    q, k, v = (torch.randn(*shape, device="cuda", generator=gen).half() for _ in range(3))
    func = attention.flash_attention.get_ir(*shape, causal, block_M=128, block_N=128, num_stages=2, threads=256)
    kernel = tilelang_x.compile(func, out_idx=[3], target="cuda:sm_90", pass_configs={"tlx.merge_shared": True})
    source = kernel.get_kernel_source()
    assert "O_shared = (tlx_half*)(tlx_smem + 0);" in source and "Q_shared = (tlx_half*)(tlx_smem + 0);" in source
    out = kernel(q, k, v)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=2e-2)
