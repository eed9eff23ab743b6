"""``T.alloc_reducer``'s operations. The interpreter keeps one copy of a reducer per block, so the
reduction is its sequential meaning: the opening stores the initial value, every update combines
its contribution into the element (inside ``T.Parallel`` all active lanes at once, with numpy's
unbuffered ``ufunc.at``, so lanes that update the same element all count, in no specified order),
and finalizing only copies the result to the destination, if there is one."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tilelang_x.core_ir.tileops import FinalizeReducer, ReducerInit, ReducerUpdate

from . import Executor, LowerContext, reject_in_parallel
from .atomic import combine_lanes

if TYPE_CHECKING:
    from ..runtime import Frame

_COMBINE = {"sum": np.add, "max": np.maximum, "min": np.minimum, "bitand": np.bitwise_and, "bitor": np.bitwise_or,
            "bitxor": np.bitwise_xor}


def lower_init(op: ReducerInit, ctx: LowerContext) -> Executor:
    def init(rt: Frame) -> None:
        reject_in_parallel(rt, "T.reducer_init")
        rt.write(op.dst, rt.eval(op.value), op.value.dtype)

    return init


def lower_update(op: ReducerUpdate, ctx: LowerContext) -> Executor:
    combine = _COMBINE[op.kind]

    def update(rt: Frame) -> None:
        combine_lanes(rt, op.dst, op.value, combine, f"the update of reducer `{op.dst.buffer.name}`")

    return update


def lower_finalize(op: FinalizeReducer, ctx: LowerContext) -> Executor:
    src, dst = op.src, op.dst

    def finalize(rt: Frame) -> None:
        reject_in_parallel(rt, "T.finalize_reducer")
        if dst is not None:
            rt.write(dst, rt.read(src), src.buffer.dtype)

    return finalize
