"""TileLang's packed x2 math and ``T.fast_rcp`` as a user writes them, and exact references.

``packed_ops`` computes every packed operation on ``n`` pairs (``R[k, 2p + lane]`` for op ``k``);
``reference`` rounds each lane's exact rational result once, to nearest even, independently of any
floating-point library rounding.
"""

from __future__ import annotations

import math
from fractions import Fraction

import torch

import tilelang_x as tilelang
import tilelang_x.language as T

OPS = ("add2", "sub2", "mul2", "fma2", "max2", "min2", "abs2")


@tilelang.jit(out_idx=[-1])
def packed_ops(n, dtype=T.float16):
    packed = {"float16": T.float16x2, "bfloat16": T.bfloat16x2, "float32": T.float32x2}[str(dtype)]

    @T.prim_func
    def main(A: T.Tensor((2 * n,), dtype), B: T.Tensor((2 * n,), dtype), C: T.Tensor((2 * n,), dtype),
             R: T.Tensor((len(OPS), 2 * n), dtype)):
        with T.Kernel(1, threads=128):
            for p in T.Parallel(n):
                pair = T.Ramp(2 * p, 1, 2)
                x, y = A[pair], B[pair]
                z = packed(C[2 * p], C[2 * p + 1])
                R[0, pair] = T.add2(x, y)
                R[1, pair] = T.sub2(x, y)
                R[2, pair] = T.mul2(x, y)
                R[3, pair] = T.fma2(x, y, z)
                R[4, pair] = T.max2(x, y)
                R[5, pair] = T.min2(x, y)
                R[6, pair] = T.abs2(x)

    return main


@tilelang.jit(out_idx=[-1])
def packed_bits(n):
    """The words of ``T.float16x2`` pairs and the pairs of the words, through ``T.reinterpret``."""

    @T.prim_func
    def main(A: T.Tensor((2 * n,), T.float16), W: T.Tensor((n,), T.uint32), R: T.Tensor((2 * n,), T.float16)):
        with T.Kernel(1, threads=128):
            for p in T.Parallel(n):
                W[p] = T.reinterpret(T.uint32, T.abs2(A[T.Ramp(2 * p, 1, 2)]))
                R[T.Ramp(2 * p, 1, 2)] = T.reinterpret(T.float16x2, W[p] ^ 0x80008000)

    return main


@tilelang.jit(out_idx=[-1])
def fast_rcp(n):
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), R: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(n):
                R[i] = T.fast_rcp(A[i])

    return main


#: dtype -> (significand bits with the implicit one, minimum normal exponent, maximum exponent)
_FORMATS = {torch.float16: (11, -14, 15), torch.bfloat16: (8, -126, 127), torch.float32: (24, -126, 127)}


def round_exact(v: Fraction, dtype: torch.dtype) -> float:
    """``v`` rounded to nearest even in ``dtype``, overflowing to an infinity (a zero is +0)."""
    if v == 0:
        return 0.0
    p, emin, emax = _FORMATS[dtype]
    a = abs(v)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    ulp = Fraction(2) ** (max(e, emin) - p + 1)
    q = a / ulp
    m = math.floor(q)
    if q - m > Fraction(1, 2) or (q - m == Fraction(1, 2) and m % 2 == 1):
        m += 1
    r = m * ulp
    out = math.inf if r >= Fraction(2) ** (emax + 1) else float(r)
    return -out if v < 0 else out


def _lane(op: str, x: float, y: float, z: float, dtype: torch.dtype) -> float:
    if op == "abs2":
        return abs(x)
    if op in ("max2", "min2"):
        if math.isnan(x) or math.isnan(y):
            return y if math.isnan(x) else x
        if x == 0 and y == 0:
            neg = (math.copysign(1, x) < 0) and (math.copysign(1, y) < 0) if op == "max2" else \
                (math.copysign(1, x) < 0) or (math.copysign(1, y) < 0)
            return -0.0 if neg else 0.0
        return max(x, y) if op == "max2" else min(x, y)
    terms = {"add2": (x, 1.0, y), "sub2": (y, -1.0, x), "mul2": (x, y, 0.0), "fma2": (x, y, z)}[op]
    if not all(math.isfinite(t) for t in terms):
        return terms[0] * terms[1] + terms[2]  # infinities and NaNs: no rounding happens
    exact = Fraction(terms[0]) * Fraction(terms[1]) + Fraction(terms[2])
    return round_exact(exact, dtype)


def reference(op: str, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Each lane of ``op`` on ``a``, ``b``, ``c`` (one dtype), computed exactly and rounded once."""
    xs, ys, zs = (t.double().tolist() for t in (a, b, c))
    out = [_lane(op, x, y, z, a.dtype) for x, y, z in zip(xs, ys, zs)]
    return torch.tensor(out, dtype=torch.float64).to(a.dtype)


def special_values(dtype: torch.dtype) -> list[float]:
    """Zeros, infinities, a NaN, the extremes, the smallest subnormal and values around 1."""
    info = torch.finfo(dtype)
    tiny = info.smallest_normal * info.eps
    return [0.0, -0.0, math.inf, -math.inf, math.nan, info.max, -info.max, tiny, -tiny, 1.0, -1.0,
            1.0 + info.eps, 1.5, 3.0, info.smallest_normal]


def tie_cases(dtype: torch.dtype) -> tuple[list[float], list[float], list[float]]:
    """``fma2`` operands whose product lies exactly halfway between two values of ``dtype``, with an
    addend far below it (+-the smallest subnormal, 0): correct results need one rounding."""
    info = torch.finfo(dtype)
    tiny = info.smallest_normal * info.eps
    b = 1.0 + info.eps  # 1.5 * b = 1.5 + eps + eps / 2: a tie between 1.5 + eps and 1.5 + 2 eps
    return [1.5, 1.5, 1.5, -1.5], [b, b, b, b], [-tiny, tiny, 0.0, tiny]
