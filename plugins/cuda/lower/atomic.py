"""T.atomic_*: the region form is an element-wise nest of atomics; the scalar form is one atomic
(run by one thread when it stands outside a parallel loop). On sm_90 a float32 fragment added
into a float32 global region whose adjacent columns a thread holds in runs (the mma and wgmma
accumulators hold pairs: FlashAttention backward's dQ) takes one ``red.global.add.v2/.v4.f32``
per run, as the vector epilogue stores them (lower/epilogue.py), instead of one atomic each; so
does a ``T.Parallel`` nest that adds such a fragment element by element (``T.atomic_add(dQ[r + i,
j], dq[i, j])``, TileLang's older examples: ``tile_atomic``); on sm_90a the tile form of a wgmma
accumulator into a tensor only such adds touch goes by TMA reductions instead (lower/tma_reduce.py). A
releasing ``T.atomic_store`` outside a parallel loop first synchronizes the block, so that the
writes of all its threads are released (the store itself is one thread's)."""

from __future__ import annotations

from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Region
from ....core_ir.stmt import For, Seq, Stmt
from ....core_ir.tileops import Atomic, Copy
from ..lir import Barrier, by_thread_0
from ..nests import atomic_nest, element_atomic, loop_starts, nest_info
from .epilogue import lower_vector_store, vector_store_plan
from .parallel import lower_nest

RELEASING = ("release", "seq_cst")


def lower_atomic(op: Atomic, lc: Any) -> Stmt:
    out = _lower(op, lc)
    if op.kind == "store" and op.order in RELEASING:
        return Seq((Barrier(op.loc), out), op.loc)
    return out


def vector_red(op: Atomic, lc: Any) -> Stmt | None:
    """``op`` (tile form) as vector reductions, or ``None`` when it does not qualify."""
    if not (isinstance(op.value, Region) and lc.vector_red and _float32_add(op)):
        return None
    copy = Copy(op.value, op.dst, loc=op.loc)  # the same elements, added instead of stored
    plan = vector_store_plan(copy, lc)
    if plan is None or plan[1] not in (2, 4):
        return None
    return lower_vector_store(copy, *plan, lc, "tlx_red_add")


def tile_red(op: Atomic, lc: Any) -> Stmt | None:
    """``op`` (tile form) as TMA reductions (lower/tma_reduce.py) or vector reductions, or ``None``."""
    from .tma_reduce import lower_tma_reduce, tma_reduce_plan

    plan = tma_reduce_plan(op, lc)
    return lower_tma_reduce(op, plan, lc) if plan is not None else vector_red(op, lc)


def _lower(op: Atomic, lc: Any) -> Stmt:
    vector = tile_red(op, lc)
    if vector is not None:
        return vector
    if isinstance(op.value, Region):
        entry = lc.loops.get(id(op))
        nest = entry[1] if entry else atomic_nest(op)
        return lower_nest(nest, entry[0] if entry else None, lc)  # type: ignore[arg-type]
    from .walker import _Walker

    value = _Walker(lc, lambda s: None).fix(op.value)
    return by_thread_0(element_atomic(op, op.dst.starts, value), op.loc)


def _float32_add(op: Atomic) -> bool:
    value, dst = op.value.buffer, op.dst.buffer  # type: ignore[union-attr]
    return op.kind == "add" and op.order in (None, "relaxed") and value.scope == "fragment" and \
        value.dtype == dst.dtype == dtypes.float32 and dst.scope == "global"


def tile_atomic(nest: For) -> Atomic | None:
    """The tile form of a ``T.Parallel`` nest whose body is one float32 atomic add of a fragment
    element indexed by the loop variables in order, into a global element at offsets plus the same
    variables in the same order (``T.atomic_add(dQ[b, r + i, j], dq[i, j])`` is ``T.atomic_add(dQ[b,
    r:r + M, 0:N], dq)``): the same additions, which ``_lower`` can vectorize; else ``None``."""
    vars_, exts, body = nest_info(nest)
    if any(s is not None for s in loop_starts(nest)) or not isinstance(body, Atomic) or \
            not isinstance(body.value, E.Load) or body.kind != "add" or body.order is not None:
        return None
    frag, dst = body.value.buffer, body.dst
    if frag.scope != "fragment" or list(body.value.indices) != vars_ or frag.static_shape() != \
            tuple(E.as_int(e) for e in exts) or not all(E.as_int(e) == 1 for e in dst.extents):
        return None
    starts, extents, found = [], [], []
    for index in dst.starts:
        used = [v for v in vars_ if v in E.free_vars(index)]
        if not used:
            starts.append(index)
            extents.append(E.const(1))
            continue
        base = _offset_of(index, used[0]) if len(used) == 1 else None
        if base is None:
            return None
        found.append(used[0])
        starts.append(base)
        extents.append(exts[vars_.index(used[0])])
    if found != vars_:
        return None
    return Atomic("add", Region(dst.buffer, tuple(starts), tuple(extents)), Region.full(frag), loc=body.loc)


def _offset_of(index: E.Expr, var: E.Var) -> E.Expr | None:
    """``b`` when ``index`` is ``var`` (0) or ``b + var`` / ``var + b`` with ``b`` free of ``var``."""
    if index is var:
        return E.const(0)
    if isinstance(index, E.BinOp) and index.op == "+":
        if index.b is var and var not in E.free_vars(index.a):
            return index.a
        if index.a is var and var not in E.free_vars(index.b):
            return index.b
    return None
