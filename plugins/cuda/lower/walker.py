"""Walks a kernel body, replacing tile ops, parallel nests and fragment accesses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ....core_ir import expr as E
from ....core_ir.errors import LayoutError
from ....core_ir.stmt import Alloc, Annotate, For, If, Kernel, Seq, Stmt, Store, While
from ....core_ir.tileops import TileOp
from ....core_ir.visit import rewrite
from ..analysis import bounds
from ..lir import THREAD, AtomicStore, Block
from .parallel import lower_nest


def lower_body(s: Stmt, lc: Any, dispatch: Callable[[Stmt], Stmt | None]) -> Stmt:
    return _Walker(lc, dispatch).stmt(s)


class _Walker:
    def __init__(self, lc: Any, dispatch: Callable[[Stmt], Stmt | None]) -> None:
        self.lc = lc
        self.dispatch = dispatch

    def stmt(self, s: Stmt) -> Stmt:
        lc = self.lc
        if isinstance(s, Seq):
            return Seq(tuple(self.stmt(c) for c in s.stmts), s.loc)
        if isinstance(s, Kernel):
            body = self.stmt(s.body)
            allocs = tuple(Alloc(b) for b in lc.workspaces)
            return Kernel(s.grid, s.block_vars, s.threads, Seq(allocs + (body,)), s.annotations, s.loc)
        if isinstance(s, Alloc):
            if s.buffer.scope == "fragment":
                return Alloc(lc.local_of(s.buffer), None, s.loc)
            return s
        if isinstance(s, For):
            if s.kind == "parallel":
                entry = lc.loops.get(id(s))
                return lower_nest(s, entry[0] if entry else None, lc)
            ext = E.as_int(s.extent)
            st = E.as_int(s.start) if s.start is not None else 0
            if ext is not None and st is not None:
                lc.ranges[s.var] = (st, st + max(ext, 1) - 1)
            body = self.stmt(s.body)
            return For(s.var, s.extent, s.kind, body, s.start, s.annotations, s.loc)
        if isinstance(s, If):
            saved = dict(lc.ranges)
            lc.ranges.update(implied_ranges(s.cond, lc.ranges))  # e.g. a pipeline's `k + 2 < n`
            then = self.stmt(s.then)
            lc.ranges.clear()
            lc.ranges.update(saved)
            return If(self.fix(s.cond), then, None if s.otherwise is None else self.stmt(s.otherwise), s.loc)
        if isinstance(s, While):
            return While(self.fix(s.cond), self.stmt(s.body), s.loc)
        if isinstance(s, TileOp):
            out = self.dispatch(s)
            if out is None:
                raise LayoutError(f"the CUDA backend cannot lower T.{s.name} here", loc=s.loc)
            return out if isinstance(out, Block) else Block(out, s.name, s.loc)
        if isinstance(s, Annotate):
            return s if s.kind == "swizzle" else Seq(())
        if isinstance(s, Store):
            out = self.fix(s)
            if s.buffer.scope in ("global", "shared"):
                return out  # every thread stores the same value: harmless
            return out
        if isinstance(s, AtomicStore):
            return If(E.binary("==", THREAD, 0), self.fix(s), None, s.loc)
        return self.fix(s)

    def fix(self, node: Any) -> Any:
        """Fragment accesses outside parallel loops: allowed when every thread holds the whole
        fragment (no thread digits), at a computed register slot."""
        lc = self.lc

        def fn(n: Any) -> Any:
            buf = getattr(n, "buffer", None)
            if buf is None or getattr(buf, "scope", None) != "fragment" or not isinstance(n, (E.Load, Store)):
                return None
            slot = whole_slot(lc, buf, n.indices, getattr(n, "loc", None))
            if isinstance(n, E.Load):
                return E.Load(lc.local_of(buf), (slot,), n.loc)
            return Store(lc.local_of(buf), (slot,), n.value, n.loc)

        return rewrite(node, fn)


def implied_ranges(cond: E.Expr, ranges: dict[E.Var, tuple[int, int]]) -> dict[E.Var, tuple[int, int]]:
    """Tighter ranges of loop variables inside ``if (cond)``: from ``v + c < b`` (and ``<=``,
    conjunctions) with ``b`` bounded above."""
    out: dict[E.Var, tuple[int, int]] = {}
    if not isinstance(cond, E.BinOp):
        return out
    if cond.op == "and":
        out.update(implied_ranges(cond.a, ranges))
        out.update(implied_ranges(cond.b, {**ranges, **out}))
        return out
    if cond.op not in ("<", "<="):
        return out
    lhs, c = cond.a, 0
    if isinstance(lhs, E.BinOp) and lhs.op in ("+", "-") and E.as_int(lhs.b) is not None:
        c = E.as_int(lhs.b) if lhs.op == "+" else -E.as_int(lhs.b)  # type: ignore[operator]
        lhs = lhs.a
    if not isinstance(lhs, E.Var) or lhs not in ranges:
        return out
    rb = bounds(cond.b, ranges)
    if rb is None:
        return out
    hi = rb[1] - c - (1 if cond.op == "<" else 0)
    lo, old_hi = ranges[lhs]
    if hi < old_hi:
        out[lhs] = (lo, max(hi, lo))
    return out


def whole_slot(lc: Any, buf: Any, indices: tuple[E.Expr, ...], loc: Any) -> E.Expr:
    lay = lc.frag(buf)
    if any(d.kind == "T" for dim in lay.dims for d in dim):
        raise LayoutError(
            f"fragment `{buf.name}` is spread over threads ({lay.describe()}) but is indexed outside a "
            f"T.Parallel loop (or with indices that are not the loop variables)", loc=loc,
            hint="access fragments inside `for i, j in T.Parallel(...)` as frag[i, j]")
    slot: E.Expr = E.const(0)
    for dim, i in zip(lay.dims, indices):
        place = 1
        for d in dim:
            place *= d.extent
        for d in dim:
            place //= d.extent
            x = i // place if place != 1 else i
            term = x % d.extent if d.extent != 1 else E.const(0)
            slot = slot + term * d.stride
    return slot
