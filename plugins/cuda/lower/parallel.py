"""Lowering of a ``T.Parallel`` nest (and of element-wise tile ops, which are nests too).

With loop layout ``L`` every thread runs ``for v in unroll(L.num_local)`` over its register slots;
the loop indices are ``L.coords(tx, v)``; a fragment indexed by the loop variables is read at the
register slot its own layout gives for the same element (a compile-time function of ``v``);
global/shared side effects of replicated iterations run once (replica guard).
"""

from __future__ import annotations

from typing import Any

from ....core_ir import expr as E
from ....core_ir.buffer import Region
from ....core_ir.errors import LayoutError
from ....core_ir.stmt import Alloc, For, If, Seq, Stmt, Store
from ....core_ir.tileops import ReducerUpdate
from ....core_ir.visit import rewrite, substitute
from ..analysis import nonneg, prove_lt
from ..half_pairs import pair_stores
from ..layout import Fragment, local_map, loop_dims, slot_expr
from ..lir import THREAD, AtomicStore, Block, DevicePrint
from ..nests import element_atomic, loop_starts, nest_info


def drop_proven(node: Any, ranges: dict[E.Var, tuple[int, int]]) -> Any:
    """Replace comparisons ``a < b`` that always hold by ``True`` and fold the branches."""

    def fn(n: Any) -> Any:
        if isinstance(n, E.BinOp):
            if n.op == "<" and prove_lt(n.a, n.b, ranges):
                return E.const(True)
            if n.op == "<=" and E.as_int(n.a) == 0 and nonneg(n.b, ranges):
                return E.const(True)
            if n.op == "and":
                if isinstance(n.a, E.Const) and n.a.value:
                    return n.b
                if isinstance(n.b, E.Const) and n.b.value:
                    return n.a
        if isinstance(n, E.Select) and isinstance(n.cond, E.Const):
            return n.t if n.cond.value else n.f
        if isinstance(n, If) and isinstance(n.cond, E.Const):
            return n.then if n.cond.value else (n.otherwise or Seq(()))
        return None

    return rewrite(node, fn)


def lower_nest(nest: For, lay: Fragment | None, lc: Any) -> Stmt:
    from .private import check_private_writes
    from .reciprocal import reciprocal_division
    from .reducer import update_stores

    check_private_writes(nest)
    vars_, exts, body = nest_info(nest)
    starts = loop_starts(nest)
    ranges = dict(lc.ranges)
    for v, e, s in zip(vars_, exts, starts):
        n = E.as_int(e)
        if n is not None and s is None:
            ranges[v] = (0, n - 1)
    body = lower_inner(body, lc)
    body = drop_proven(body, ranges)
    if lc.reciprocal_division:
        body = reciprocal_division(body, vars_, exts)
    if lay is None:
        return Block(_strided(vars_, exts, starts, update_stores(body), lc), "parallel", nest.loc)
    v = E.Var(lc.fresh("v"))
    body = rewrite_fragments(body, vars_, lay, v, lc, nest.loc)
    coords = lay.coords(THREAD, v)
    mapping = {}
    for var, c, s in zip(vars_, coords, starts):
        mapping[var] = c if s is None else s + c
    body = substitute(body, mapping)
    guard = lay.replica_guard(THREAD)
    if guard is not None:
        body = guard_effects(body, guard)
    body = update_stores(body)
    pairs = pair_stores(body, v, lay.num_local, lc.ranges, lc.fresh) if lc.half_pairs else None
    if pairs is not None:
        return Block(pairs, "parallel", nest.loc)
    if lay.num_local == 1:
        body = substitute(body, {v: E.const(0)})
        return Block(body, "parallel", nest.loc)
    return Block(For(v, E.const(lay.num_local), "unroll", body, None, (), nest.loc), "parallel", nest.loc)


