"""The index-arithmetic simplifier: canonical forms, interval and modular analysis.

Backends decide vectorization widths, bounds checks and layouts from the answers given here, so
every rewrite is *exact* for every assignment of the variables that lies inside ``bounds`` (a map
from ``Var`` to an inclusive ``(lo, hi)``; ``None`` means unbounded on that side). Integer
arithmetic is treated as mathematical (no wrap-around), as TVM's arith and TileLang do.

Canonical form of a signed-integer expression: a polynomial ``sum(coeff * atom * ...) + const``
whose atoms are the non-polynomial parts (variables, loads, ``//``, ``%``, ``min``, ``max``,
selects, casts, bit operations), each simplified in turn. Terms are ordered by the *names* of
what they contain (never by object identity), so the text of a simplified expression is the same
in every run; variables that share a name are told apart by their order of first appearance.
Positive terms come first, the constant last: ``bx * 128 + i - n + 3``.

Comparisons of integers become ``lhs < rhs``, ``lhs <= rhs``, ``==`` or ``!=`` with common terms
cancelled and common factors divided out, or a constant when the bounds decide them.
Floating-point expressions only get exact rewrites: constant folding with rounding to the dtype
(float16/32/64) and identities such as ``x * 1``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from . import dtypes
from .arith import COMPARE, Interval, dtype_range, round_float, trunc_div
from .dtypes import DType
from .evaluate import evaluate
from .expr import (
    COMPARE_OPS,
    AtomicFetch,
    AtomicLoad,
    BinOp,
    Call,
    Cast,
    Const,
    Expr,
    Load,
    Select,
    ThreadIndex,
    UnaryOp,
    Var,
    WarpOp,
    convert,
    fold_int,
)

Bounds = Mapping[Var, tuple[int | None, int | None]]

# ``evaluate`` (evaluate.py) and ``simplify_stmt`` (simplify_stmt.py, through ``__getattr__`` at the
# end) live in modules of their own and are importable from here too.
__all__ = [  # noqa: F822 - simplify_stmt
    "Bounds", "Interval", "as_linear", "bounds_of", "divisible", "evaluate", "implied_bounds", "modular",
    "prove", "simplify", "simplify_stmt",
]

_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_MAX_TERMS = 32  # distribute a product of sums only while the result stays this small
_MAX_PASSES = 6  # simplify() repeats until nothing changes; this bounds the repetitions


# ---- intervals ------------------------------------------------------------------------------

def _iadd(a: Interval, b: Interval) -> Interval:
    lo = None if a[0] is None or b[0] is None else a[0] + b[0]
    hi = None if a[1] is None or b[1] is None else a[1] + b[1]
    return lo, hi


def _iscale(a: Interval, k: int) -> Interval:
    if k == 0:
        return 0, 0
    lo, hi = a
    if k > 0:
        return (None if lo is None else lo * k), (None if hi is None else hi * k)
    return (None if hi is None else hi * k), (None if lo is None else lo * k)


def _imul(a: Interval, b: Interval) -> Interval:
    if a == (0, 0) or b == (0, 0):
        return 0, 0
    if a[0] is not None and a[0] == a[1]:
        return _iscale(b, a[0])
    if b[0] is not None and b[0] == b[1]:
        return _iscale(a, b[0])
    # corners over the extended integers, with 0 * inf taken as 0 (every real value is finite)
    inf = math.inf
    ea = (-inf if a[0] is None else a[0], inf if a[1] is None else a[1])
    eb = (-inf if b[0] is None else b[0], inf if b[1] is None else b[1])
    c = [0 if p == 0 or q == 0 else p * q for p in ea for q in eb]
    lo, hi = min(c), max(c)
    return (None if lo == -inf else int(lo)), (None if hi == inf else int(hi))


def _ifloordiv(a: Interval, c: int) -> Interval:
    """``a // c`` for a constant ``c > 0``."""
    return (None if a[0] is None else a[0] // c), (None if a[1] is None else a[1] // c)


def _ifloormod(a: Interval, c: int) -> Interval:
    """``a % c`` for a constant ``c > 0``."""
    lo, hi = a
    if lo is not None and hi is not None and lo // c == hi // c:
        shift = c * (lo // c)
        return lo - shift, hi - shift
    if lo is not None and lo >= 0 and hi is not None:
        return 0, min(c - 1, hi)
    return 0, c - 1


def _corners(a: Interval, b: Interval, fn: Any) -> Interval:
    if None in a or None in b:
        return None, None
    c = [fn(x, y) for x in a for y in b]
    return min(c), max(c)


def _wrap(v: int, dt: DType) -> int:
    """Two's-complement wrap of a constant cast to a narrower integer type."""
    lo, hi = dtype_range(dt)
    if lo is None or hi is None or lo <= v <= hi:
        return v
    span = hi - lo + 1
    return (v - lo) % span + lo


# ---- polynomials ----------------------------------------------------------------------------

Mono = tuple[int, ...]  # sorted atom ids, with repetition for powers


class _Poly:
    """``sum(coeff * prod(atoms)) + const`` over one integer dtype."""

    __slots__ = ("dtype", "terms", "const")

    def __init__(self, dtype: DType, terms: dict[Mono, int] | None = None, const: int = 0) -> None:
        self.dtype = dtype
        self.terms: dict[Mono, int] = terms if terms is not None else {}
        self.const = const

    def is_const(self) -> bool:
        return not self.terms

    def add(self, other: _Poly, sign: int = 1) -> _Poly:
        terms = dict(self.terms)
        for m, k in other.terms.items():
            v = terms.get(m, 0) + sign * k
            if v:
                terms[m] = v
            else:
                terms.pop(m, None)
        return _Poly(self.dtype, terms, self.const + sign * other.const)

    def add_const(self, c: int) -> _Poly:
        return _Poly(self.dtype, dict(self.terms), self.const + c)

    def scale(self, k: int) -> _Poly:
        if k == 0:
            return _Poly(self.dtype)
        return _Poly(self.dtype, {m: c * k for m, c in self.terms.items()}, self.const * k)

    def exact_div(self, g: int) -> _Poly:
        return _Poly(self.dtype, {m: c // g for m, c in self.terms.items()}, self.const // g)

    def content(self) -> int:
        """gcd of the term coefficients (0 for a constant)."""
        return math.gcd(*self.terms.values()) if self.terms else 0


def _const_poly(dt: DType, v: int) -> _Poly:
    return _Poly(dt, {}, v)


def _mono_mul(a: Mono, b: Mono) -> Mono:
    return tuple(sorted(a + b))


class _Atoms:
    """Registry of atoms shared by the contexts of one simplification pass."""

    def __init__(self, order: dict[int, int]) -> None:
        self.order = order  # id(Var or Buffer) -> index of first appearance in the input
        self.ids: dict[tuple, int] = {}
        self.exprs: list[Expr] = []
        self.okeys: list[tuple] = []

    def index(self, obj: Any) -> int:
        key = id(obj)
        if key not in self.order:
            self.order[key] = len(self.order)
        return self.order[key]

    def okey(self, e: Any) -> tuple:
        """A deterministic sort key: names and structure, never object identity."""
        if isinstance(e, Const):
            return (0, e.dtype.name, repr(e.value))
        if isinstance(e, Var):
            return (1, e.name, self.index(e))
        if isinstance(e, Load):
            return (2, e.buffer.name, self.index(e.buffer), tuple(self.okey(i) for i in e.indices))
        if isinstance(e, BinOp):
            return (3, e.op, self.okey(e.a), self.okey(e.b))
        if isinstance(e, UnaryOp):
            return (4, e.op, self.okey(e.a))
        if isinstance(e, Select):
            return (5, self.okey(e.cond), self.okey(e.t), self.okey(e.f))
        if isinstance(e, Cast):
            return (6, e.dtype.name, self.okey(e.a))
        if isinstance(e, Call):
            return (7, e.name, tuple(self.okey(a) for a in e.args), e.dtype.name)
        if isinstance(e, ThreadIndex):
            return (8, e.dim)
        if isinstance(e, WarpOp):
            return (9, e.op, tuple(self.okey(a) for a in e.args), e.width, e.dtype.name)
        return (10, type(e).__name__, self.index(e))

    def register(self, e: Expr) -> int:
        key = e.structural_key()
        aid = self.ids.get(key)
        if aid is None:
            aid = len(self.exprs)
            self.ids[key] = aid
            self.exprs.append(e)
            self.okeys.append(self.okey(e))
        return aid

    def mono_key(self, m: Mono) -> tuple:
        return tuple(sorted(self.okeys[a] for a in m))


def _appearance_order(root: Any) -> dict[int, int]:
    order: dict[int, int] = {}
    stack = [root]
    while stack:
        e = stack.pop()
        if isinstance(e, Var):
            order.setdefault(id(e), len(order))
            continue
        if isinstance(e, Load):
            order.setdefault(id(e.buffer), len(order))
        if isinstance(e, Expr):
            stack.extend(reversed(e.children()))
    return order


# ---- the simplifier -------------------------------------------------------------------------

class _Ctx:
    """One simplification pass under one set of variable bounds."""

    def __init__(self, bounds: Bounds, atoms: _Atoms) -> None:
        self.bounds: dict[Var, Interval] = dict(bounds)
        self.atoms = atoms
        self._abounds: dict[int, Interval] = {}

    def child(self, bounds: dict[Var, Interval] | None) -> _Ctx:
        return self if bounds is None else _Ctx(bounds, self.atoms)

    # -- dispatch --------------------------------------------------------------------------
    def simp(self, e: Expr) -> Expr:
        kind = e.dtype.kind
        if kind == "int":
            return self.render(self.sp(e))
        if kind == "bool":
            return self.bsimp(e)
        if kind == "float":
            return self.fsimp(e)
        return self.generic(e)

    def generic(self, e: Expr) -> Expr:
        """Children simplified, constants folded; for dtypes with no algebra of their own."""
        if isinstance(e, BinOp):
            a, b = self.simp(e.a), self.simp(e.b)
            if isinstance(a, Const) and isinstance(b, Const) and e.dtype.is_int:
                v = fold_int(e.op, int(a.value), int(b.value))
                if v is not None and dtype_range(e.dtype)[0] <= v <= dtype_range(e.dtype)[1]:  # type: ignore[operator]
                    return Const(v, e.dtype)
            return e if a is e.a and b is e.b else BinOp(e.op, a, b, e.dtype)
        if isinstance(e, Cast):
            return self.cast(e)
        return self.rebuild(e)

    def rebuild(self, e: Expr) -> Expr:
        """``e`` with its children simplified (no rewriting of ``e`` itself)."""
        if isinstance(e, Load):
            idx = tuple(self.simp(i) for i in e.indices)
            return e if all(a is b for a, b in zip(idx, e.indices)) else Load(e.buffer, idx, e.loc)
        if isinstance(e, AtomicLoad):
            idx = tuple(self.simp(i) for i in e.indices)
            return e if all(a is b for a, b in zip(idx, e.indices)) else AtomicLoad(e.buffer, idx, e.order, e.loc)
        if isinstance(e, AtomicFetch):  # operands only: never folded
            idx = tuple(self.simp(i) for i in e.indices)
            v = self.simp(e.value)
            same = v is e.value and all(a is b for a, b in zip(idx, e.indices))
            return e if same else AtomicFetch(e.kind, e.buffer, idx, v, e.loc)
        if isinstance(e, Call):
            args = tuple(self.simp(a) for a in e.args)
            return e if all(a is b for a, b in zip(args, e.args)) else Call(e.name, args, e.dtype)
        if isinstance(e, WarpOp):  # operands only: the lanes it reads decide its value, never folded
            args = tuple(self.simp(a) for a in e.args)
            return e if all(a is b for a, b in zip(args, e.args)) else WarpOp(e.op, args, e.width, e.dtype)
        if isinstance(e, UnaryOp):
            a = self.simp(e.a)
            return e if a is e.a else UnaryOp(e.op, a, e.dtype)
        if isinstance(e, BinOp):
            a, b = self.simp(e.a), self.simp(e.b)
            return e if a is e.a and b is e.b else BinOp(e.op, a, b, e.dtype)
        if isinstance(e, Select):
            return self.select_expr(e)
        return e

    # -- integer polynomials ---------------------------------------------------------------
    def atom(self, e: Expr) -> _Poly:
        if isinstance(e, Const):
            return _const_poly(e.dtype, int(e.value))
        return _Poly(e.dtype, {(self.atoms.register(e),): 1}, 0)

    def sp(self, e: Expr) -> _Poly:
        """The canonical polynomial of a signed-integer expression."""
        dt = e.dtype
        if isinstance(e, Const):
            return _const_poly(dt, int(e.value))
        if isinstance(e, Var):
            return self.atom(e)
        if isinstance(e, BinOp):
            op = e.op
            if op == "+":
                return self.merge_divmod(self.sp(e.a).add(self.sp(e.b)))
            if op == "-":
                return self.merge_divmod(self.sp(e.a).add(self.sp(e.b), -1))
            if op == "*":
                return self.mul(self.sp(e.a), self.sp(e.b))
            if op == "//":
                return self.floordiv(self.sp(e.a), self.sp(e.b))
            if op == "%":
                return self.floormod(self.sp(e.a), self.sp(e.b))
            if op == "/":
                return self.truncdiv(self.sp(e.a), self.sp(e.b))
            if op in ("min", "max"):
                return self.minmax(op, self.sp(e.a), self.sp(e.b))
            if op in ("<<", ">>"):
                a, b = self.sp(e.a), self.sp(e.b)
                if b.is_const() and 0 <= b.const < 64:
                    p = 1 << b.const
                    if op == ">>":
                        return self.floordiv(a, _const_poly(dt, p))
                    if _within(_iscale(self.pbounds(a), p), dt):  # a multiplication only without overflow:
                        return a.scale(p)  # (x << 28) >> 28 sign-extends a nibble, it is not x
                return self.atom(BinOp(op, self.render(a), self.render(b), dt))
            if op in ("&", "|", "^"):
                return self.bitop(op, self.sp(e.a), self.sp(e.b))
            if op == "**":
                a, b = self.sp(e.a), self.sp(e.b)
                if b.is_const() and 0 <= b.const <= 4:
                    out = _const_poly(dt, 1)
                    for _ in range(b.const):
                        out = self.mul(out, a)
                    return out
                return self.atom(BinOp(op, self.render(a), self.render(b), dt))
            return self.atom(self.rebuild(e))
        if isinstance(e, UnaryOp):
            if e.op == "neg":
                return self.sp(e.a).scale(-1)
            if e.op == "~":  # ~x == -x - 1 in two's complement
                return self.sp(e.a).scale(-1).add_const(-1)
            return self.atom(self.rebuild(e))
        if isinstance(e, Select):
            return self.atom(self.select_expr(e))
        if isinstance(e, Cast):
            out = self.cast(e)
            return self.sp(out) if not isinstance(out, Cast) and out is not e else self.atom(out)
        if isinstance(e, Call):
            out = self.rebuild(e)
            if isinstance(out, Call) and out.name == "abs" and isinstance(out.args[0], Const):
                return _const_poly(dt, abs(int(out.args[0].value)))
            return self.atom(out)
        if isinstance(e, Load):
            return self.atom(self.rebuild(e))
        return self.atom(e)

    def mul(self, a: _Poly, b: _Poly) -> _Poly:
        if a.is_const():
            return b.scale(a.const)
        if b.is_const():
            return a.scale(b.const)
        if (len(a.terms) + 1) * (len(b.terms) + 1) > _MAX_TERMS:
            x, y = sorted((self.render(a), self.render(b)), key=self.atoms.okey)
            return self.atom(BinOp("*", x, y, a.dtype))
        out = _Poly(a.dtype, {}, a.const * b.const)

        def put(m: Mono, k: int) -> None:
            if k:
                v = out.terms.get(m, 0) + k
                if v:
                    out.terms[m] = v
                else:
                    out.terms.pop(m, None)

        for ma, ka in a.terms.items():
            for mb, kb in b.terms.items():
                put(_mono_mul(ma, mb), ka * kb)
            put(ma, ka * b.const)
        for mb, kb in b.terms.items():
            put(mb, kb * a.const)
        return out

    def single_atom(self, p: _Poly) -> Expr | None:
        """The atom when ``p`` is exactly ``1 * atom + 0``."""
        if p.const == 0 and len(p.terms) == 1:
            (m, k), = p.terms.items()
            if k == 1 and len(m) == 1:
                return self.atoms.exprs[m[0]]
        return None

    # -- division --------------------------------------------------------------------------
    def floordiv(self, a: _Poly, b: _Poly) -> _Poly:
        dt = a.dtype
        if b.is_const():
            c = b.const
            if c == 0:
                return self.atom(BinOp("//", self.render(a), Const(0, dt), dt))
            if a.is_const():
                return _const_poly(dt, a.const // c)
            if c < 0:  # a // c == (-a) // (-c)
                return self.floordiv_c(a.scale(-1), -c)
            return self.floordiv_c(a, c)
        if a.is_const() and a.const == 0:
            return a
        return self.atom(BinOp("//", self.render(a), self.render(b), dt))

    def _split(self, r: _Poly, c: int) -> Iterable[tuple[int, _Poly, _Poly]]:
        """Ways to write ``r = g*A + B`` with ``g`` a proper divisor of ``c`` and ``0 <= B < g``."""
        cands = sorted({math.gcd(k, c) for k in r.terms.values()} - {1, c}, reverse=True)
        for g in cands:
            a_terms = {m: k // g for m, k in r.terms.items() if k % g == 0}
            if not a_terms:
                continue
            b_terms = {m: k for m, k in r.terms.items() if k % g}
            a_const, b_const = divmod(r.const, g)
            rest = _Poly(r.dtype, b_terms, b_const)
            lo, hi = self.pbounds(rest)
            if lo is not None and hi is not None and lo >= 0 and hi < g:
                yield g, _Poly(r.dtype, a_terms, a_const), rest

    def floordiv_c(self, a: _Poly, c: int) -> _Poly:
        """``a // c`` for a constant ``c > 0``."""
        dt = a.dtype
        if c == 1:
            return a
        q_terms = {m: k // c for m, k in a.terms.items() if k % c == 0}
        r_terms = {m: k for m, k in a.terms.items() if k % c}
        q_const, r_const = divmod(a.const, c)
        q = _Poly(dt, q_terms, q_const)
        r = _Poly(dt, r_terms, r_const)
        if r.is_const():  # 0 <= r_const < c
            return q
        g = math.gcd(c, r.content(), r.const)
        if g > 1:  # floor(g*R / (g*c')) == floor(R / c')
            r, c = r.exact_div(g), c // g
            if c == 1:
                return q.add(r)
        lo, hi = self.pbounds(r)
        if lo is not None and hi is not None and lo // c == hi // c:
            return q.add_const(lo // c)
        for g, big, _small in self._split(r, c):
            # floor((g*A + B) / (g*c')) == floor(A / c') when 0 <= B < g
            return q.add(self.floordiv_c(big, c // g))
        inner = self.single_atom(r.add_const(-r.const))
        if (isinstance(inner, BinOp) and inner.op == "//" and isinstance(inner.b, Const)
                and int(inner.b.value) > 0):
            # floor((floor(x / d) + k) / c) == floor((x + k*d) / (d*c))
            d = int(inner.b.value)
            return q.add(self.floordiv_c(self.sp(inner.a).add_const(r.const * d), d * c))
        return q.add(self.atom(BinOp("//", self.render(r), Const(c, dt), dt)))

    def floormod(self, a: _Poly, b: _Poly) -> _Poly:
        dt = a.dtype
        if b.is_const():
            c = b.const
            if c == 0:
                return self.atom(BinOp("%", self.render(a), Const(0, dt), dt))
            if a.is_const():
                return _const_poly(dt, a.const % c)
            if c < 0:  # a % c == -((-a) % (-c))
                return self.floormod_c(a.scale(-1), -c).scale(-1)
            return self.floormod_c(a, c)
        if a.is_const() and a.const == 0:
            return a
        return self.atom(BinOp("%", self.render(a), self.render(b), dt))

    def strip_inner_mod(self, a: _Poly, c: int) -> _Poly:
        """Replace atoms ``x % m`` with ``c | m`` by ``x``: congruent modulo ``c``."""
        def replaceable(aid: int) -> bool:
            e = self.atoms.exprs[aid]
            return (isinstance(e, BinOp) and e.op == "%" and isinstance(e.b, Const)
                    and int(e.b.value) > 0 and int(e.b.value) % c == 0)

        if not any(replaceable(aid) for m in a.terms for aid in m):
            return a
        out = _const_poly(a.dtype, a.const)
        for m, k in a.terms.items():
            term = _const_poly(a.dtype, k)
            for aid in m:
                x = self.atoms.exprs[aid]
                term = self.mul(term, self.sp(x.a) if replaceable(aid) else self.atom(x))  # type: ignore[attr-defined]
            out = out.add(term)
        return out

    def floormod_c(self, a: _Poly, c: int) -> _Poly:
        """``a % c`` for a constant ``c > 0``."""
        dt = a.dtype
        if c == 1:
            return _const_poly(dt, 0)
        a = self.strip_inner_mod(a, c)
        terms = {}
        for m, k in a.terms.items():
            # any representative of k modulo c will do; keep the sign to keep the text readable
            red = k % c if k > 0 else -((-k) % c)
            if red:
                terms[m] = red
        r = _Poly(dt, terms, a.const % c)
        if r.is_const():
            return r
        g = math.gcd(c, r.content(), r.const)
        if g > 1:  # (g*R) % (g*c') == g * (R % c')
            return self.floormod_c(r.exact_div(g), c // g).scale(g)
        lo, hi = self.pbounds(r)
        if lo is not None and hi is not None and lo // c == hi // c:
            return r.add_const(-c * (lo // c))
        for g, big, small in self._split(r, c):
            # (g*A + B) % (g*c') == g * (A % c') + B when 0 <= B < g
            return self.floormod_c(big, c // g).scale(g).add(small)
        return self.atom(BinOp("%", self.render(r), Const(c, dt), dt))

    def truncdiv(self, a: _Poly, b: _Poly) -> _Poly:
        """C-style ``/`` on integers (rounds toward zero)."""
        dt = a.dtype
        if a.is_const() and b.is_const() and b.const != 0:
            return _const_poly(dt, trunc_div(a.const, b.const))
        alo, ahi = self.pbounds(a)
        blo, bhi = self.pbounds(b)
        if b.is_const() and b.const != 0:
            c = b.const
            if alo is not None and alo >= 0:
                q = self.floordiv_c(a, abs(c))
                return q if c > 0 else q.scale(-1)
            if ahi is not None and ahi <= 0:
                q = self.floordiv_c(a.scale(-1), abs(c))
                return q.scale(-1) if c > 0 else q
        elif alo is not None and alo >= 0 and blo is not None and blo >= 1:
            return self.floordiv(a, b)
        return self.atom(BinOp("/", self.render(a), self.render(b), dt))

    def merge_divmod(self, p: _Poly) -> _Poly:
        """``k*(x % c) + k*c*(x // c)`` -> ``k*x`` and ``k*(x % c) + k*c*((x // c) % d)`` ->
        ``k*(x % (c*d))``: the pieces of a mixed-radix split put back together."""
        if len(p.terms) < 2:
            return p
        dt = p.dtype
        for m, k in list(p.terms.items()):
            if len(m) != 1 or m not in p.terms:
                continue
            e = self.atoms.exprs[m[0]]
            if not (isinstance(e, BinOp) and e.op == "%" and isinstance(e.b, Const) and int(e.b.value) > 0):
                continue
            x, c = e.a, int(e.b.value)
            div = BinOp("//", x, Const(c, dt), dt)
            did = self.atoms.ids.get(div.structural_key())
            if did is not None and p.terms.get((did,)) == k * c:
                rest = _Poly(dt, {mm: kk for mm, kk in p.terms.items() if mm not in (m, (did,))}, p.const)
                return self.merge_divmod(rest.add(self.sp(x).scale(k)))
            for d_mono, dk in p.terms.items():
                if len(d_mono) != 1 or dk != k * c:
                    continue
                f = self.atoms.exprs[d_mono[0]]
                if (isinstance(f, BinOp) and f.op == "%" and isinstance(f.b, Const)
                        and int(f.b.value) > 0 and f.a.same_as(div)):
                    d = int(f.b.value)
                    rest = _Poly(dt, {mm: kk for mm, kk in p.terms.items() if mm not in (m, d_mono)}, p.const)
                    return self.merge_divmod(rest.add(self.floormod_c(self.sp(x), c * d).scale(k)))
        return p

    # -- min / max / bit operations ------------------------------------------------------------
    def minmax(self, op: str, a: _Poly, b: _Poly) -> _Poly:
        dt = a.dtype
        if a.is_const() and b.is_const():
            return _const_poly(dt, min(a.const, b.const) if op == "min" else max(a.const, b.const))
        lo, hi = self.pbounds(a.add(b, -1))
        if hi is not None and hi <= 0:  # a <= b
            return a if op == "min" else b
        if lo is not None and lo >= 0:  # a >= b
            return b if op == "min" else a
        # min(x + t, y + t) == min(x, y) + t for the terms t (and constant) both sides share
        common = {m: k for m, k in a.terms.items() if b.terms.get(m) == k}
        shared = _Poly(dt, common, a.const if a.const == b.const else 0)
        if shared.terms or shared.const:
            return self.minmax(op, a.add(shared, -1), b.add(shared, -1)).add(shared)
        x, y = sorted((self.render(a), self.render(b)), key=self.atoms.okey)
        return self.atom(BinOp(op, x, y, dt))

    def bitop(self, op: str, a: _Poly, b: _Poly) -> _Poly:
        dt = a.dtype
        if a.is_const() and b.is_const():
            return _const_poly(dt, fold_int(op, a.const, b.const))  # type: ignore[arg-type]
        for x, m in ((a, b), (b, a)):
            if not m.is_const():
                continue
            k = m.const
            if op == "&":
                if k == 0:
                    return _const_poly(dt, 0)
                if k == -1:
                    return x
                if k > 0 and k & (k + 1) == 0:  # x & (2**n - 1) == x % 2**n (two's complement)
                    return self.floormod_c(x, k + 1)
            elif k == 0:  # x | 0, x ^ 0
                return x
        ea, eb = self.render(a), self.render(b)
        if ea.same_as(eb):
            return _const_poly(dt, 0) if op == "^" else a
        x, y = sorted((ea, eb), key=self.atoms.okey)
        return self.atom(BinOp(op, x, y, dt))

    # -- casts and selects -----------------------------------------------------------------
    def cast(self, e: Cast) -> Expr:
        dt = e.dtype
        inner = self.simp(e.a)
        if inner.dtype == dt:
            return inner
        if isinstance(inner, Const):
            v = inner.value
            if dt.is_bool:
                return Const(bool(v), dt)
            if dt.is_int:
                if isinstance(v, float):
                    if not math.isfinite(v):
                        return Cast(inner, dt)
                    v = math.trunc(v)
                return Const(_wrap(int(v), dt), dt)
            r = round_float(float(v), dt)
            if r is not None:
                return Const(r, dt)
        if dt.is_bool and inner.dtype.kind == "int":
            return self.cmp_int("!=", self.sp(inner), _const_poly(inner.dtype, 0))
        return e if inner is e.a else Cast(inner, dt)

    def select_expr(self, e: Select) -> Expr:
        cond = self.bsimp(e.cond)
        if isinstance(cond, Const):
            return self.simp(e.t if cond.value else e.f)
        t = self.child(self.refine(cond, True)).simp(e.t)
        f = self.child(self.refine(cond, False)).simp(e.f)
        if t.same_as(f):
            return t
        if e.dtype.is_bool and isinstance(t, Const) and isinstance(f, Const):
            return cond if t.value else self.bsimp(UnaryOp("not", cond, dtypes.bool_))
        return Select(cond, t, f, e.dtype)

    # -- booleans --------------------------------------------------------------------------
    def bsimp(self, e: Expr) -> Expr:
        b = dtypes.bool_
        if isinstance(e, Const):
            return Const(bool(e.value), b)
        if isinstance(e, BinOp):
            op = e.op
            if op in COMPARE_OPS:
                if e.a.dtype.kind == "int":
                    return self.cmp_int(op, self.sp(e.a), self.sp(e.b))
                x, y = self.simp(e.a), self.simp(e.b)
                if isinstance(x, Const) and isinstance(y, Const):
                    return Const(bool(COMPARE[op](x.value, y.value)), b)
                if x.dtype.is_bool and op in ("==", "!="):
                    for p, q in ((x, y), (y, x)):
                        if isinstance(q, Const):
                            keep = bool(q.value) == (op == "==")
                            return p if keep else self.bsimp(UnaryOp("not", p, b))
                    if x.same_as(y):
                        return Const(op == "==", b)
                return BinOp(op, x, y, b)
            if op in ("and", "or"):
                is_and = op == "and"
                x = self.bsimp(e.a)
                if isinstance(x, Const):
                    return self.bsimp(e.b) if bool(x.value) == is_and else Const(not is_and, b)
                # in `x and y`, y is only looked at where x holds (and in `x or y` where it fails)
                y = self.child(self.refine(x, is_and)).bsimp(e.b)
                if isinstance(y, Const):
                    return x if bool(y.value) == is_and else Const(not is_and, b)
                if x.same_as(y):
                    return x
                x2 = self.child(self.refine(y, is_and)).bsimp(x)
                if isinstance(x2, Const):
                    return y if bool(x2.value) == is_and else Const(not is_and, b)
                return BinOp(op, x, y, b)
            return self.rebuild(e)
        if isinstance(e, UnaryOp) and e.op == "not":
            x = self.bsimp(e.a)
            if isinstance(x, Const):
                return Const(not x.value, b)
            if isinstance(x, UnaryOp) and x.op == "not":
                return x.a
            if isinstance(x, BinOp) and x.op in COMPARE_OPS and x.a.dtype.kind == "int":
                return self.cmp_int(_NEGATE[x.op], self.sp(x.a), self.sp(x.b))
            return UnaryOp("not", x, b)
        if isinstance(e, Select):
            return self.select_expr(e)
        if isinstance(e, Cast):
            return self.cast(e)
        return self.rebuild(e)

    def cmp_int(self, op: str, a: _Poly, b: _Poly) -> Expr:
        bt = dtypes.bool_
        if op in (">", ">="):
            op, a, b = ("<" if op == ">" else "<="), b, a
        d = a.add(b, -1)
        if d.is_const():
            return Const(bool(COMPARE[op](d.const, 0)), bt)
        lo, hi = self.pbounds(d)
        if op == "<":
            if hi is not None and hi < 0:
                return Const(True, bt)
            if lo is not None and lo >= 0:
                return Const(False, bt)
        elif op == "<=":
            if hi is not None and hi <= 0:
                return Const(True, bt)
            if lo is not None and lo > 0:
                return Const(False, bt)
        else:
            g = d.content()
            never = (lo is not None and lo > 0) or (hi is not None and hi < 0) or d.const % g != 0
            if never:
                return Const(op == "!=", bt)
            d = d.exact_div(g)
            first = min(d.terms, key=self.atoms.mono_key)
            if d.terms[first] < 0:  # orient so that `i == n` and `n == i` print alike
                d = d.scale(-1)
            return self.cmp_build(op, d)
        g = d.content()
        if g > 1:
            if op == "<":  # g*D + k < 0  iff  D + floor(k / g) < 0
                d = _Poly(d.dtype, {m: k // g for m, k in d.terms.items()}, d.const // g)
            else:  # g*D + k <= 0  iff  D + ceil(k / g) <= 0
                d = _Poly(d.dtype, {m: k // g for m, k in d.terms.items()}, -((-d.const) // g))
        return self.cmp_build(op, d)

    def cmp_build(self, op: str, d: _Poly) -> Expr:
        """``d op 0`` written as ``positive part op negative part``."""
        dt = d.dtype
        lhs = _Poly(dt, {m: k for m, k in d.terms.items() if k > 0}, max(d.const, 0))
        rhs = _Poly(dt, {m: -k for m, k in d.terms.items() if k < 0}, max(-d.const, 0))
        return BinOp(op, self.render(lhs), self.render(rhs), dtypes.bool_)

    # -- floats ----------------------------------------------------------------------------
    def fsimp(self, e: Expr) -> Expr:
        dt = e.dtype
        if isinstance(e, Const):
            return e
        if isinstance(e, BinOp) and e.op in ("+", "-", "*", "/", "min", "max"):
            x, y = self.simp(e.a), self.simp(e.b)
            if isinstance(x, Const) and isinstance(y, Const):
                folded = _fold_float(e.op, float(x.value), float(y.value), dt)
                if folded is not None:
                    return Const(folded, dt)
            if e.op == "*":
                if _is_float_const(y, 1.0):
                    return x
                if _is_float_const(x, 1.0):
                    return y
            elif e.op == "/" and _is_float_const(y, 1.0):
                return x
            elif e.op == "-" and _is_float_const(y, 0.0, negative=False):  # x - (+0.0) == x
                return x
            elif e.op == "+":  # x + (-0.0) == x, but x + (+0.0) is not (for x == -0.0)
                if _is_float_const(y, 0.0, negative=True):
                    return x
                if _is_float_const(x, 0.0, negative=True):
                    return y
            elif e.op in ("min", "max") and x.same_as(y):
                return x
            return e if x is e.a and y is e.b else BinOp(e.op, x, y, dt)
        if isinstance(e, UnaryOp) and e.op == "neg":
            x = self.simp(e.a)
            if isinstance(x, Const):
                return Const(-float(x.value), dt)
            if isinstance(x, UnaryOp) and x.op == "neg":
                return x.a
            return e if x is e.a else UnaryOp("neg", x, dt)
        if isinstance(e, Cast):
            return self.cast(e)
        return self.rebuild(e)

    # -- bounds ----------------------------------------------------------------------------
    def var_bounds(self, v: Var) -> Interval:
        got = self.bounds.get(v)
        if got is not None:
            return got
        return dtype_range(v.dtype) if v.dtype.kind in ("uint", "bool") else (None, None)

    def abounds(self, aid: int) -> Interval:
        got = self._abounds.get(aid)
        if got is None:
            got = self._abounds[aid] = self.ebounds(self.atoms.exprs[aid])
        return got

    def pbounds(self, p: _Poly) -> Interval:
        acc: Interval = (p.const, p.const)
        for m, k in p.terms.items():
            iv: Interval = (1, 1)
            for aid in m:
                iv = _imul(iv, self.abounds(aid))
            acc = _iadd(acc, _iscale(iv, k))
            if acc == (None, None):
                break
        return acc

    def ebounds(self, e: Expr) -> Interval:
        """Interval of an integer (or boolean, as 0/1) expression, by its structure."""
        if isinstance(e, Const):
            return (int(e.value), int(e.value)) if not e.dtype.is_float else (None, None)
        if isinstance(e, Var):
            return self.var_bounds(e)
        if e.dtype.is_bool:
            return 0, 1
        if e.dtype.is_float:
            return None, None
        if isinstance(e, Load):
            return dtype_range(e.dtype)
        if isinstance(e, BinOp):
            return self.binop_bounds(e)
        if isinstance(e, UnaryOp):
            a = self.ebounds(e.a)
            if e.op == "neg":
                return _iscale(a, -1)
            if e.op == "~":
                return _iadd(_iscale(a, -1), (-1, -1))
            return None, None
        if isinstance(e, Select):
            t, f = self.ebounds(e.t), self.ebounds(e.f)
            lo = None if t[0] is None or f[0] is None else min(t[0], f[0])
            hi = None if t[1] is None or f[1] is None else max(t[1], f[1])
            return lo, hi
        if isinstance(e, Cast):
            rng = dtype_range(e.dtype)
            if e.a.dtype.is_float:
                return rng
            lo, hi = self.ebounds(e.a)
            if lo is not None and hi is not None and rng[0] <= lo and hi <= rng[1]:  # type: ignore[operator]
                return lo, hi
            return rng
        if isinstance(e, Call) and e.name == "abs":
            lo, hi = self.ebounds(e.args[0])
            if lo is not None and lo >= 0:
                return lo, hi
            if hi is not None and hi <= 0:
                return -hi, (None if lo is None else -lo)
            return 0, (None if lo is None or hi is None else max(-lo, hi))
        return dtype_range(e.dtype) if e.dtype.kind == "uint" else (None, None)

    def binop_bounds(self, e: BinOp) -> Interval:
        op = e.op
        a = self.ebounds(e.a)
        b = self.ebounds(e.b)
        if op == "+":
            return _iadd(a, b)
        if op == "-":
            return _iadd(a, _iscale(b, -1))
        if op == "*":
            return _imul(a, b)
        if op == "//":
            if b[0] is not None and b[0] == b[1] and b[0] != 0:
                c = b[0]
                return _ifloordiv(a, c) if c > 0 else _ifloordiv(_iscale(a, -1), -c)
            if b[0] is not None and b[0] > 0:
                return _corners(a, b, operator.floordiv)
            return None, None
        if op == "%":
            if b[0] is not None and b[0] == b[1] and b[0] != 0:
                c = b[0]
                return _ifloormod(a, c) if c > 0 else (c + 1, 0)
            if b[0] is not None and b[0] > 0:
                if b[1] is None:
                    return (0, a[1]) if a[0] is not None and a[0] >= 0 else (0, None)
                if a[0] is not None and a[0] >= 0 and a[1] is not None and a[1] < b[0]:
                    return a
                hi = b[1] - 1 if a[0] is None or a[0] < 0 or a[1] is None else min(b[1] - 1, a[1])
                return 0, hi
            return None, None
        if op == "/":
            if b[0] is not None and b[1] is not None and (b[0] > 0 or b[1] < 0):
                return _corners(a, b, trunc_div)
            return None, None
        if op in ("min", "max"):
            pick = min if op == "min" else max
            if op == "min":
                lo = None if a[0] is None or b[0] is None else pick(a[0], b[0])
                hi = b[1] if a[1] is None else a[1] if b[1] is None else pick(a[1], b[1])
            else:
                lo = b[0] if a[0] is None else a[0] if b[0] is None else pick(a[0], b[0])
                hi = None if a[1] is None or b[1] is None else pick(a[1], b[1])
            return lo, hi
        if op in ("<<", ">>") and b[0] is not None and b[0] == b[1] and 0 <= b[0] < 64:
            if op == ">>":
                return _ifloordiv(a, 1 << b[0])
            scaled = _iscale(a, 1 << b[0])
            if _within(scaled, e.dtype):
                return scaled
        a_nn = a[0] is not None and a[0] >= 0
        b_nn = b[0] is not None and b[0] >= 0
        if op == "&":
            if a_nn and b_nn:
                hi = b[1] if a[1] is None else a[1] if b[1] is None else min(a[1], b[1])
                return 0, hi
            if a_nn or b_nn:
                return 0, (a if a_nn else b)[1]
            return None, None
        if op in ("|", "^") and a_nn and b_nn and a[1] is not None and b[1] is not None:
            top = (1 << max(a[1], b[1]).bit_length()) - 1
            return (max(a[0], b[0]) if op == "|" else 0), top  # type: ignore[type-var]
        return dtype_range(e.dtype) if e.dtype.kind == "uint" else (None, None)

    # -- facts from conditions -------------------------------------------------------------
    def refine(self, cond: Expr, truth: bool) -> dict[Var, Interval] | None:
        """Variable bounds that hold wherever ``cond`` evaluates to ``truth`` (None: no news)."""
        out = dict(self.bounds)
        self._refine_into(out, cond, truth)
        return None if out == self.bounds else out

    def _refine_into(self, out: dict[Var, Interval], cond: Expr, truth: bool) -> None:
        for a, op, b in comparisons(cond, truth):
            if op != "!=":
                d = self.sp(a).add(self.sp(b), -1)  # d < 0  iff  d + 1 <= 0
                self._refine_by(out, d.add_const(1) if op == "<" else d, op == "==")

    def _refine_by(self, out: dict[Var, Interval], d: _Poly, equal: bool) -> None:
        """``out`` tightened by ``d == 0`` (``equal``) or ``d <= 0``."""
        for m, k in d.terms.items():
            if len(m) != 1 or k not in (1, -1):
                continue
            v = self.atoms.exprs[m[0]]
            if not isinstance(v, Var):
                continue
            rest = _Poly(d.dtype, {mm: kk for mm, kk in d.terms.items() if mm != m}, d.const)
            rlo, rhi = self.pbounds(rest)
            lo, hi = None, None
            if k == 1:  # v <= -rest (== -rest)
                hi = None if rlo is None else -rlo
                if equal:
                    lo = None if rhi is None else -rhi
            else:  # v >= rest (== rest)
                lo = rlo
                if equal:
                    hi = rhi
            old_lo, old_hi = out.get(v, self.var_bounds(v))
            new_lo = lo if old_lo is None else old_lo if lo is None else max(lo, old_lo)
            new_hi = hi if old_hi is None else old_hi if hi is None else min(hi, old_hi)
            if (new_lo, new_hi) != (None, None):
                out[v] = (new_lo, new_hi)

    # -- rendering -------------------------------------------------------------------------
    def render(self, p: _Poly) -> Expr:
        dt = p.dtype
        items = sorted(p.terms.items(), key=lambda mk: (mk[1] < 0, self.atoms.mono_key(mk[0])))

        def mono(m: Mono, k: int) -> Expr:
            parts = sorted((self.atoms.exprs[a] for a in m), key=self.atoms.okey)
            e = parts[0]
            for x in parts[1:]:
                e = BinOp("*", e, x, dt)
            return e if k == 1 else BinOp("*", e, Const(k, dt), dt)

        acc: Expr | None = None
        const_done = False
        if items and items[0][1] < 0 and p.const > 0:  # `15 - i` rather than `-i + 15`
            acc, const_done = Const(p.const, dt), True
        for m, k in items:
            if acc is None:
                acc = mono(m, k) if k > 0 else UnaryOp("neg", mono(m, 1), dt) if k == -1 else mono(m, k)
            elif k > 0:
                acc = BinOp("+", acc, mono(m, k), dt)
            else:
                acc = BinOp("-", acc, mono(m, -k), dt)
        if acc is None:
            return Const(p.const, dt)
        if not const_done and p.const:
            acc = BinOp("+" if p.const > 0 else "-", acc, Const(abs(p.const), dt), dt)
        return acc


def _fold_float(op: str, x: float, y: float, dt: DType) -> float | None:
    rx, ry = round_float(x, dt), round_float(y, dt)  # a constant stands for its value in dt
    if rx is None or ry is None or math.isnan(rx) or math.isnan(ry):
        return None
    x, y = rx, ry
    if op == "+":
        v = x + y
    elif op == "-":
        v = x - y
    elif op == "*":
        v = x * y
    elif op == "/":
        if y == 0:
            return None
        v = x / y
    elif op == "min":
        v = min(x, y)
    else:
        v = max(x, y)
    return round_float(v, dt)


def _is_float_const(e: Expr, value: float, negative: bool | None = None) -> bool:
    if not isinstance(e, Const) or float(e.value) != value:
        return False
    if negative is None:
        return True
    return (math.copysign(1.0, float(e.value)) < 0) == negative


# ---- public API -----------------------------------------------------------------------------

def _pass(e: Expr, bounds: Bounds, order: dict[int, int]) -> Expr:
    return _Ctx(bounds, _Atoms(order)).simp(e)


def simplify(e: Any, bounds: Bounds | None = None) -> Expr:
    """The canonical form of ``e``, exact for every assignment inside ``bounds``."""
    e = convert(e)
    bounds = bounds or {}
    order = _appearance_order(e)
    for _ in range(_MAX_PASSES):
        out = _pass(e, bounds, order)
        if out.same_as(e):
            return out
        e = out
    return e


def _within(iv: Interval, dt: Any) -> bool:
    """Whether the known interval ``iv`` lies inside ``dt``'s range (no wraparound)."""
    lo, hi = dtype_range(dt)
    return iv[0] is not None and iv[1] is not None and lo <= iv[0] and iv[1] <= hi  # type: ignore[operator]


def bounds_of(e: Any, bounds: Bounds | None = None) -> Interval:
    """Inclusive ``(lo, hi)`` of an integer (or boolean, as 0/1) expression; ``None`` where
    unbounded or unknown (always for floats)."""
    e = convert(e)
    if e.dtype.is_float:
        return None, None
    ctx = _Ctx(bounds or {}, _Atoms(_appearance_order(e)))
    if e.dtype.kind == "int":
        return ctx.pbounds(ctx.sp(e))
    s = ctx.simp(e)
    if isinstance(s, Const):
        return int(s.value), int(s.value)
    return ctx.ebounds(s)


def prove(cond: Any, bounds: Bounds | None = None) -> bool | None:
    """``True``/``False`` when ``cond`` holds/fails for every assignment inside ``bounds``;
    ``None`` when the simplifier cannot tell."""
    s = simplify(cond, bounds)
    if isinstance(s, Const):
        return bool(s.value)
    return None


def comparisons(cond: Expr, truth: bool) -> Iterator[tuple[Expr, str, Expr]]:
    """``(a, op, b)`` for the integer comparisons ``a op b`` (``op``: ``<``, ``<=``, ``==`` or
    ``!=``) that hold wherever ``cond`` evaluates to ``truth``: those under ``and`` when true, under
    ``or`` when false, and through ``not``."""
    if isinstance(cond, UnaryOp) and cond.op == "not":
        yield from comparisons(cond.a, not truth)
        return
    if not isinstance(cond, BinOp):
        return
    if cond.op in ("and", "or"):
        if (cond.op == "and") == truth:
            yield from comparisons(cond.a, truth)
            yield from comparisons(cond.b, truth)
        return
    if cond.op not in COMPARE_OPS or cond.a.dtype.kind != "int":
        return
    op = cond.op if truth else _NEGATE[cond.op]
    if op in (">", ">="):
        yield cond.b, "<" if op == ">" else "<=", cond.a
    else:
        yield cond.a, op, cond.b


def implied_bounds(cond: Expr, truth: bool, bounds: Bounds | None = None) -> dict[Var, Interval] | None:
    """``bounds`` tightened by what holds wherever ``cond`` evaluates to ``truth`` (``i < n`` bounds
    ``i`` above); None when ``cond`` tells nothing new."""
    return _Ctx(bounds or {}, _Atoms(_appearance_order(cond))).refine(cond, truth)


def modular(e: Any, facts: Mapping[Var, tuple[int, int]] | None = None) -> tuple[int, int]:
    """``(coeff, base)`` such that ``e == coeff * n + base`` for some integer ``n``: ``8*i + 4``
    gives ``(8, 4)``. ``coeff == 0`` means ``e`` is the constant ``base``; ``(1, 0)`` says nothing.
    ``facts`` gives known residues of variables (e.g. a dynamic dim that is a multiple of 16)."""
    return _modular(convert(e), facts or {})


def _norm(c: int, b: int) -> tuple[int, int]:
    c = abs(c)
    return (c, b % c) if c else (0, b)


def _modular(e: Expr, facts: Mapping[Var, tuple[int, int]]) -> tuple[int, int]:
    if isinstance(e, Const):
        return (0, int(e.value)) if not e.dtype.is_float else (1, 0)
    if isinstance(e, Var):
        return _norm(*facts.get(e, (1, 0)))
    if not e.dtype.is_int:
        return 1, 0
    if isinstance(e, BinOp):
        op = e.op
        if op in ("+", "-", "*", "min", "max"):
            c1, b1 = _modular(e.a, facts)
            c2, b2 = _modular(e.b, facts)
            if op == "+":
                return _norm(math.gcd(c1, c2), b1 + b2)
            if op == "-":
                return _norm(math.gcd(c1, c2), b1 - b2)
            if op == "*":
                return _norm(math.gcd(c1 * c2, c1 * b2, c2 * b1), b1 * b2)
            return _norm(math.gcd(c1, c2, b1 - b2), b1)
        if op in ("//", "%", "<<", ">>") and isinstance(e.b, Const):
            k = int(e.b.value)
            c, b = _modular(e.a, facts)
            if op == "<<" and 0 <= k < 64:
                return _norm(c << k, b << k)
            if op == ">>" and 0 <= k < 64:
                op, k = "//", 1 << k
            if k > 0 and op == "//":
                if c == 0:
                    return 0, b // k
                if c % k == 0:
                    return _norm(c // k, b // k)
            if k > 0 and op == "%":
                g = math.gcd(c, k)
                return (0, b % k) if g == k or c == 0 else _norm(g, b)
        return 1, 0
    if isinstance(e, UnaryOp) and e.op == "neg":
        c, b = _modular(e.a, facts)
        return _norm(c, -b)
    if isinstance(e, Select):
        c1, b1 = _modular(e.t, facts)
        c2, b2 = _modular(e.f, facts)
        return _norm(math.gcd(c1, c2, b1 - b2), b1)
    if isinstance(e, Cast) and e.a.dtype.is_int and e.a.dtype.bits <= e.dtype.bits:
        return _modular(e.a, facts)
    return 1, 0


def divisible(e: Any, k: int, bounds: Bounds | None = None) -> bool:
    """Whether ``e`` is provably a multiple of ``k`` inside ``bounds``."""
    if k == 0:
        return False
    k = abs(k)
    if k == 1:
        return True
    e = convert(e)
    for form in (simplify(e, bounds), e):
        c, b = _modular(form, {})
        if c % k == 0 and b % k == 0:
            return True
    return False


def as_linear(e: Any, bounds: Bounds | None = None) -> tuple[list[tuple[int, Expr]], int] | None:
    """``e`` (simplified) as ``sum(coeff * atom) + const``: the ``(coeff, atom)`` pairs in canonical
    order and the constant; ``None`` when a term is a product of two non-constant atoms."""
    e = convert(e)
    if e.dtype.kind != "int":
        return None
    s = simplify(e, bounds)
    ctx = _Ctx(bounds or {}, _Atoms(_appearance_order(s)))
    p = ctx.sp(s)
    out = []
    for m, k in sorted(p.terms.items(), key=lambda mk: (mk[1] < 0, ctx.atoms.mono_key(mk[0]))):
        if len(m) != 1:
            return None
        out.append((k, ctx.atoms.exprs[m[0]]))
    return out, p.const


def __getattr__(name: str) -> Any:
    # simplify_stmt.py builds on this module, so it cannot be imported at the top of it
    if name == "simplify_stmt":
        from .simplify_stmt import simplify_stmt

        return simplify_stmt
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
