"""IEEE-754 arithmetic with an explicit rounding mode (``T.ieee_add(x, y, "rz")`` and the other
``IEEE_FUNCS``), computed exactly.

numpy's float32 / float64 arithmetic rounds to nearest correctly, which settles ``rn`` for add,
sub, mul, div, rcp and sqrt. Everything else goes element by element through the exact value: a
``Fraction`` for the rational operations (float64 is not enough: ``2**100 + 2**-100`` rounds up
under ``ru`` although its float64 sum is ``2**100``, and an fma or a division can land within a
float64 ulp of a float32 rounding boundary), and for sqrt / rsqrt a comparison of squares. Each
result is the float of the format next to the exact value in the mode's direction.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

_NUMPY_RN: dict[str, Callable[..., Any]] = {
    "ieee_add": np.add, "ieee_sub": np.subtract, "ieee_mul": np.multiply, "ieee_fdiv": np.divide,
    "ieee_frcp": np.reciprocal, "ieee_fsqrt": np.sqrt,
}


def ieee_function(name: str, mode: str, ftype: type) -> Callable[..., Any]:
    """The elementwise function ``T.<name>(..., mode)`` on values of numpy type ``ftype``."""
    if mode == "rn" and name in _NUMPY_RN:
        fn = _NUMPY_RN[name]

        def nearest(*xs: Any) -> Any:
            with np.errstate(all="ignore"):
                return fn(*(np.asarray(x, dtype=ftype) for x in xs))[()]

        return nearest
    def one(*xs: Any) -> float:
        return _rounded(name, mode, ftype, *(float(x) for x in xs))

    elementwise = np.frompyfunc(one, len(_ARITY[name]), 1)

    def exact(*xs: Any) -> Any:
        with np.errstate(all="ignore"):  # the float status the scalar steps leave behind
            return np.asarray(elementwise(*xs)).astype(ftype)[()]

    return exact


# how the operation's exact value is compared: "q" rational, "s" sqrt, "r" rsqrt (one letter per operand)
_ARITY = {"ieee_add": "qq", "ieee_sub": "qq", "ieee_mul": "qq", "ieee_fdiv": "qq", "ieee_fmaf": "qqq",
          "ieee_frcp": "q", "ieee_fsqrt": "s", "ieee_frsqrt": "r"}


def _float64_result(name: str, xs: tuple[float, ...]) -> float:
    """The operation in float64 (inf / nan / signed-zero cases, where no rounding happens)."""
    a = [np.float64(x) for x in xs]
    with np.errstate(all="ignore"):
        if name == "ieee_fmaf":
            return float(a[0] * a[1] + a[2])
        if name == "ieee_frsqrt":
            return float(1 / np.sqrt(a[0]))
        return float(_NUMPY_RN[name](*a))


def _exceptional(name: str, xs: tuple[float, ...]) -> bool:
    """Whether the result is a special value (or a zero) that every mode gives alike."""
    if not all(math.isfinite(x) for x in xs):
        return True
    if name in ("ieee_fsqrt", "ieee_frsqrt"):
        return xs[0] <= 0
    if name == "ieee_frcp":
        return xs[0] == 0
    if name in ("ieee_mul", "ieee_fdiv"):
        return xs[0] == 0 or xs[1] == 0
    return False


def _exact(name: str, xs: tuple[float, ...]) -> Fraction:
    q = [Fraction(x) for x in xs]
    if name == "ieee_add":
        return q[0] + q[1]
    if name == "ieee_sub":
        return q[0] - q[1]
    if name == "ieee_mul":
        return q[0] * q[1]
    if name == "ieee_fdiv":
        return q[0] / q[1]
    if name == "ieee_frcp":
        return 1 / q[0]
    return q[0] * q[1] + q[2]


def _exact_zero(name: str, mode: str, xs: tuple[float, ...]) -> float:
    """IEEE's signed zero for an exactly zero sum of two addends (fma: the product and ``z``): their
    sign when both are zeros of one sign, else -0 rounding down and +0 in the other modes."""
    if name == "ieee_fmaf":
        first, second = xs[0] * xs[1], xs[2]  # zero only when a factor is: then its sign is exact
    else:
        first, second = xs[0], -xs[1] if name == "ieee_sub" else xs[1]
    if first == 0 and second == 0 and math.copysign(1.0, first) == math.copysign(1.0, second):
        return first
    return -0.0 if mode == "rd" else 0.0


def _comparator(name: str, xs: tuple[float, ...]) -> tuple[Callable[[Fraction], int], float]:
    """(sign of exact - c for a rational c, a float64 approximation of the exact value)."""
    kind = _ARITY[name][0]
    if kind == "q":
        exact = _exact(name, xs)
        try:
            approx = float(exact)
        except OverflowError:
            approx = math.inf if exact > 0 else -math.inf
        return (lambda c: (exact > c) - (exact < c)), approx
    x = Fraction(xs[0])
    if kind == "s":  # sqrt(x) against c >= 0: x against c * c
        return (lambda c: 1 if c < 0 else (x > c * c) - (x < c * c)), math.sqrt(xs[0])
    return (lambda c: 1 if c <= 0 else (1 > c * c * x) - (1 < c * c * x)), 1 / math.sqrt(xs[0])


def _rounded(name: str, mode: str, ftype: type, *xs: float) -> float:
    if _exceptional(name, xs):
        return _float64_result(name, xs)
    compare, approx = _comparator(name, xs)
    big = float(np.finfo(ftype).max)
    with np.errstate(over="ignore"):
        a = float(ftype(approx))
    a = max(-big, min(big, a))
    sign = compare(Fraction(a))
    if sign == 0:
        return a if a != 0 else _exact_zero(name, mode, xs)
    lo, hi = _bracket(compare, ftype, a, sign)
    if mode == "rn":
        result = _nearest(compare, ftype, lo, hi)
    elif mode == "ru":
        result = hi
    elif mode == "rd":
        result = lo
    else:
        result = lo if lo >= 0 else hi
    return math.copysign(0.0, lo + hi) if result == 0 else result


def _step(ftype: type, x: float, up: bool) -> float:
    with np.errstate(over="ignore"):
        return float(np.nextafter(ftype(x), ftype(math.inf if up else -math.inf)))


def _bracket(compare: Callable[[Fraction], int], ftype: type, a: float, sign: int) -> tuple[float, float]:
    """The neighbouring floats (or infinities) of ``ftype`` strictly around the exact value."""
    lo, hi = (a, _step(ftype, a, True)) if sign > 0 else (_step(ftype, a, False), a)
    while math.isfinite(hi) and compare(Fraction(hi)) > 0:
        lo, hi = hi, _step(ftype, hi, True)
    while math.isfinite(lo) and compare(Fraction(lo)) < 0:
        lo, hi = _step(ftype, lo, False), lo
    return lo, hi


def _nearest(compare: Callable[[Fraction], int], ftype: type, lo: float, hi: float) -> float:
    """The nearer of ``lo`` and ``hi``; a tie goes to the even one (an infinity is even: past the
    largest float, whose last bit is one)."""
    if math.isinf(hi):
        mid = Fraction(lo) + (Fraction(lo) - Fraction(_step(ftype, lo, False))) / 2
    elif math.isinf(lo):
        mid = Fraction(hi) - (Fraction(_step(ftype, hi, True)) - Fraction(hi)) / 2
    else:
        mid = (Fraction(lo) + Fraction(hi)) / 2
    side = compare(mid)
    if side:
        return hi if side > 0 else lo
    odd = int(np.asarray(lo, dtype=ftype).view(np.dtype(f"u{np.dtype(ftype).itemsize}"))) & 1
    return hi if odd else lo
