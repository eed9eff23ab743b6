"""The ``safe_access`` stage: element accesses to global tensors that may fall outside are guarded,
as TileLang's ``LegalizeSafeMemoryAccess`` does. Inside a ``T.Kernel``, a load ``A[i, j]`` of a
``global`` buffer becomes ``T.if_then_else(in_range, A[i, j], 0)``, a store ``A[i, j] = v`` and a
scalar ``T.atomic_*(A[i, j], v)`` are wrapped in ``if in_range:``; ``in_range`` checks
``0 <= idx < extent`` per dimension, leaving out what can be proven from what is known where the
access stands: constant shapes, the ranges of loop and block indices and of thread indices, and
the conditions of enclosing ``if`` statements and ``T.if_then_else`` (comparisons joined by
``and``). Accesses proven in range are left alone, so the stage changes nothing else.

Atomics that read are guarded as TileLang guards them: ``T.atomic_load(A[i])`` becomes
``T.if_then_else(in_range, T.atomic_load(A[i]), 0)``, and an update that returns the previous value
makes no update outside and gives 0 (the safe value, the only one ``T.annotate_safe_value``
accepts). Such an update stays the whole ``init`` of its hidden variable, so the guarded form is
``prev = 0; if in_range: fetched = T.atomic_add(A[i], v, return_prev=True); prev = fetched``, spliced
into the enclosing sequence (``prev`` stays visible to the statements after it). A comparison that
reads an atomic load gives no fact: another block may change the element before the next read.

Tile ops guard their own global regions already; shared, fragment, local and var buffers are never
guarded. The pass config ``tl.disable_safe_memory_legalize`` (``PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS``)
set true turns the stage off.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any

from . import dtypes
from .arith import Interval
from .buffer import Buffer, Region
from .expr import (
    AtomicFetch,
    AtomicLoad,
    BinOp,
    Const,
    Expr,
    ExternCall,
    Load,
    Select,
    ThreadIndex,
    Var,
    binary,
    const,
    free_vars,
    select,
)
from .simplify import Bounds, as_linear, bounds_of, comparisons, implied_bounds, simplify
from .stages import StageContext
from .stmt import Alloc, For, If, Kernel, PrimFunc, Seq, Stmt, Store, While
from .tileops import Atomic, TileOp
from .visit import map_fields, rewrite, substitute, walk

__all__ = ["KEY", "guard_global_accesses", "safe_access"]

KEY = "tl.disable_safe_memory_legalize"


def safe_access(func: PrimFunc, ctx: StageContext) -> PrimFunc:
    """The stage: ``guard_global_accesses`` unless the kernel's pass configs turn it off."""
    configs = ctx.options.get("pass_configs") or {}
    if configs.get(KEY, False):
        return func
    bounds: dict[Var, Interval] = {}
    for p in func.buffer_params():
        for d in p.shape:
            if isinstance(d, Var):
                bounds[d] = (0, None)
    body = guard_global_accesses(func.body, bounds)
    return func if body is func.body else dataclasses.replace(func, body=body)


def guard_global_accesses(node: Stmt, bounds: Bounds | None = None) -> Stmt:
    """``node`` with the element accesses to global buffers inside its kernels guarded (see the
    module's docstring); ``bounds`` are known variable ranges. Unchanged subtrees stay the same
    objects."""
    return _Guard(dict(bounds or {})).stmt(node)


def _facts(cond: Expr, truth: bool) -> tuple[Expr, ...]:
    """Integer expressions ``f`` with ``f >= 0`` wherever ``cond`` evaluates to ``truth``."""
    out: list[Expr] = []
    for a, op, b in comparisons(cond, truth):
        if op == "!=" or a.dtype.kind != "int" or b.dtype.kind != "int" or _volatile(a) or _volatile(b):
            continue
        if op == "<":
            b = simplify(binary("-", b, 1))
        out.append(binary("-", b, a))
        if op == "==":
            out.append(binary("-", a, b))
    return tuple(out)


def _volatile(e: Expr) -> bool:
    """Whether ``e`` reads an atomic load, whose next read may differ."""
    return any(isinstance(n, AtomicLoad) for n in walk(e))


