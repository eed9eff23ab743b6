"""T.atomic_*: the region form is an element-wise nest of atomics; the scalar form is one atomic
(run by one thread when it stands outside a parallel loop). A releasing ``T.atomic_store`` outside
a parallel loop first synchronizes the block, so that the writes of all its threads are released
(the store itself is one thread's)."""

from __future__ import annotations

from typing import Any

from ....core_ir.buffer import Region
from ....core_ir.stmt import Seq, Stmt
from ....core_ir.tileops import Atomic
from ..lir import Barrier, by_thread_0
from ..nests import atomic_nest, element_atomic
from .parallel import lower_nest

RELEASING = ("release", "seq_cst")


def lower_atomic(op: Atomic, lc: Any) -> Stmt:
    out = _lower(op, lc)
    if op.kind == "store" and op.order in RELEASING:
        return Seq((Barrier(op.loc), out), op.loc)
    return out


def _lower(op: Atomic, lc: Any) -> Stmt:
    if isinstance(op.value, Region):
        entry = lc.loops.get(id(op))
        nest = entry[1] if entry else atomic_nest(op)
        return lower_nest(nest, entry[0] if entry else None, lc)  # type: ignore[arg-type]
    from .walker import _Walker

    value = _Walker(lc, lambda s: None).fix(op.value)
    return by_thread_0(element_atomic(op, op.dst.starts, value), op.loc)
