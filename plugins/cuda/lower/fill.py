"""T.fill / T.clear: an element-wise nest storing the value (see ``nests.fill_nest``)."""

from __future__ import annotations

from typing import Any

from ....core_ir.stmt import Stmt
from ....core_ir.tileops import Fill
from ..nests import fill_nest
from .parallel import lower_nest


def lower_fill(op: Fill, lc: Any) -> Stmt:
    from .private import lower_private, writes_private

    if writes_private(op):  # every thread fills its own copy of a local buffer
        return lower_private(op, lc)
    entry = lc.loops.get(id(op))
    nest = entry[1] if entry else fill_nest(op)
    return lower_nest(nest, entry[0] if entry else None, lc)
