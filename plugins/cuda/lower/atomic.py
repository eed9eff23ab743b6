"""T.atomic_add/max/min: the region form is an element-wise nest of atomics; the scalar form is
one atomic (run by one thread when it stands outside a parallel loop)."""

from __future__ import annotations

from typing import Any

from ....core_ir import expr as E
from ....core_ir.buffer import Region
from ....core_ir.stmt import If, Stmt
from ....core_ir.tileops import Atomic
from ..lir import THREAD, AtomicStore
from ..nests import atomic_nest
from .parallel import lower_nest


def lower_atomic(op: Atomic, lc: Any) -> Stmt:
    if isinstance(op.value, Region):
        entry = lc.loops.get(id(op))
        nest = entry[1] if entry else atomic_nest(op)
        return lower_nest(nest, entry[0] if entry else None, lc)  # type: ignore[arg-type]
    from .walker import _Walker

    value = _Walker(lc, lambda s: None).fix(op.value)
    store = AtomicStore(op.kind, op.dst.buffer, op.dst.starts, E.cast(value, op.dst.buffer.dtype), op.loc)
    return If(E.binary("==", THREAD, 0), store, None, op.loc)