def lower_inner(body: Stmt, lc: Any) -> Stmt:
    """Nested serial loops inside a parallel body: record their ranges; scalar atomics (those that
    return the previous value too) become ``AtomicStore``s."""
    from ....core_ir.tileops import Atomic, ReducerUpdate, TileOp
    from ....core_ir.visit import walk
    from .atomic_load import fetch_store

    def atom(n: Any) -> Any:
        if isinstance(n, Atomic) and not isinstance(n.value, Region):
            return element_atomic(n, n.dst.starts, n.value)
        if isinstance(n, Alloc) and isinstance(n.init, E.AtomicFetch):
            # a replicated iteration skips the update (replica guard) and sees 0
            zero = Alloc(n.buffer, E.const(0, n.buffer.dtype), n.loc)
            return Seq((zero, fetch_store(n.init, n.buffer)), n.loc)
        if isinstance(n, TileOp) and not isinstance(n, ReducerUpdate):  # updates: after the replica guard
            raise LayoutError(f"T.{n.name} inside a T.Parallel loop is not supported on CUDA", loc=n.loc)
        return None

    body = rewrite(body, atom)

    for n in walk(body):
        if isinstance(n, For):
            ext = E.as_int(n.extent)
            st = E.as_int(n.start) if n.start is not None else 0
            if ext is not None and st is not None:
                lc.ranges[n.var] = (st, st + max(ext, 1) - 1)
            if n.kind == "parallel":
                raise LayoutError("a T.Parallel loop nested under other statements of a T.Parallel body is not "
                                  "supported on CUDA", loc=n.loc, hint="write the loops as one T.Parallel(M, N)")
    return body


def rewrite_fragments(body: Stmt, vars_: list[E.Var], lay: Fragment, v: E.Var, lc: Any, loc: Any) -> Stmt:
    from .walker import whole_slot

    def slot(buf: Any, indices: tuple[E.Expr, ...], where: Any) -> E.Expr:
        dim_map = loop_dims(buf.shape, indices, vars_)
        if dim_map is None:
            return whole_slot(lc, buf, indices, where)
        terms = local_map(lay, dim_map, lc.frag(buf))
        if terms is None:
            raise LayoutError(
                f"fragment `{buf.name}` ({lc.frag(buf).describe()}) is not held by the threads that run this "
                f"loop ({lay.describe()})", loc=where or loc,
                hint="use the same warp policy for the gemms involved, or copy into a separate fragment")
        return slot_expr(terms, v)

    def fn(n: Any) -> Any:
        buf = getattr(n, "buffer", None)
        if buf is None or getattr(buf, "scope", None) != "fragment":
            return None
        if isinstance(n, E.Load):
            return E.Load(lc.local_of(buf), (slot(buf, n.indices, n.loc),), n.loc)
        if isinstance(n, Store):
            return Store(lc.local_of(buf), (slot(buf, n.indices, n.loc),), n.value, n.loc)
        return None

    return rewrite(body, fn)


def guard_effects(body: Stmt, guard: E.Expr) -> Stmt:
    def fn(n: Any) -> Any:
        if isinstance(n, Store) and n.buffer.scope in ("global", "shared"):
            return If(guard, n, None, n.loc)
        if isinstance(n, (AtomicStore, DevicePrint, ReducerUpdate)):  # a replicated iteration prints, counts once
            return If(guard, n, None, n.loc)
        return None

    return rewrite(body, fn)


def _strided(vars_: list[E.Var], exts: list[E.Expr], starts: list[Any], body: Stmt, lc: Any) -> Stmt:
    """Symbolic extents: one flat index per thread, striding by the block size."""
    total: E.Expr = E.const(1)
    for e in exts:
        total = total * e
    it = E.Var(lc.fresh("it"))
    flat = it * lc.threads + THREAD
    mapping = {}
    rest = flat
    for var, e, s in reversed(list(zip(vars_, exts, starts))):
        idx = rest % e if len(vars_) > 1 else rest
        mapping[var] = idx if s is None else s + idx
        rest = rest // e
    inner = If(E.binary("<", flat, total), substitute(body, mapping))
    count = (total + (lc.threads - 1)) // lc.threads
    return For(it, count, "serial", inner)
