"""T.atomic_*: the region form is an element-wise nest of atomics; the scalar form is one atomic
(run by one thread when it stands outside a parallel loop). On sm_90 a float32 fragment added
into a float32 global region whose adjacent columns a thread holds in runs (the mma and wgmma
accumulators hold pairs: FlashAttention backward's dQ) takes one ``red.global.add.v2/.v4.f32``
per run, as the vector epilogue stores them (lower/epilogue.py), instead of one atomic each. A
releasing ``T.atomic_store`` outside a parallel loop first synchronizes the block, so that the
writes of all its threads are released (the store itself is one thread's)."""

from __future__ import annotations

from typing import Any

from ....core_ir import dtypes
from ....core_ir.buffer import Region
from ....core_ir.stmt import Seq, Stmt
from ....core_ir.tileops import Atomic, Copy
from ..lir import Barrier, by_thread_0
from ..nests import atomic_nest, element_atomic
from .epilogue import lower_vector_store, vector_store_plan
from .parallel import lower_nest

RELEASING = ("release", "seq_cst")


def lower_atomic(op: Atomic, lc: Any) -> Stmt:
    out = _lower(op, lc)
    if op.kind == "store" and op.order in RELEASING:
        return Seq((Barrier(op.loc), out), op.loc)
    return out


def _lower(op: Atomic, lc: Any) -> Stmt:
    if isinstance(op.value, Region) and lc.vector_red and _float32_add(op):
        copy = Copy(op.value, op.dst, loc=op.loc)  # the same elements, added instead of stored
        plan = vector_store_plan(copy, lc)
        if plan is not None and plan[1] in (2, 4):
            return lower_vector_store(copy, *plan, lc, "tlx_red_add")
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
