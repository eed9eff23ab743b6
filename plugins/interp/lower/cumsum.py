"""``T.cumsum(src, dst, dim, reverse)``: inclusive prefix sum along ``dim`` (from the end when
``reverse``), accumulated in float32 for floating tiles (float64 for float64) and in 64-bit
integers for integer tiles, rounded once to dst's dtype. ``src`` and ``dst`` may be the same.
``T.cummax`` (``kind == "max"``): the running maximum, a NaN carrying on to the end."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tilelang_x.core_ir.errors import ShapeMismatchError
from tilelang_x.core_ir.tileops import CumSum

from .. import numerics
from . import Executor, LowerContext, reject_in_parallel

if TYPE_CHECKING:
    from ..runtime import Frame


def lower(op: CumSum, ctx: LowerContext) -> Executor:
    src, dst, dim, reverse = op.src, op.dst, op.dim, op.reverse
    acc = numerics.compute_dtype(src.buffer.dtype)
    what = f"T.cum{op.kind}"
    scan = np.cumsum if op.kind == "sum" else np.maximum.accumulate

    def cumulate(rt: Frame) -> None:
        reject_in_parallel(rt, what)
        x = rt.read(src).astype(acc)
        d = dim if dim >= 0 else dim + x.ndim
        if not 0 <= d < x.ndim:
            raise ShapeMismatchError(f"{what}: dim {dim} out of range for a {x.ndim}-d tile")
        if reverse:
            r = np.flip(scan(np.flip(x, d), axis=d), d)
        else:
            r = scan(x, axis=d)
        rt.write(dst, r)

    return cumulate
