"""A wgmma accumulator stored transposed (``Out[y0 + j, x0 + i] = acc[i, j]``, the W @ A^T form
of a dequantizing GEMM) goes through per-warp slots with ``stmatrix.trans`` and 16-byte stores
(plugins/cuda/lower/transposed_epilogue.py)."""

from __future__ import annotations

import pytest

import tilelang_x.language as T
from tests.kernels import dequant
from tests.null.cuda_helpers import cuda_source, sass_ops


def transposed_gemm(M: int, N: int, K: int, dtype: str = "float16", bm: int = 64, bn: int = 128, guard: bool = True):
    """``C = A @ B^T`` computed as its transpose ``acc = B @ A^T`` and stored transposed."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, 64), dtype)
            B_s = T.alloc_shared((bn, 64), dtype)
            acc = T.alloc_fragment((bn, bm), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=2):
                T.copy(A[by * bm, k * 64], A_s)
                T.copy(B[bx * bn, k * 64], B_s)
                T.gemm(B_s, A_s, acc, transpose_B=True)
            for i, j in T.Parallel(bn, bm):
                if guard:
                    if by * bm + j < M:
                        C[by * bm + j, bx * bn + i] = acc[i, j]
                else:
                    C[by * bm + j, bx * bn + i] = acc[i, j]

    return main


def _body(func, configs=None) -> str:
    src, _ = cuda_source(func, "sm_90a", configs or {})
    return src[src.index("__global__"):]


def test_the_store_is_staged_transposed_with_16_byte_stores() -> None:
    body = _body(transposed_gemm(200, 256, 128))
    # each warp: its 16 accumulator rows x 64 columns in one chunk, 4 stmatrix of 16 columns, then 4
    # 16-byte stores a lane, each under a row guard
    assert body.count("tlx_stsm_x4_t(") == 4
    lines = body.splitlines()
    copies = [k for k, line in enumerate(lines) if "tlx_copy16(&C[" in line]
    # the bounds check and the kernel's own `if` are one comparison (by * 64 + row < 200 - 16 * it)
    assert len(copies) == 4 and all(lines[k - 1].lstrip().startswith("if (") and lines[k - 1].count("<") == 1
                                    for k in copies)


def test_the_dequantizing_gemm_stores_its_transposed_tile_this_way() -> None:
    func = dequant.matmul_w4a16.get_ir(4096, 4096, 4096, block_M=256, block_N=128, block_K=64, num_stages=4,
                                       threads=256, registers=True)
    body = _body(func, {"tlx.ws_compute_loops": True})
    assert "tlx_stsm_x4_t(" in body and "tlx_f2h(acc[" not in body


def test_off_with_the_staged_epilogue() -> None:
    body = _body(transposed_gemm(200, 256, 128), {"tlx.staged_epilogue": False})
    assert "tlx_stsm_x4_t(" not in body


def test_a_guard_on_the_accumulator_row_keeps_the_element_stores() -> None:
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((128, 64), "float16"), C: T.Tensor((64, 128), "float16")):
        with T.Kernel(1, threads=256):
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((128, 64), "float16")
            acc = T.alloc_fragment((128, 64), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(B_s, A_s, acc, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(128, 64):
                if i < 100:
                    C[j, i] = acc[i, j]

    assert "tlx_stsm_x4_t(" not in _body(main)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_sass_stores_matrices_transposed(dtype: str) -> None:
    ops = sass_ops(transposed_gemm(200, 256, 128, dtype), r"\b(STSM\.16\.MT88\.4|STG\.E\.128|STG\.E\.U16)\b")
    assert ops.get("STSM.16.MT88.4") and ops.get("STG.E.128") and not ops.get("STG.E.U16"), ops
