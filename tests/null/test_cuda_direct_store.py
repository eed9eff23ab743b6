"""``T.copy(acc, S); T.copy(S, Out)`` through a shared tile used by nothing else becomes one
fragment → global copy on sm_90a (plugins/cuda/hopper/direct_store.py): the staged epilogue's
swizzled per-warp slots instead of the kernel's tile, whose allocation goes away."""

from __future__ import annotations

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source, flash_attention_ir


def _fa() -> object:
    return flash_attention_ir(causal=False)


def test_flash_attention_stores_its_output_without_the_shared_tile() -> None:
    src, ctx = cuda_source(_fa(), "sm_90a")
    kept, kept_ctx = cuda_source(_fa(), "sm_90a", {"tlx.direct_store": False})
    assert "O_shared" not in src and "tlx_stsm_x4(epi_stage" in src
    assert "O_shared" in kept and "tlx_stsm_x4(" not in kept.split("__global__")[1]
    assert ctx.data["cuda.meta"].smem_bytes < kept_ctx.data["cuda.meta"].smem_bytes
    assert "O_shared" in cuda_source(_fa(), "sm_80")[0]  # the sm_80-class path keeps the kernel's staging


@tilelang.jit(out_idx=[2, 3])
def _gemm_two_outputs(n: int):
    """C = A @ B staged through a shared tile that is copied out twice: it stays."""

    @T.prim_func
    def main(A: T.Tensor((n, n), T.float16), B: T.Tensor((n, n), T.float16), C: T.Tensor((n, n), T.float16),
             D: T.Tensor((n, n), T.float16)):
        with T.Kernel(1, threads=128) as _:
            a = T.alloc_shared((n, n), T.float16)
            b = T.alloc_shared((n, n), T.float16)
            c = T.alloc_shared((n, n), T.float16)
            acc = T.alloc_fragment((n, n), T.float32)
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, acc, clear_accum=True)
            T.copy(acc, c)
            T.copy(c, C)
            T.copy(c, D)

    return main


def test_a_shared_tile_read_twice_stays() -> None:
    src, _ = cuda_source(_gemm_two_outputs.get_ir(64), "sm_90a")
    body = src.split("__global__")[1]
    assert "tlx_half* c = (tlx_half*)(tlx_smem" in body and "tlx_stsm_x4(epi_stage" not in body


def test_flash_attention_backward_stores_dk_and_dv_directly() -> None:
    """dV and dK are staged as TileLang writes them, both tiles first, then both stores: each pair
    still becomes one direct store (and the tiles' layout annotations go with them)."""
    from tests.kernels import attention_bwd

    func = attention_bwd.flash_bwd.get_ir(2, 3, 512, 128, False, block_M=128, block_N=128, num_stages=2, threads=256)
    src, ctx = cuda_source(func, "sm_90a")
    body = src.split("__global__")[1]
    assert "dv_shared" not in body and "dk_shared" not in body
    assert ctx.data["cuda.meta"].smem_bytes <= 227 * 1024  # 64 KB less: 128 x 128 tiles fit at D128
