"""Exact arithmetic on values as the IR defines it, shared by the simplifier (constant folding,
interval bounds) and the reference evaluator: integer division truncating toward zero, the range of
an integer dtype, rounding to a float dtype, and the comparison operators."""

from __future__ import annotations

import operator

import numpy as np

from .dtypes import DType

Interval = tuple[int | None, int | None]

COMPARE = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne,
}


def trunc_div(x: int, y: int) -> int:
    """``x / y`` on integers: the quotient rounded toward zero (C's division)."""
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y >= 0) else -q


def dtype_range(dt: DType) -> Interval:
    """The inclusive range of an integer (or boolean) dtype; ``(None, None)`` for the others."""
    if dt.is_bool:
        return 0, 1
    if dt.kind == "int":
        return -(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1
    if dt.kind == "uint":
        return 0, (1 << dt.bits) - 1
    return None, None


def round_float(v: float, dt: DType) -> float | None:
    """``v`` rounded to ``dt``, or ``None`` where that rounding is not available here."""
    if dt.name == "float64":
        return float(v)
    if dt.name in ("float32", "float16"):
        with np.errstate(over="ignore", invalid="ignore"):
            return float(np.float32(v) if dt.name == "float32" else np.float16(v))
    if dt.name == "bfloat16":
        with np.errstate(over="ignore", invalid="ignore"):
            bits = int(np.float32(v).view(np.uint32))
        if bits & 0x7F800000 != 0x7F800000:  # finite: nearest even on the upper 16 bits (may give inf)
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return float(np.uint32(bits).view(np.float32))
    return None