def _loaded(e: Expr) -> set[Buffer]:
    return {n.buffer.storage for n in walk(e) if isinstance(n, Load)}


def _written(s: Stmt) -> set[Buffer] | None:
    """The buffers ``s`` may write (``None``: any, as an external call may)."""
    out: set[Buffer] = set()
    for n in walk(s):
        if isinstance(n, ExternCall):
            return None
        if isinstance(n, (Store, AtomicFetch, Alloc)):
            out.add(n.buffer.storage)
        elif isinstance(n, TileOp):
            out.update(r.buffer.storage for r in n.regions())
    return out


def _survive(facts: tuple[Expr, ...], s: Stmt) -> tuple[Expr, ...]:
    """The ``facts`` that still hold after (or throughout) ``s``: those reading a buffer ``s`` may
    write do not."""
    if not any(_loaded(f) for f in facts):
        return facts
    written = _written(s)
    return tuple(f for f in facts if not _loaded(f) or (written is not None and not _loaded(f) & written))


def _decided(g: Expr, facts: tuple[Expr, ...], bounds: Bounds) -> bool:
    """Whether ``g >= 0`` follows from ``bounds``, or from ``bounds`` and a positive multiple of one
    of ``facts`` (``g - k * f >= 0``, ``k`` cancelling a term ``g`` and ``f`` share)."""
    if _lower(g, bounds) >= 0:
        return True
    g_lin = as_linear(g, bounds)
    for f in facts:
        for k in _multiples(g_lin, as_linear(f, bounds)):
            if _lower(binary("-", g, binary("*", f, k)) if k != 1 else binary("-", g, f), bounds) >= 0:
                return True
    return False


def _lower(e: Expr, bounds: Bounds) -> float:
    """The least value of ``e`` that bounds show (``-inf``: unknown). Where that is unknown, terms
    ``k * (x // c)`` with ``c`` dividing ``k`` are read as ``k / c * (x - x % c)``, so that
    ``m - m // 32 * 32`` is seen to be ``m % 32 >= 0``."""
    lo = bounds_of(e, bounds)[0]
    if lo is None and (lin := as_linear(e, bounds)) is not None:
        expanded: Expr = const(lin[1], e.dtype)
        changed = False
        for k, a in lin[0]:
            if isinstance(a, BinOp) and a.op == "//" and isinstance(a.b, Const) and a.b.value > 0 \
                    and k % a.b.value == 0:
                a, k, changed = binary("-", a.a, binary("%", a.a, a.b)), k // a.b.value, True
            expanded = binary("+", expanded, binary("*", a, k))
        if changed:
            lo = bounds_of(expanded, bounds)[0]
    return -math.inf if lo is None else lo


