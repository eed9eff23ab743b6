"""The active-lane mask of a vectorized ``T.Parallel`` nest (``env[MASK]``): gathers and scatters
that honour it, bounds checks per lane, and sequential loops whose bounds differ per lane.
``nl`` counts the leading lane axes of a lane-private buffer, left out of error messages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tilelang_x.core_ir.buffer import Buffer
from tilelang_x.core_ir.errors import OutOfBoundsError
from tilelang_x.core_ir.source import SourceLoc

from .runtime import FRAME, MASK, is_vec


def out_of_bounds(what: str, name: str, idx: tuple, shape: tuple, loc: SourceLoc | None, nl: int = 0) -> None:
    """Raise the out-of-bounds error; ``nl`` leading lane axes (of a lane-private buffer) are
    left out of the message."""
    index = ", ".join(str(int(i)) for i in idx[nl:])
    raise OutOfBoundsError(
        f"out-of-bounds {what} `{name}`[{index}]: the buffer's shape is {tuple(shape[nl:])}",
        loc=loc,
        hint="guard the access with an `if`, or use T.copy, whose global tails are guarded",
    )


def check_lanes(what: str, name: str, idx: tuple, shape: tuple, loc: SourceLoc | None, nl: int = 0) -> None:
    """Raise for the first lane whose index is outside ``shape`` (``idx``: broadcast arrays or
    scalars, already restricted to the active lanes)."""
    bad = None
    for i, n in zip(idx, shape):
        if is_vec(i):
            if i.size and (i.min() < 0 or i.max() >= n):
                b = (i < 0) | (i >= n)
                bad = b if bad is None else bad | b
        elif not 0 <= i < n:
            out_of_bounds(what, name, tuple(np.ravel(i)[0] if is_vec(i) else i for i in idx), shape, loc, nl)
    if bad is not None:
        # the offending index may vary along fewer loop axes than the others (a gather row index
        # beside a column index): name the lane in the shape of all of them
        full = np.broadcast_shapes(*[np.shape(i) for i in idx if is_vec(i)])
        pos = np.unravel_index(int(np.argmax(np.broadcast_to(bad, full))), full)
        lane = tuple(int(np.broadcast_to(i, full)[pos]) if is_vec(i) else int(i) for i in idx)
        out_of_bounds(what, name, lane, shape, loc, nl)


def _in_bounds(idx: tuple, shape: tuple) -> bool:
    for i, n in zip(idx, shape):
        if is_vec(i):
            if i.size and (i.min() < 0 or i.max() >= n):
                return False
        elif not 0 <= i < n:
            return False
    return True


def _active(mask: np.ndarray, idx: tuple) -> tuple[np.ndarray, tuple]:
    """The lanes' shape broadcast with ``mask``, and the indices of the active lanes."""
    shape = np.broadcast_shapes(mask.shape, *[i.shape for i in idx if is_vec(i)])
    m = np.broadcast_to(mask, shape)
    return m, tuple(np.broadcast_to(i, shape)[m] if is_vec(i) else i for i in idx)


def vec_load(env: list, arr: np.ndarray, idx: tuple, name: str, loc: SourceLoc | None, nl: int = 0,
             race: Buffer | None = None) -> Any:
    """``arr[idx]`` for index arrays (a gather), bounds-checked on the active lanes only.
    ``race``: the global buffer read, when the launch's race check follows it."""
    mask = env[MASK]
    races = env[FRAME].races if race is not None else None
    if mask is None or _in_bounds(idx, arr.shape):
        if mask is None:
            check_lanes("read of", name, idx, arr.shape, loc, nl)
        if races is not None:
            races.read(race, arr, idx if mask is None else _active(mask, idx)[1], env[FRAME].block_id, loc)
        return arr[idx]
    # only the active lanes load; the others read zero
    m, sel = _active(mask, idx)
    shape = m.shape
    check_lanes("read of", name, sel, arr.shape, loc, nl)
    if races is not None:
        races.read(race, arr, sel, env[FRAME].block_id, loc)
    out = np.zeros(shape, dtype=arr.dtype)
    out[m] = arr[sel]
    return out


def vec_store(env: list, arr: np.ndarray, idx: tuple, v: Any, name: str, loc: SourceLoc | None,
              nl: int = 0, race: Buffer | None = None) -> None:
    """``arr[idx] = v`` for index arrays (a scatter) on the active lanes, bounds-checked.
    ``race``: the global buffer stored to, when the launch's race check follows it."""
    mask = env[MASK]
    shapes = [i.shape for i in idx if is_vec(i)]
    if is_vec(v):
        shapes.append(v.shape)
    if mask is not None:
        shapes.append(mask.shape)
    shape = np.broadcast_shapes(*shapes)
    if mask is not None:
        m = np.broadcast_to(mask, shape)
        sel = tuple(np.broadcast_to(i, shape)[m] for i in idx)
        vals = np.broadcast_to(v, shape)[m]
    else:
        sel = tuple(np.broadcast_to(i, shape).reshape(-1) for i in idx)
        vals = np.broadcast_to(v, shape).reshape(-1)
    if not len(vals):
        return
    check_lanes("write to", name, sel, arr.shape, loc, nl)
    races = env[FRAME].races if race is not None else None
    if races is not None:
        races.store(race, arr, sel, vals, env[FRAME].block_id, loc)
    arr[sel] = vals


def lane_varying_loop(env: list, slot: int, vt: type, lo: Any, n: Any, body: Callable[[list], Any]) -> None:
    """A sequential loop inside a parallel body whose bounds differ per lane: run from the
    smallest start to the largest end, each lane active only inside its own range."""
    old = env[MASK]
    hi = lo + n
    base = old if old is not None else np.True_
    lo_b, hi_b, act = np.broadcast_arrays(lo, hi, base)
    if not act.any():
        return
    a, b = int(lo_b[act].min()), int(hi_b[act].max())
    try:
        for k in range(a, b):
            kk = vt(k)
            m = (lo <= kk) & (kk < hi)
            m = m if old is None else old & m
            if not np.any(m):
                continue
            env[MASK] = m
            env[slot] = kk
            body(env)
    finally:
        env[MASK] = old
