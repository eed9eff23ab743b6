# Kernel code is written as users write it (unused block and loop variables included).
# ruff: noqa: F841, B007
"""TileLang's / TVM's scalar intrinsics: the IR they build, what the interpreter computes, the CUDA
they emit, and the located errors for their misuse (``# E:<tag>`` marks the line an error names)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source
from tilelang_x import knobs
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.errors import TileLangError, TileLangTypeError

HERE = Path(__file__)
LINES = HERE.read_text().splitlines()


def where(tag: str) -> str:
    hits = [n + 1 for n, text in enumerate(LINES) if text.rstrip().endswith(f"# E:{tag}")]
    assert len(hits) == 1, tag
    return f"{HERE.name}:{hits[0]}:"


def raises(exc: type, tag: str, fn, *words: str) -> TileLangError:
    with pytest.raises(exc) as info:
        fn()
    text = str(info.value)
    assert where(tag) in text, text
    for w in words:
        assert w in text, (w, text)
    return info.value


def elementwise(fn, in_dtype, out_dtype, n: int = 64):
    """A kernel ``B[i] = fn(A[i])`` over ``n`` elements (one ``T.Parallel`` loop)."""

    @T.prim_func
    def main(A: T.Tensor((n,), in_dtype), B: T.Tensor((n,), out_dtype)):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(n):
                B[i] = fn(A[i])

    return main


def run_interp(func, *inputs: np.ndarray, out_dtype: torch.dtype) -> torch.Tensor:
    args = [torch.from_numpy(np.ascontiguousarray(x)) for x in inputs]
    out = torch.empty(args[0].shape, dtype=out_dtype)
    with knobs.scope(target_default="interp"):
        tilelang.compile(func, target="interp")(*args, out)
    return out


# ---- bit operations ----------------------------------------------------------------------------

def test_bit_op_names_build_the_operators_ir():
    x = E.Var("x", T.int32)
    assert T.shift_left(x, 3).same_as(x << 3)
    assert T.shift_right(x, 3).same_as(x >> 3)
    assert T.bitwise_and(x, 7).same_as(x & 7)
    assert T.bitwise_or(x, 7).same_as(x | 7)
    assert T.bitwise_xor(x, 7).same_as(x ^ 7)
    assert T.bitwise_not(x).same_as(~x)
    assert T.shift_right(E.Var("w", T.uint8), 4).dtype == T.uint8
    assert int(T.shift_left(3, 4)) == 48


def test_shift_right_is_arithmetic_on_signed_and_logical_on_unsigned():
    values = np.array([-128, -7, -1, 0, 5, 127] * 8, dtype=np.int8)
    signed = run_interp(elementwise(lambda a: T.shift_right(a, 2), T.int8, T.int8, 48), values,
                        out_dtype=torch.int8)
    assert signed.tolist() == (values >> 2).tolist()
    unsigned = run_interp(elementwise(lambda a: T.shift_right(a, 2), T.uint8, T.uint8, 48), values.view(np.uint8),
                          out_dtype=torch.uint8)
    assert unsigned.tolist() == (values.view(np.uint8) >> 2).tolist()
    assert unsigned.tolist() != signed.view(torch.uint8).tolist()


def test_truncmod_has_the_dividends_sign():
    a = np.array([7, -7, 7, -7] * 16, dtype=np.int32)
    out = run_interp(elementwise(lambda x: T.truncmod(x, 3), T.int32, T.int32), a, out_dtype=torch.int32)
    assert out.tolist()[:4] == [1, -1, 1, -1]
    assert int(T.truncmod(-7, 3)) == -1
    f = run_interp(elementwise(lambda x: T.truncmod(x, 2.0), T.float32, T.float32), a.astype(np.float32),
                   out_dtype=torch.float32)
    assert f.tolist()[:2] == [1.0, -1.0]


def test_bit_op_on_float_names_the_line():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.int32)):
            with T.Kernel(1) as bx:
                for i in T.Parallel(64):
                    B[i] = T.shift_left(A[i], 2)  # E:shl-float

    raises(TileLangTypeError, "shl-float", build, "<<", "float32")


def test_bitwise_not_on_float_names_the_line():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                for i in T.Parallel(64):
                    B[i] = T.bitwise_not(A[i])  # E:not-float

    raises(TileLangTypeError, "not-float", build, "~", "float32")


def test_bit_ops_emit_c_operators():
    func = elementwise(lambda a: T.bitwise_xor(T.shift_right(a, 3), T.shift_left(a, 1)), T.uint32, T.uint32)
    source, _ = cuda_source(func)
    assert ">> 3u" in source and "<< 1u" in source and " ^ " in source