def _multiples(g: tuple[list[tuple[int, Expr]], int] | None, f: tuple[list[tuple[int, Expr]], int] | None) -> list[int]:
    """The factors ``k > 0`` by which ``k * f`` cancels a term of ``g`` (1 when nothing is shared)."""
    out = [1]
    if g is None or f is None:
        return out
    g_terms = {a.structural_key(): k for k, a in g[0]}
    for k, a in f[0]:
        kg = g_terms.get(a.structural_key())
        if kg is not None and kg % k == 0 and kg // k > 1 and kg // k not in out:
            out.append(kg // k)
    return out


_MAX_CASES = 64


def _by_cases(g: Expr, facts: tuple[Expr, ...], bounds: Bounds) -> bool:
    """``_decided`` for every value of the variables of ``g`` with the fewest values (a persistent
    loop's wave counter and block index), at most ``_MAX_CASES`` cases, skipping the values a fact
    rules out."""
    sized = []
    for v in free_vars(g):
        lo, hi = bounds.get(v, (None, None))
        if lo is not None and hi is not None:
            sized.append((hi - lo + 1, v.name, v, range(lo, hi + 1)))
    small = []
    count = 1
    for n, _, v, values in sorted(sized, key=lambda s: s[:2]):
        if count * n > _MAX_CASES:
            break
        small.append((v, values))
        count *= n
    if not small:
        return False
    for values in itertools.product(*(r for _, r in small)):
        case = {v: const(x, v.dtype) for (v, _), x in zip(small, values)}
        fs = tuple(substitute(f, case) for f in facts)
        if any((hi := bounds_of(f, bounds)[1]) is not None and hi < 0 for f in fs):
            continue  # no such case
        if not _decided(substitute(g, case), fs, bounds):
            return False
    return True


def _spliced(before: Stmt, after: Stmt) -> bool:
    """Whether ``after``, the guarded form of a returning atomic, joins the enclosing sequence."""
    return isinstance(before, Alloc) and isinstance(before.init, AtomicFetch) and isinstance(after, Seq)


class _Guard:
    def __init__(self, bounds: dict[Var, Interval]) -> None:
        self.bounds = bounds
        self.facts: tuple[Expr, ...] = ()
        self.threads: dict[int, Var] = {}  # stand-ins for the thread indices of the current kernel
        self.in_kernel = False

    # -- what is known -----------------------------------------------------------------------
    def scoped(self, bounds: dict[Var, Interval] | None, facts: tuple[Expr, ...], fn: Any, arg: Any,
               loop_body: Stmt | None = None) -> Any:
        """``fn(arg)`` knowing ``bounds`` and ``facts`` too; in a loop's body, the facts known outside
        that read a buffer the body may write are forgotten (a later iteration sees the write)."""
        saved = self.bounds, self.facts
        if bounds:
            self.bounds = {**self.bounds, **bounds}
        known = self.facts if loop_body is None else _survive(self.facts, loop_body)
        self.facts = known + facts
        try:
            return fn(arg)
        finally:
            self.bounds, self.facts = saved

    def nonneg(self, e: Expr) -> bool:
        """Whether ``e >= 0`` provably holds here: from the bounds alone, less a fact, with an
        expression a fact bounds by a constant standing for a variable of that range, or case by
        case over the few values of its variables."""
        def threads(x: Expr) -> Expr:
            return rewrite(x, lambda n: self.threads.get(n.dim) if isinstance(n, ThreadIndex) else None)

        g = threads(e) if self.threads else e
        facts = tuple(threads(f) for f in self.facts) if self.threads else self.facts
        if _decided(g, facts, self.bounds) or _decided(*self.stand_ins(g, facts)):
            return True
        return _by_cases(g, facts, self.bounds)

    def stand_ins(self, g: Expr, facts: tuple[Expr, ...]) -> tuple[Expr, tuple[Expr, ...], dict[Var, Interval]]:
        """``g`` and ``facts`` with each expression that a fact bounds by a constant (``X <= 219``)
        replaced by a variable of that range."""
        bounds = dict(self.bounds)
        found: dict[tuple, Var] = {}
        for f in facts:
            lin = as_linear(f, self.bounds)
            if lin is None or not lin[0] or (len(lin[0]) == 1 and isinstance(lin[0][0][1], Var)):
                continue  # a variable's own range is in the bounds already
            terms, c = lin
            upper = terms[0][0] < 0  # -x + c >= 0 (x <= c), else x - (-c) >= 0 (x >= -c)
            x = simplify(binary("-", c, f) if upper else binary("-", f, c), self.bounds)
            key = x.structural_key()
            if key not in found:
                found[key] = Var(f"range_{len(found)}", x.dtype)
                bounds[found[key]] = bounds_of(x, self.bounds)
            v = found[key]
            lo, hi = bounds[v]
            if upper:
                bounds[v] = (lo, c if hi is None else min(hi, c))
            else:
                bounds[v] = (-c if lo is None else max(lo, -c), hi)
        if not found:
            return g, facts, self.bounds

        def swap(n: Any) -> Any:
            return found.get(n.structural_key()) if isinstance(n, Expr) and not isinstance(n, Var) else None

        return rewrite(g, swap), tuple(rewrite(f, swap) for f in facts), bounds

    def in_range(self, buf: Buffer, indices: tuple[Expr, ...]) -> Expr | None:
        """The condition that ``indices`` lie inside ``buf`` (what cannot be proven), or ``None``."""
        if not self.in_kernel or buf.scope != "global":
            return None
        parts: list[Expr] = []
        for idx, extent in zip(indices, buf.shape):
            if idx.dtype.kind not in ("int", "uint"):
                continue
            if not self.nonneg(idx):
                parts.append(simplify(binary("<=", const(0, idx.dtype), idx), self.bounds))
            if not self.nonneg(binary("-", binary("-", extent, idx), 1)):
                parts.append(simplify(binary("<", idx, extent), self.bounds))
        parts = [p for p in parts if not (isinstance(p, Const) and p.value)]
        if not parts:
            return None
        cond = parts[0]
        for p in parts[1:]:
            cond = binary("and", cond, p)
        return cond

    # -- expressions -------------------------------------------------------------------------
    def expr(self, e: Any) -> Any:
        if not isinstance(e, Expr) or isinstance(e, (Var, Const)):
            return e
        if isinstance(e, Select):
            cond = self.expr(e.cond)
            t = self.scoped(implied_bounds(cond, True, self.bounds), _facts(cond, True), self.expr, e.t)
            f = self.scoped(implied_bounds(cond, False, self.bounds), _facts(cond, False), self.expr, e.f)
            if cond is e.cond and t is e.t and f is e.f:
                return e
            return dataclasses.replace(e, cond=cond, t=t, f=f)
        if isinstance(e, BinOp) and e.op in ("and", "or"):  # the right operand runs only as the left allows
            a = self.expr(e.a)
            truth = e.op == "and"
            b = self.scoped(implied_bounds(a, truth, self.bounds), _facts(a, truth), self.expr, e.b)
            return e if a is e.a and b is e.b else dataclasses.replace(e, a=a, b=b)
        out = self.fields(e)
        if isinstance(out, (Load, AtomicLoad)):
            cond = self.in_range(out.buffer, out.indices)
            if cond is not None:
                return select(cond, out, const(0, out.dtype))
        return out

    def fields(self, node: Any) -> Any:
        """``node`` with its expression, region and statement fields visited."""
        return map_fields(node, self.any)

    def any(self, value: Any) -> Any:
        if isinstance(value, Expr):
            return self.expr(value)
        if isinstance(value, Stmt):
            return self.stmt(value)
        if isinstance(value, Region):
            starts, extents = self.any(value.starts), self.any(value.extents)
            return value if starts is value.starts and extents is value.extents else Region(value.buffer, starts,
                                                                                            extents)
        if isinstance(value, tuple):
            items = tuple(self.any(v) for v in value)
            return value if all(a is b for a, b in zip(items, value)) else items
        return value

    # -- statements --------------------------------------------------------------------------
    def stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, Kernel):
            return self.kernel(s)
        if isinstance(s, For):
            return self.loop(s)
        if isinstance(s, If):
            cond = self.expr(s.cond)
            then = self.scoped(implied_bounds(cond, True, self.bounds), _facts(cond, True), self.stmt, s.then)
            other = s.otherwise if s.otherwise is None else self.scoped(
                implied_bounds(cond, False, self.bounds), _facts(cond, False), self.stmt, s.otherwise)
            if cond is s.cond and then is s.then and other is s.otherwise:
                return s
            return dataclasses.replace(s, cond=cond, then=then, otherwise=other)
        if isinstance(s, While):
            cond = self.expr(s.cond)
            body = self.scoped(None, _facts(cond, True), self.stmt, s.body, s.body)
            return s if cond is s.cond and body is s.body else dataclasses.replace(s, cond=cond, body=body)
        if isinstance(s, Seq):
            return self.seq(s)
        if isinstance(s, Store):
            return self.store(s)
        if isinstance(s, Alloc) and isinstance(s.init, AtomicFetch):
            return self.fetch(s, s.init)
        if isinstance(s, Atomic) and not isinstance(s.value, Region):
            return self.atomic(s)
        return self.fields(s)

    def seq(self, s: Seq) -> Stmt:
        """Facts that read a buffer a statement may write do not hold after it."""
        saved = self.facts
        try:
            stmts: list[Stmt] = []
            for x in s.stmts:
                out = self.stmt(x)
                stmts.extend(out.stmts if _spliced(x, out) else (out,))
                self.facts = _survive(self.facts, x)
        finally:
            self.facts = saved
        if len(stmts) == len(s.stmts) and all(a is b for a, b in zip(stmts, s.stmts)):
            return s
        return Seq(tuple(stmts), s.loc)

    def kernel(self, k: Kernel) -> Stmt:
        grid = self.any(k.grid)
        ranges: dict[Var, Interval] = {}
        facts: list[Expr] = []
        for v, g in zip(k.block_vars, grid):
            hi = bounds_of(g, self.bounds)[1]
            ranges[v] = (0, None if hi is None else hi - 1)
            facts.append(binary("-", binary("-", g, v), 1))
        threads = {d: Var(f"thread_{d}", dtypes.int32) for d in range(3)}
        for d, v in threads.items():
            ranges[v] = (0, (k.threads[d] if d < len(k.threads) else 1) - 1)
        saved = self.in_kernel, self.threads
        self.in_kernel, self.threads = True, threads
        try:
            body = self.scoped(ranges, _survive(tuple(facts), k.body), self.stmt, k.body)
        finally:
            self.in_kernel, self.threads = saved
        return k if grid is k.grid and body is k.body else dataclasses.replace(k, grid=grid, body=body)

    def loop(self, s: For) -> Stmt:
        start = self.any(s.start)
        extent = self.expr(s.extent)
        first = const(0, extent.dtype) if start is None else start
        last = binary("-", binary("+", first, extent), 1)
        rng = (bounds_of(first, self.bounds)[0], bounds_of(last, self.bounds)[1])
        # an extent read from memory the body writes says nothing about the later iterations
        facts = _survive((binary("-", s.var, first), binary("-", last, s.var)), s.body)
        body = self.scoped({s.var: rng}, facts, self.stmt, s.body, s.body)
        if start is s.start and extent is s.extent and body is s.body:
            return s
        return dataclasses.replace(s, start=start, extent=extent, body=body)

    def store(self, s: Store) -> Stmt:
        indices = self.any(s.indices)
        cond = self.in_range(s.buffer, indices)
        value = self.guarded_value(cond, s.value)
        out = s if indices is s.indices and value is s.value else dataclasses.replace(s, indices=indices, value=value)
        return out if cond is None else If(cond, out, None, s.loc)

    def atomic(self, s: Atomic) -> Stmt:
        dst = self.any(s.dst)
        cond = self.in_range(dst.buffer, dst.starts)
        value = self.guarded_value(cond, s.value)
        out = s if dst is s.dst and value is s.value else dataclasses.replace(s, dst=dst, value=value)
        return out if cond is None else If(cond, out, None, s.loc)

    def fetch(self, s: Alloc, f: AtomicFetch) -> Stmt:
        """``prev = T.atomic_<kind>(A[i], v, return_prev=True)``: guarded, no update outside and
        ``prev`` reads 0 (a ``Seq`` for ``seq`` to splice: see the module's docstring)."""
        indices = self.any(f.indices)
        cond = self.in_range(f.buffer, indices)
        value = self.guarded_value(cond, f.value)
        init = f if indices is f.indices and value is f.value else dataclasses.replace(f, indices=indices, value=value)
        out = s if init is f else dataclasses.replace(s, init=init)
        if cond is None:
            return out
        prev = s.buffer
        zero = Alloc(prev, const(0, prev.dtype), s.loc)
        if isinstance(cond, Const):  # proven outside
            return zero
        fetched = Buffer(f"{prev.name}_in", prev.shape, prev.dtype, prev.scope, s.loc)
        first = (const(0),)
        update = Seq((Alloc(fetched, init, s.loc), Store(prev, first, Load(fetched, first, s.loc), s.loc)), s.loc)
        return Seq((zero, If(cond, update, None, s.loc)), s.loc)

    def guarded_value(self, cond: Expr | None, value: Expr) -> Expr:
        """``value`` visited; it is computed only where ``cond`` (the store's guard) holds."""
        if cond is None:
            return self.expr(value)
        return self.scoped(implied_bounds(cond, True, self.bounds), _facts(cond, True), self.expr, value)
