"""Small integer facts the CUDA lowering needs: known divisors (alignment) and value ranges
(bounds checks that can be dropped). Conservative: an unknown answer never removes a check."""

from __future__ import annotations

import math

from ...core_ir import expr as E
from ...core_ir.dtypes import DType
from ...core_ir.stmt import Kernel

Range = tuple[int, int]


def block_ranges(kernel: Kernel, unknown_extent: int | None = None) -> dict[E.Var, Range]:
    """The range of each block index of ``kernel``; a dynamic grid extent counts as
    ``unknown_extent`` (its block index left out when ``None``)."""
    out: dict[E.Var, Range] = {}
    for v, g in zip(kernel.block_vars, kernel.grid):
        n = E.as_int(g)
        if n is None:
            n = unknown_extent
        if n is not None:
            out[v] = (0, n - 1)
    return out


def divisor(e: E.Expr) -> int:
    """A positive number that provably divides ``e`` (1 when nothing is known)."""
    if isinstance(e, E.Const) and e.dtype.is_int:
        return abs(int(e.value)) or 1 << 30
    if isinstance(e, E.BinOp):
        if e.op == "*":
            return divisor(e.a) * divisor(e.b)
        if e.op in ("+", "-"):
            return math.gcd(divisor(e.a), divisor(e.b))
        if e.op == "<<" and isinstance(e.b, E.Const):
            return divisor(e.a) << int(e.b.value)
    if isinstance(e, E.Cast) and e.dtype.is_int:
        return divisor(e.a)
    return 1


def bounds(e: E.Expr, ranges: dict[E.Var, Range]) -> Range | None:
    """Inclusive ``(lo, hi)`` of an integer expression given variable ranges, or ``None``."""
    if isinstance(e, E.Const):
        if e.dtype.is_int or e.dtype.is_bool:
            v = int(e.value)
            return v, v
        return None
    if isinstance(e, E.Var):
        return ranges.get(e)
    if isinstance(e, E.Cast):
        return bounds(e.a, ranges) if e.dtype.is_int else None
    if isinstance(e, (E.Load, E.AtomicLoad)):
        return _type_range(e.dtype)
    if not isinstance(e, E.BinOp):
        return None
    a, b = bounds(e.a, ranges), bounds(e.b, ranges)
    if a is None or b is None:
        return None
    if e.op in ARITH:
        return interval(e.op, a, b)
    if e.op in ("//", "/") and b[0] > 0 and a[0] >= 0:
        return a[0] // b[1], a[1] // b[0]
    if e.op == "%" and b[0] > 0:  # floor modulo by a positive divisor
        if a[0] >= 0 and a[1] < b[0]:
            return a
        return 0, min(a[1], b[1] - 1) if a[0] >= 0 else b[1] - 1
    if e.op == ">>" and 0 <= b[0] <= b[1] < 63 and a[0] >= 0:
        return a[0] >> b[1], a[1] >> b[0]
    if e.op == "&" and b[0] == b[1] and b[0] >= 0 and a[0] >= 0:
        return 0, min(a[1], b[0])
    if e.op == "|" and b[0] == b[1] and b[0] >= 0 and a[0] >= 0:
        if b[0] & ((1 << a[1].bit_length()) - 1) == 0:  # disjoint bits: an addition
            return a[0] + b[0], a[1] + b[0]
        return max(a[0], b[0]), a[1] + b[0]
    return None


#: the operators ``interval`` combines
ARITH = frozenset({"+", "-", "*", "min", "max"})


def interval(op: str, a: Range, b: Range) -> Range:
    """The range of ``x op y`` for ``x`` in ``a`` and ``y`` in ``b`` (``op`` in ``ARITH``)."""
    if op == "+":
        return a[0] + b[0], a[1] + b[1]
    if op == "-":
        return a[0] - b[1], a[1] - b[0]
    if op == "*":
        c = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
        return min(c), max(c)
    pick = min if op == "min" else max
    return pick(a[0], b[0]), pick(a[1], b[1])


def _type_range(dt: DType) -> Range | None:
    """The values a loaded integer of type ``dt`` can have (a byte: 0..255); ``None`` for other
    types."""
    if not dt.is_int or dt.bits > 32:
        return None
    lo = -(1 << (dt.bits - 1)) if dt.kind == "int" else 0
    return lo, lo + (1 << dt.bits) - 1


def prove_lt(a: E.Expr, b: E.Expr, ranges: dict[E.Var, Range]) -> bool:
    """Whether ``a < b`` always holds."""
    ra = bounds(a, ranges)
    rb = bounds(b, ranges)
    if ra is not None and rb is not None:
        return ra[1] < rb[0]
    diff = bounds(_sub(b, a), ranges)
    return diff is not None and diff[0] > 0


def _sub(a: E.Expr, b: E.Expr) -> E.Expr:
    return E.binary("-", a, b)


def nonneg(e: E.Expr, ranges: dict[E.Var, Range]) -> bool:
    r = bounds(e, ranges)
    return r is not None and r[0] >= 0


_NONNEG_OPS = frozenset({"+", "*", "/", "//", ">>", "&", "|", "min", "max"})


def index_nonneg(e: E.Expr, ranges: dict[E.Var, Range]) -> bool:
    """Whether the index ``e`` is ``>= 0`` as far as a bounds guard is concerned: proven by
    ``ranges``, or built without subtraction from non-negative constants and variables (loop,
    block and thread indices, sizes and scalar parameters, whose ranges are often unknown, count
    as non-negative), a floor modulo by such a divisor included. A value read from memory or a
    difference may be negative."""
    if nonneg(e, ranges) or isinstance(e, E.Var):
        return True
    if isinstance(e, E.Const):
        return e.dtype.is_int and int(e.value) >= 0
    if isinstance(e, E.Cast):
        return e.dtype.is_int and index_nonneg(e.a, ranges)
    if isinstance(e, E.BinOp) and e.op == "%":  # floor modulo: the divisor's sign
        return index_nonneg(e.b, ranges)
    if isinstance(e, E.BinOp) and e.op in _NONNEG_OPS:
        return index_nonneg(e.a, ranges) and index_nonneg(e.b, ranges)
    if isinstance(e, E.Select):
        return index_nonneg(e.t, ranges) and index_nonneg(e.f, ranges)
    return False


def range_checks(idx: tuple[E.Expr, ...], shape: tuple[E.Expr, ...], ranges: dict[E.Var, Range]) -> list[E.Expr]:
    """``0 <= i`` and ``i < dim`` for each index ``i`` of ``idx`` into a tensor of ``shape``,
    leaving out the comparisons ``ranges`` prove: a region whose start comes from memory (a
    group's first row read from an offsets tensor) may begin before the tensor as well as run
    past its end."""
    checks: list[E.Expr] = []
    for i, dim in zip(idx, shape):
        if not index_nonneg(i, ranges):
            checks.append(E.binary("<=", E.const(0, i.dtype), i))
        if not prove_lt(i, dim, ranges):
            checks.append(E.binary("<", i, dim))
    return checks


def all_of(checks: list[E.Expr]) -> E.Expr | None:
    """The conjunction of ``checks`` (``None`` for none)."""
    cond: E.Expr | None = None
    for c in checks:
        cond = c if cond is None else E.binary("and", cond, c)
    return cond
