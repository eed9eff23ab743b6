"""Two adjacent 16-bit fragment elements computed as one pair (``f16x2`` / ``bf16x2`` instructions).

A ``T.Parallel`` nest whose one statement writes a float16 / bfloat16 register fragment, where
register slots 2k and 2k + 1 hold adjacent elements (as every mma / wgmma operand layout has them),
runs over slot pairs when its value does 16-bit arithmetic (``tlx.half_pairs``): paired
instructions compute both elements, each rounded once as the element operation is
(``narrow_math``), without the float32 round trip of each operand and result. An integer cast to
float16 that is exact there (a 4-bit weight code) needs no conversion instruction: ``0x6400 | q``
read as float16 is ``1024 + q``, and one paired subtraction leaves ``q`` (or ``q - 8``).
"""

from __future__ import annotations

import struct
from typing import Any

from ...core_ir import expr as E
from ...core_ir.arith import round_float
from ...core_ir.dtypes import DType
from ...core_ir.evaluate import evaluate
from ...core_ir.simplify import simplify
from ...core_ir.stmt import For, Stmt, Store
from ...core_ir.visit import flat_seq, substitute
from .analysis import Range, bounds
from .lir import PairStore
from .narrow_math import SIGNIFICAND, UNIT_SPACED, integer_bounds

#: the dtypes paired, and the suffix of their tlx_cuda.h functions (tlx_add2_h, tlx_cvt_h2, ...)
SUFFIX = {"float16": "h", "bfloat16": "b"}
_OPS = {"+": "add", "-": "sub", "*": "mul", "min": "min", "max": "max"}

Plan = tuple[Any, ...]


