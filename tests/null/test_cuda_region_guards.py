"""Tile copies of global regions whose start is read from memory (a group's first row in a grouped
GEMM) are guarded on both sides on CUDA, as in the interpreter: the part before the tensor reads as
zero and is not written. Starts built from indices and sizes alone get no lower check."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import gemm
from tests.null.cuda_helpers import cuda_source
from tilelang_x import knobs


@tilelang.jit(out_idx=[-1])
def shifted_rows(n):
    """``B[S - 64 + r] = A[S + r]`` for the rows ``r < 64`` inside both tensors (``S`` read from memory)."""

    @T.prim_func
    def main(A: T.Tensor((n, 64), T.float16), S: T.Tensor((1,), T.int32), B: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), T.float16)
            A_f = T.alloc_fragment((64, 64), T.float16)
            T.copy(A[S[0]:S[0] + 64, 0:64], A_s)
            T.copy(A_s, A_f)
            T.copy(A_f, B[S[0] - 64:S[0], 0:64])

    return main


def _body(source: str) -> str:
    return source[source.index('extern "C"'):]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_start_read_from_memory_is_checked_on_both_sides(arch: str) -> None:
    body = _body(cuda_source(shifted_rows.get_ir(100), arch)[0])
    assert "(0 <= (S[0] + " in body  # the load's source rows
    assert "(0 <= ((S[0] - 64) + " in body  # the store's destination rows


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_starts_from_indices_get_no_lower_check(arch: str) -> None:
    body = _body(cuda_source(gemm.matmul.get_ir(200, 136, 96, block_M=64, block_N=64, block_K=32), arch)[0])
    assert "0 <=" not in body


def test_interpreter_guards_both_ends() -> None:
    a = torch.arange(100 * 64, dtype=torch.float32).reshape(100, 64).half()
    with knobs.scope(target_default="interp"):
        out = shifted_rows(100)(a, torch.tensor([56], dtype=torch.int32))
    # B rows -8..55 take A rows 56..119: rows 0..55 are written, from A rows 64..99 and zeros past them
    expected = torch.cat([a[64:100], torch.zeros(20, 64, dtype=a.dtype)])
    torch.testing.assert_close(out[:56], expected, atol=0, rtol=0)
