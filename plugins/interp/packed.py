"""The interpreter's lanes of TileLang's packed x2 math (``core_ir.packed``) and ``T.fast_rcp``.

Each lane is computed exactly and rounded once to its dtype, as the paired instructions do
(``add.rn.f16x2``, ``fma.rn.bf16x2``, ...). Products of two float16 / bfloat16 / float32 values are
exact in float64; a sum is float64's rounding ``s`` plus its exact error ``err`` (Knuth's TwoSum).
Rounding ``s`` to the narrow dtype is then correct except when ``s`` falls exactly on a rounding
boundary (a midpoint of the narrow dtype) and ``err`` says the exact value lies off it: moving ``s``
one float64 step towards the exact value settles that tie, and no other boundary lies so close.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir.dtypes import DType

from . import numerics


def _storage(x: Any, elem: DType) -> Any:
    arr = np.asarray(x, dtype=numerics.storage_dtype(elem))
    return arr if arr.ndim else arr[()]


def _round_once(s: np.ndarray, err: np.ndarray, elem: DType) -> Any:
    """``s + err`` (float64 value and its exact error) rounded once to ``elem``."""
    s = np.where(err > 0, np.nextafter(s, np.inf), np.where(err < 0, np.nextafter(s, -np.inf), s))
    if elem == dtypes.bfloat16:
        return _storage(numerics.round_to(s, elem), elem)
    return _storage(s, elem)


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``a + b`` rounded to float64 and its exact error (0 where the sum is not finite)."""
    with np.errstate(invalid="ignore", over="ignore"):
        s = a + b
        bv = s - a
        err = (a - (s - bv)) + (b - bv)
    return s, np.where(np.isfinite(err), err, 0.0)


def _f64(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _add(elem: DType) -> Callable[..., Any]:
    return lambda x, y: _round_once(*_two_sum(_f64(x), _f64(y)), elem)


def _sub(elem: DType) -> Callable[..., Any]:
    return lambda x, y: _round_once(*_two_sum(_f64(x), -_f64(y)), elem)


def _mul(elem: DType) -> Callable[..., Any]:
    def mul(x: Any, y: Any) -> Any:
        with np.errstate(invalid="ignore", over="ignore"):
            p = _f64(x) * _f64(y)
        return _round_once(p, np.zeros_like(p), elem)

    return mul


def _fma(elem: DType) -> Callable[..., Any]:
    def fma(x: Any, y: Any, z: Any) -> Any:
        with np.errstate(invalid="ignore", over="ignore"):
            p = _f64(x) * _f64(y)
        return _round_once(*_two_sum(p, _f64(z)), elem)

    return fma


def _extreme(is_max: bool, elem: DType) -> Callable[..., Any]:
    """fmax / fmin: a NaN lane gives the other one; of two zeros, +0 is the larger."""
    pick = np.fmax if is_max else np.fmin
    combine = np.logical_and if is_max else np.logical_or

    def extreme(x: Any, y: Any) -> Any:
        a, b = np.asarray(x), np.asarray(y)
        r = pick(a, b)
        zeros = (a == 0) & (b == 0)
        negative = combine(np.signbit(a), np.signbit(b))
        return _storage(np.where(zeros, np.where(negative, -0.0, 0.0), r), elem)

    return extreme


def _abs(elem: DType) -> Callable[..., Any]:
    return lambda x: _storage(np.abs(np.asarray(x)), elem)


_LANE_OPS: dict[str, Callable[[DType], Callable[..., Any]]] = {
    "add2": _add, "sub2": _sub, "mul2": _mul, "fma2": _fma,
    "max2": lambda elem: _extreme(True, elem), "min2": lambda elem: _extreme(False, elem), "abs2": _abs,
}


def lane_function(op: str, elem: DType) -> Callable[..., Any]:
    """The function computing one lane of packed ``op`` on lanes of dtype ``elem`` from the
    operands' values of that lane (held in ``elem``'s storage)."""
    return _LANE_OPS[op](elem)


def fast_rcp(x: Any) -> Any:
    """``T.fast_rcp``: the correctly rounded float32 reciprocal (the device's approximation is
    within 1 ulp of it and flushes subnormals to zero)."""
    with np.errstate(divide="ignore"):
        return _storage(np.float32(1.0) / np.asarray(x, dtype=np.float32), dtypes.float32)
