"""Shared tiles never live at the same time share bytes when the kernel does not fit otherwise
(plugins/cuda/smem_plan.py; pass config ``tlx.merge_shared``), with a barrier of the whole block
before the later tile's first statement."""

from __future__ import annotations

import re

import pytest

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import attention_bwd, gemm
from tests.null.cuda_helpers import cuda_source
from tilelang_x.core_ir.errors import TileLangError


def _offsets(src: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"\* (\w+) = \(\w+\*\)\(tlx_smem \+ (\d+)\);", src)}


def _bwd(block_n: int = 128):
    return attention_bwd.flash_bwd.get_ir(2, 3, 512, 128, False, block_M=128, block_N=block_n, num_stages=2,
                                          threads=256)


def test_flash_attention_backward_fits_once_the_epilogue_reuses_the_loop_tiles() -> None:
    src, ctx = cuda_source(_bwd(), "sm_90")  # the sm_80-class path on a 227 KB card
    off = _offsets(src)
    assert ctx.data["cuda.meta"].smem_bytes <= 227 * 1024
    with pytest.raises(TileLangError, match="KB of shared memory, but sm_90 allows 227.0 KB"):
        cuda_source(_bwd(), "sm_90", {"tlx.merge_shared": False})
    assert len(set(off.values())) < len(off)  # some tiles share an offset
    # the epilogue's staging tiles take the bytes of tiles the loop used: K, Q, dO, dS^T
    loop = {"K_shared", "q", "do_1", "dsT_shared"}
    for tile in ("dv_shared", "dk_shared"):
        assert any(off[t] == off[tile] for t in loop), (tile, off)
    # TileLang's name for turning it off
    with pytest.raises(TileLangError, match="KB of shared memory"):
        cuda_source(_bwd(), "sm_90", {"tl.disable_shared_memory_reuse": True})


def test_a_kernel_that_fits_is_laid_out_as_before() -> None:
    src, ctx = cuda_source(_bwd(64), "sm_90")
    same, same_ctx = cuda_source(_bwd(64), "sm_90", {"tlx.merge_shared": False})
    assert src == same and ctx.data["cuda.meta"].smem_bytes == same_ctx.data["cuda.meta"].smem_bytes


def test_the_block_meets_before_a_tile_reuses_bytes() -> None:
    """GEMM with its C tile staged in shared memory, merging forced: C reuses the A / B stages,
    after the pipeline's last wait, with a barrier at the top level of the kernel."""
    func = gemm.matmul.get_ir(256, 256, 256, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128,
                              staged_C=True)
    src, ctx = cuda_source(func, "sm_80", {"tlx.merge_shared": True})
    kept, kept_ctx = cuda_source(func, "sm_80")
    off = _offsets(src)
    assert off["C_shared"] in (off["A_shared"], off["B_shared"])
    assert ctx.data["cuda.meta"].smem_bytes < kept_ctx.data["cuda.meta"].smem_bytes
    body = src.split("__global__")[1]
    tail = body[body.rindex("TLX_CP_ASYNC_WAIT(0);"):]
    assert tail.index("__syncthreads();") < tail.index("C_shared[")
    assert re.search(r"\n  __syncthreads\(\);\n", tail), "the barrier is at the kernel's top level"


def test_tiles_live_at_once_never_share() -> None:
    func = gemm.matmul.get_ir(256, 256, 256, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128)
    src, _ = cuda_source(func, "sm_90a", {"tlx.merge_shared": True})
    off = _offsets(src)
    assert len(set(off.values())) == len(off), off  # warp-specialized: one top-level statement uses them all


@tilelang.jit
def _manual_ws(n: int):
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=256) as _:
            a = T.alloc_shared((n,), T.float32)
            b = T.alloc_shared((n,), T.float32)
            with T.ws(0):
                T.copy(A, a)
            with T.ws(1):
                T.copy(B, b)

    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_warp_specialized_regions_keep_their_tiles_apart(arch: str) -> None:
    src, _ = cuda_source(_manual_ws.get_ir(128), arch, {"tlx.merge_shared": True})
    off = _offsets(src)
    assert off["a"] != off["b"]


def test_the_merged_backward_compiles() -> None:
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    if find_nvrtc() is None and find_nvcc() is None:
        pytest.skip("needs a CUDA compiler (nvcc or NVRTC)")
    src, ctx = cuda_source(_bwd(), "sm_90")
    assert compile_cuda(src, "sm_90", kernel_name=ctx.data["cuda.meta"].kernel_name).cubin
