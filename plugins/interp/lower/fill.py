"""``T.fill(dst, value)`` / ``T.clear(dst)``: every element of a region gets one value
(converted to the region's dtype). The part of a global region outside its tensor is skipped."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilelang_x.core_ir.tileops import Fill

from . import Executor, LowerContext, reject_in_parallel

if TYPE_CHECKING:
    from ..runtime import Frame


def lower(op: Fill, ctx: LowerContext) -> Executor:
    dst, value = op.dst, op.value
    value_dt = getattr(value, "dtype", None)

    def fill(rt: Frame) -> None:
        reject_in_parallel(rt, "T.fill")
        rt.write(dst, rt.eval(value), value_dt)

    return fill
