"""``T.gemm(A, B, C)``: ``C += op(A) @ op(B)`` (``C = ...`` with ``clear_accum``).

Operands of any floating dtype (float16, bfloat16, float8, float32) are multiplied in float32
(float64 when an operand is float64), float32 operands first rounded to TF32 unless the pass
config ``tlx.fp32_gemm`` is ``ieee`` (``core_ir/gemm_precision.py``); integer operands (int8...)
exactly in integers. The product is added to C in that precision and rounded once to C's dtype,
as a tensor-core MMA accumulating in C's dtype does. ``policy``, ``k_pack`` and ``wg_wait``
describe how a GPU splits the work and do not change the result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir.buffer import Region
from tilelang_x.core_ir.errors import ShapeMismatchError
from tilelang_x.core_ir.gemm_precision import fp32_gemm_precision, round_tf32
from tilelang_x.core_ir.tileops import Gemm

from . import Executor, LowerContext, reject_in_parallel

if TYPE_CHECKING:
    from ..runtime import Frame


def as_2d(values: np.ndarray, what: str) -> np.ndarray:
    """A tile as a matrix: leading dimensions of extent 1 dropped (``[1, M, K]`` -> ``[M, K]``)."""
    v = values
    while v.ndim > 2 and v.shape[0] == 1:
        v = v[0]
    if v.ndim > 2:
        v = v.reshape([n for n in v.shape if n != 1])
    if v.ndim != 2:
        raise ShapeMismatchError(f"T.gemm operand {what} must be a 2-d tile, got shape {list(values.shape)}")
    return v


def lower(op: Gemm, ctx: LowerContext) -> Executor:
    A, B, C = op.A, op.B, op.C
    dts = (A.buffer.dtype, B.buffer.dtype)
    if all(d.is_int or d.is_bool for d in dts):
        # exact: float64 holds every sum of 8/16-bit products a tile can have
        small = all(d.bits <= 16 for d in dts)
        acc = np.dtype(np.float64) if small else np.dtype(np.int64)
        result = np.dtype(np.int64)
    elif any(d.name == "float64" for d in dts + (C.buffer.dtype,)):
        acc = result = np.dtype(np.float64)
    else:
        acc = result = np.dtype(np.float32)
    trans_a, trans_b, clear = op.trans_A, op.trans_B, op.clear_accum
    configs = ctx.options.get("pass_configs") or {}
    tf32 = dts == (dtypes.float32, dtypes.float32) and fp32_gemm_precision(configs) == "tf32"

    def gemm(rt: Frame) -> None:
        reject_in_parallel(rt, "T.gemm")
        a = as_2d(rt.read(A), "A")
        b = as_2d(rt.read(B), "B")
        if trans_a:
            a = a.T
        if trans_b:
            b = b.T
        if tf32:
            a, b = round_tf32(a), round_tf32(b)
        if a.shape[1] != b.shape[0]:
            raise ShapeMismatchError(
                f"T.gemm: K of A is {a.shape[1]} but K of B is {b.shape[0]} "
                f"(transpose_A={trans_a}, transpose_B={trans_b})"
            )
        accumulate(rt, C, np.matmul(a.astype(acc), b.astype(acc)).astype(result), clear, "T.gemm")

    return gemm


def accumulate(rt: Frame, C: Region, prod: np.ndarray, clear: bool, what: str) -> None:
    """``C = prod`` (``clear``) or ``C += prod``, in ``prod``'s precision, rounded once to C's dtype."""
    c_old = rt.read(C)
    c2 = as_2d(c_old, "C")
    if c2.shape != prod.shape:
        raise ShapeMismatchError(
            f"{what}: op(A) @ op(B) is {list(prod.shape)} but C (`{C.buffer.name}`) is {list(c2.shape)}"
        )
    out = prod if clear else c2.astype(prod.dtype) + prod
    rt.write(C, out.reshape(c_old.shape))
