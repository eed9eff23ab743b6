"""Arithmetic on 16- and 8-bit floats as the IR defines it: every operation rounded to its dtype.

CUDA computes such values in float32 (``codegen.eval_ctype``), which is exact for one operation
but not for a chain: ``(a - b) * c`` in float16 rounds ``a - b`` before the product, as the
interpreter and TileLang's ``half_t`` do. So a narrow result is rounded where another operation
consumes it (a store rounds it anyway), unless it is provably exact: operations whose result is
one of their operands or an integer of the operands' (min, max, abs, negation, floor, ...), and
integers small enough for the dtype's significand (a 4-bit weight code minus 8).
"""

from __future__ import annotations

from ...core_ir import expr as E
from ...core_ir.arith import round_float
from ...core_ir.dtypes import DType
from ...core_ir.packed import packed_parts
from .analysis import ARITH, Range, bounds, interval

#: significand bits (with the implicit one): integers up to 2^bits are exact in the dtype
SIGNIFICAND = {"float16": 11, "bfloat16": 8, "float8_e4m3": 4, "float8_e5m2": 3}

_ROUNDING_OPS = frozenset({"+", "-", "*", "/", "//", "%", "**"})
#: functions whose result is exact in the argument's dtype when the argument is
_EXACT_FUNCS = frozenset({"abs", "floor", "ceil", "trunc", "round", "nearbyint", "reinterpret"})


def is_narrow_float(dt: DType) -> bool:
    return dt.name in SIGNIFICAND


def needs_rounding(e: E.Expr, ranges: dict[E.Var, Range]) -> bool:
    """Whether ``e``, computed in float32, may differ from its value rounded to its narrow dtype."""
    if not is_narrow_float(e.dtype):
        return False
    if isinstance(e, E.BinOp):
        rounds = e.op in _ROUNDING_OPS
    elif isinstance(e, E.Call):  # a lane of a packed x2 op is rounded by its instruction
        rounds = e.name not in _EXACT_FUNCS and packed_parts(e.name) is None
    else:
        return False
    if not rounds:
        return False
    r = integer_bounds(e, ranges)
    limit = 1 << SIGNIFICAND[e.dtype.name]
    return r is None or not -limit <= r[0] <= r[1] <= limit


def integer_bounds(e: E.Expr, ranges: dict[E.Var, Range]) -> Range | None:
    """``(lo, hi)`` when every value of the float expression ``e`` is an integer in that range."""
    if isinstance(e, E.Const):
        v = float(e.value)
        return (int(v), int(v)) if v.is_integer() else None
    if isinstance(e, E.Cast):
        return bounds(e.a, ranges) if e.a.dtype.is_int else None
    if isinstance(e, E.Call) and e.name == "reinterpret" and e.args[0].dtype.is_int:
        return _integer_bits(bounds(e.args[0], ranges), e.dtype)
    if isinstance(e, E.UnaryOp) and e.op == "neg":
        r = integer_bounds(e.a, ranges)
        return None if r is None else (-r[1], -r[0])
    if isinstance(e, E.BinOp) and e.op in ARITH:
        a, b = integer_bounds(e.a, ranges), integer_bounds(e.b, ranges)
        return None if a is None or b is None else interval(e.op, a, b)
    return None


#: the bits of the 16-bit floats in [2^k, 2^(k+1)), where the spacing is 1: (first bits, 2^k)
UNIT_SPACED = {"float16": (0x6400, 1024), "bfloat16": (0x4300, 128)}


def _integer_bits(r: Range | None, dt: DType) -> Range | None:
    """The integers whose bits lie in ``r`` (the "magic number" conversion of small unsigned
    codes: ``0x6400 | q`` read as float16 is 1024 + q)."""
    if r is None or dt.name not in UNIT_SPACED:
        return None
    first, value = UNIT_SPACED[dt.name]
    if not first <= r[0] <= r[1] < first + value:
        return None
    return value + r[0] - first, value + r[1] - first


def narrow_constant(e: E.Const) -> float:
    """A narrow float literal's value in its dtype (the IR keeps the literal as written)."""
    r = round_float(float(e.value), e.dtype)
    return float(e.value) if r is None else r
