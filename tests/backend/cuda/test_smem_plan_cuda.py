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


def test_a_kernel_too_large_for_the_gpu_names_its_line_and_tiles() -> None:
    import tilelang_x.language as T
    from tilelang_x.core_ir.errors import TileLangError

    @T.prim_func
    def too_large(A: T.Tensor((256, 512), T.float16), B: T.Tensor((256, 512), T.float16)):
        with T.Kernel(1, threads=128) as _:
            whole = T.alloc_shared((256, 512), T.float16)  # 256 KB, live throughout
            T.copy(A, whole)
            T.copy(whole, B)

    a = torch.randn(256, 512, device="cuda").half()
    # refused when compiled: no GPU of the architecture has 256 KB a block
    with pytest.raises(TileLangError, match=r"needs 256\.\d KB of shared memory.*`whole` 256\.0 KB") as info:
        tilelang_x.compile(too_large)(a, torch.empty_like(a))
    assert "test_smem_plan_cuda.py" in str(info.value) and "num_stages" in str(info.value)
