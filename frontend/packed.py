"""TileLang's packed x2 math on the language surface: ``T.add2`` ... ``T.abs2``, the packed dtypes
``T.float16x2`` / ``T.bfloat16x2`` / ``T.float32x2`` (called with two values, they pack them) and
``T.Ramp`` (``A[T.Ramp(i, 1, 2)]`` loads or stores two elements). ``core_ir.packed`` holds the
semantics."""

from __future__ import annotations

from typing import Any

from ..core_ir import packed as P

Packed = P.Packed
Ramp = P.ramp
float16x2 = P.PackedDType("float16x2")
bfloat16x2 = P.PackedDType("bfloat16x2")
float32x2 = P.PackedDType("float32x2")


def add2(x: Any, y: Any) -> Packed:
    """``x + y`` lane by lane, each lane rounded once."""
    return P.apply("add2", x, y)


def sub2(x: Any, y: Any) -> Packed:
    """``x - y`` lane by lane, each lane rounded once."""
    return P.apply("sub2", x, y)


def mul2(x: Any, y: Any) -> Packed:
    """``x * y`` lane by lane, each lane rounded once."""
    return P.apply("mul2", x, y)


def fma2(x: Any, y: Any, z: Any) -> Packed:
    """``x * y + z`` lane by lane, each lane rounded once (a fused multiply-add)."""
    return P.apply("fma2", x, y, z)


def max2(x: Any, y: Any) -> Packed:
    """The larger lane of ``x`` and ``y``; a NaN lane gives the other one, +0 counts above -0."""
    return P.apply("max2", x, y)


def min2(x: Any, y: Any) -> Packed:
    """The smaller lane of ``x`` and ``y``; a NaN lane gives the other one, -0 counts below +0."""
    return P.apply("min2", x, y)


def abs2(x: Any) -> Packed:
    """``|x|`` lane by lane (the sign bit cleared)."""
    return P.apply("abs2", x)