def pair_stores(body: Stmt, v: E.Var, count: int, ranges: dict[E.Var, Range], fresh: Any) -> Stmt | None:
    """``for v in range(count): buf[slot(v)] = value(v)`` as a loop over slot pairs, or ``None``
    when the body is not one such store, its slots do not pair up, or pairing saves nothing."""
    stmts = flat_seq(body)
    if len(stmts) != 1 or not isinstance(stmts[0], Store) or count % 2:
        return None
    st = stmts[0]
    dt = st.buffer.dtype
    if dt.name not in SUFFIX or st.buffer.scope != "local" or len(st.indices) != 1:
        return None
    if not _slots_pair_up(st.indices[0], v, count):
        return None
    trial = E.Var("u")  # renamed from ``fresh`` only when the nest pairs (names stay stable otherwise)
    known = {**ranges, trial: (0, count // 2 - 1)}
    lo, hi = (simplify(substitute(st.value, {v: trial * 2 + k}), known) for k in (0, 1))
    if not _computes(plan(lo, hi, dt, known)):
        return None
    index = simplify(substitute(st.indices[0], {v: trial * 2}), known)
    u = E.Var(fresh("u"))
    pair = substitute(PairStore(st.buffer, index, lo, hi, st.loc), {trial: u})
    return For(u, E.const(count // 2), "unroll", pair, None, (), st.loc)


def _slots_pair_up(slot: E.Expr, v: E.Var, count: int) -> bool:
    try:
        got = [int(evaluate(slot, {v: k})) for k in range(count)]
    except (TypeError, KeyError):  # the slot depends on more than v
        return False
    return all(got[k] % 2 == 0 and got[k + 1] == got[k] + 1 for k in range(0, count, 2))


def plan(a: E.Expr, b: E.Expr, dt: DType, ranges: dict[E.Var, Range]) -> Plan:
    """How to compute the pair ``(a, b)`` of ``dt`` values: a tree of ``("op", name, x, y)``,
    ``("bits", u32)``, ``("pack", load_a, load_b)``, ``("codes", qa, qb, minus)`` (small unsigned
    integers through their float bits) and ``("cvt", a, b)`` (two values rounded from float32)."""
    if isinstance(a, E.Const) and isinstance(b, E.Const):
        return "bits", _bits(float(a.value), dt) | _bits(float(b.value), dt) << 16
    if isinstance(a, E.Load) and isinstance(b, E.Load) and a.buffer.dtype == dt == b.buffer.dtype \
            and a.buffer.scope != "var" and b.buffer.scope != "var":
        return "pack", a, b
    if isinstance(a, E.BinOp) and isinstance(b, E.BinOp) and a.op == b.op and a.op in _OPS and a.dtype == dt:
        codes = _shifted_codes(a, b, dt, ranges)
        if codes is not None:
            return codes
        return "op", _OPS[a.op], plan(a.a, b.a, dt, ranges), plan(a.b, b.b, dt, ranges)
    if isinstance(a, E.Cast) and isinstance(b, E.Cast) and a.dtype == dt == b.dtype:
        if a.a.dtype.is_int and b.a.dtype.is_int and _are_codes(a.a, b.a, dt, ranges):
            return "codes", a.a, b.a, UNIT_SPACED[dt.name][1]
        if a.a.dtype.bits == 32 and a.a.dtype.is_float and b.a.dtype == a.a.dtype:
            return "cvt", a.a, b.a
    return "cvt", a, b


def _shifted_codes(a: E.BinOp, b: E.BinOp, dt: DType, ranges: dict[E.Var, Range]) -> Plan | None:
    """``cast(q) - c`` / ``cast(q) + c`` of codes, exact in ``dt``: one subtraction from the bits."""
    if a.op not in ("+", "-") or not all(isinstance(x, E.Cast) and x.a.dtype.is_int for x in (a.a, b.a)):
        return None
    if not (isinstance(a.b, E.Const) and isinstance(b.b, E.Const) and a.b.value == b.b.value):
        return None
    if not _are_codes(a.a.a, b.a.a, dt, ranges) or not (_exact(a, dt, ranges) and _exact(b, dt, ranges)):
        return None
    c = float(a.b.value)
    minus = UNIT_SPACED[dt.name][1] + (c if a.op == "-" else -c)
    if not minus.is_integer() or round_float(minus, dt) != minus:
        return None
    return "codes", a.a.a, b.a.a, int(minus)


def _exact(e: E.Expr, dt: DType, ranges: dict[E.Var, Range]) -> bool:
    r = integer_bounds(e, ranges)
    limit = 1 << SIGNIFICAND[dt.name]
    return r is not None and -limit <= r[0] <= r[1] <= limit


def _are_codes(qa: E.Expr, qb: E.Expr, dt: DType, ranges: dict[E.Var, Range]) -> bool:
    limit = UNIT_SPACED[dt.name][1]
    return all((r := bounds(q, ranges)) is not None and 0 <= r[0] and r[1] < limit for q in (qa, qb))


def _computes(p: Plan) -> bool:
    """Whether the plan does arithmetic or converts codes (else pairing saves nothing)."""
    return p[0] in ("op", "codes")


def _bits(value: float, dt: DType) -> int:
    r = round_float(value, dt)
    if dt.name == "float16":
        return struct.unpack("<H", struct.pack("<e", r))[0]
    return struct.unpack("<I", struct.pack("<f", r))[0] >> 16


def print_pair(cg: Any, s: PairStore) -> str:
    """The C statement storing ``s``'s pair (``cg``: the code generator, for operands)."""
    dt = s.buffer.dtype
    value = _text(cg, plan(s.lo, s.hi, dt, cg.ranges), dt)
    return f"tlx_st2_{SUFFIX[dt.name]}(&{cg.ref(s.buffer, (s.index,))}, {value});"


def _text(cg: Any, p: Plan, dt: DType) -> str:
    suffix = SUFFIX[dt.name]
    kind = p[0]
    if kind == "op":
        return f"tlx_{p[1]}2_{suffix}({_text(cg, p[2], dt)}, {_text(cg, p[3], dt)})"
    if kind == "bits":
        return f"{p[1]:#x}u"
    if kind == "pack":
        return f"tlx_pack_{suffix}2({cg.ref(p[1].buffer, p[1].indices)}, {cg.ref(p[2].buffer, p[2].indices)})"
    if kind == "codes":
        first = UNIT_SPACED[dt.name][0] * 0x10001
        codes = f"({first:#x}u | (tlx_u32)({cg.expr(p[1], True)}) | ((tlx_u32)({cg.expr(p[2], True)}) << 16))"
        minus = _bits(float(p[3]), dt) * 0x10001
        return f"tlx_sub2_{suffix}({codes}, {minus:#x}u)"
    return f"tlx_cvt_{suffix}2({cg.expr(p[1], True)}, {cg.expr(p[2], True)})"
