"""``T.atomic_add / max / min / or / and / xor / store(dst, value)``.

``value`` is a scalar expression (``dst`` usually one element) or a region shaped like ``dst``.
The value is converted to dst's dtype, then combined with dst's element in dst's dtype (float16
in float16, bfloat16 rounded after the operation). Parts of a global destination outside its
tensor are skipped, as for ``T.copy``.

Inside a ``T.Parallel`` body the op runs for every active lane at once, with numpy's unbuffered
``ufunc.at``, so lanes that hit the same element all contribute (the order of contributions is
not specified, as on a GPU).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.buffer import Region
from tilelang_x.core_ir.errors import OutOfBoundsError, TileLangSyntaxError
from tilelang_x.core_ir.tileops import Atomic

from .. import numerics
from ..runtime import fmt_region, is_vec
from . import Executor, LowerContext

if TYPE_CHECKING:
    from ..runtime import Frame

def _replace(old: Any, new: Any) -> Any:
    return np.broadcast_to(new, np.shape(old)) if np.ndim(old) else new


_COMBINE = {"add": np.add, "max": np.maximum, "min": np.minimum, "or": np.bitwise_or, "and": np.bitwise_and,
            "xor": np.bitwise_xor, "store": _replace}


def lower(op: Atomic, ctx: LowerContext) -> Executor:
    dst, value, kind = op.dst, op.value, op.kind
    combine = _COMBINE[kind]
    dst_dt = dst.buffer.dtype
    value_dt = value.dtype

    def atomic(rt: Frame) -> None:
        if rt.in_parallel:
            if isinstance(value, Region):
                raise TileLangSyntaxError(
                    f"T.atomic_{kind} of a whole region inside a T.Parallel loop",
                    hint="inside T.Parallel, pass one element: T.atomic_add(dst[i, j], value)",
                )
            combine_lanes(rt, op.dst, op.value, combine, f"T.atomic_{kind}", kind == "store")
            return
        if isinstance(value, Region):
            v = numerics.convert(rt.read(value), dst_dt, value_dt)
            _, ext = rt.bounds(dst)
            v = np.asarray(v).reshape(ext)
        else:
            v = numerics.convert(rt.eval(value), dst_dt, value_dt)
        old = rt.read(dst, atomic=True)
        rt.write(dst, combine(old, v), atomic=True)

    return atomic


def combine_lanes(rt: Frame, dst: Region, value: E.Expr, combine: Any, what: str, store: bool = False) -> None:
    """The element-wise form: ``dst`` is one element per lane, its start indices per-lane arrays;
    every active lane combines its ``value`` into its element (``store``: one of the lanes storing
    to an element wins)."""
    buf = dst.buffer
    arr = rt.array(buf)
    for x in dst.extents:
        if E.as_int(x) != 1:
            raise TileLangSyntaxError(
                f"{what} on a region of `{buf.name}` inside a T.Parallel loop",
                hint="inside T.Parallel, pass one element: T.atomic_add(dst[i, j], value)",
            )
    idx = [rt.eval(s) for s in dst.starts]
    v = numerics.convert(rt.eval(value), buf.dtype, value.dtype)
    mask = rt.mask
    # the nest's lane shape too: lanes whose index and value are the same all count
    shapes = [rt.lane_shape] + [np.shape(i) for i in idx] + [np.shape(v)] + ([mask.shape] if mask is not None else [])
    shape = np.broadcast_shapes(*shapes)
    keep = np.ones(shape, dtype=bool) if mask is None else np.broadcast_to(mask, shape).copy()
    full = [np.broadcast_to(np.asarray(i, dtype=np.int64), shape) for i in idx]
    outside = np.zeros(shape, dtype=bool)
    for i, n in zip(full, arr.shape):
        outside |= (i < 0) | (i >= n)
    outside &= keep
    if outside.any():
        if buf.scope != "global":
            pos = np.unravel_index(int(np.argmax(outside)), shape)
            lane = [int(i[pos]) for i in full]
            raise OutOfBoundsError(
                f"out-of-bounds {what} on {buf.scope} buffer "
                f"{fmt_region(buf.name, lane, [1] * len(lane))}: the buffer's shape is {tuple(arr.shape)}"
            )
        keep &= ~outside
    sel = tuple(i[keep] for i in full)
    vals = np.broadcast_to(v, shape)[keep] if is_vec(v) else v
    races = rt.races
    if races is not None and races.tracks(buf):
        races.atomic(buf, arr, sel, rt.block_id, rt.loc)
    if store:  # lanes storing to one element: one of them wins, as on a GPU
        arr[sel] = vals
    elif numerics.is_narrow(buf.dtype):
        combine.at(arr, sel, np.asarray(vals, dtype=arr.dtype))
        arr[sel] = numerics.round_to(arr[sel], buf.dtype)
    else:
        combine.at(arr, sel, vals)
