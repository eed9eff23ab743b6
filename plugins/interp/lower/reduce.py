"""``T.reduce_<kind>(src, dst, dim, clear)``: reduce a tile along one dimension.

Kinds: ``sum``, ``max``, ``min``, ``abssum`` (sum of absolute values), ``absmax`` (largest absolute
value), and for integer tiles ``bitand``, ``bitor``, ``bitxor``. Floating tiles reduce in float32
(float64 for float64), integer tiles in 64-bit integers; the result is rounded once to dst's
dtype. Without ``clear`` the result is combined with what dst holds (added for the sums, max/min
for max/min, the same bitwise operation for the bitwise kinds).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tilelang_x.core_ir.errors import ShapeMismatchError
from tilelang_x.core_ir.tileops import Reduce

from .. import numerics
from . import Executor, LowerContext, reject_in_parallel

if TYPE_CHECKING:
    from ..runtime import Frame

_REDUCE = {
    "sum": (lambda x, d: np.sum(x, axis=d), np.add),
    "abssum": (lambda x, d: np.sum(np.abs(x), axis=d), np.add),
    "max": (lambda x, d: np.max(x, axis=d), np.maximum),
    "absmax": (lambda x, d: np.max(np.abs(x), axis=d), np.maximum),
    "min": (lambda x, d: np.min(x, axis=d), np.minimum),
    "bitand": (lambda x, d: np.bitwise_and.reduce(x, axis=d), np.bitwise_and),
    "bitor": (lambda x, d: np.bitwise_or.reduce(x, axis=d), np.bitwise_or),
    "bitxor": (lambda x, d: np.bitwise_xor.reduce(x, axis=d), np.bitwise_xor),
}


def lower(op: Reduce, ctx: LowerContext) -> Executor:
    src, dst, dim, clear = op.src, op.dst, op.dim, op.clear
    reduce_fn, combine = _REDUCE[op.kind]
    acc = numerics.compute_dtype(src.buffer.dtype)

    def reduce(rt: Frame) -> None:
        reject_in_parallel(rt, f"T.reduce_{op.kind}")
        x = rt.read(src).astype(acc)
        if not 0 <= dim < x.ndim:
            raise ShapeMismatchError(f"T.reduce_{op.kind}: dim {dim} out of range for a {x.ndim}-d tile")
        r = reduce_fn(x, dim)
        if not clear:
            old = rt.read(dst).astype(acc)
            if old.size != r.size:
                raise ShapeMismatchError(
                    f"T.reduce_{op.kind}: the result has {r.size} elements but `{dst.buffer.name}` has {old.size}"
                )
            r = combine(old.reshape(r.shape), r)
        rt.write(dst, r)

    return reduce
