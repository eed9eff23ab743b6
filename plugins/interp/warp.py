"""Warp operations on the interpreter's per-thread lanes (one lane per thread of the block, the
linear thread index, so lanes ``32 w .. 32 w + 31`` are warp ``w``).

Shuffles follow PTX ``shfl.sync``: the source lane offset is taken modulo 32, a group of
``width`` lanes reads only inside itself (``shfl_sync``) or from earlier groups (``shfl_xor``),
and a lane whose source falls outside keeps its own value. Reductions combine by the butterfly
the CUDA backend generates (xor 16, 8, 4, 2, 1), so every lane gets the same, bit-identical value;
16- and 8-bit floats are combined in float32 and rounded once. ``match_any_sync`` compares bit
patterns; ``elect_sync`` elects lane 0, the lowest lane of a whole warp. Every lane of a warp must
execute a warp operation (CUDA's full mask): a warp with both active and inactive lanes raises.
The block's votes (``T.syncthreads_count/and/or``) combine every lane of the block into one value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.errors import TileLangError
from tilelang_x.core_ir.source import SourceLoc

from . import numerics
from .runtime import MASK

Fn = Callable[[list], Any]
_BUTTERFLY = (16, 8, 4, 2, 1)
_COMBINE: dict[str, Callable[[Any, Any], Any]] = {
    "sum": np.add, "max": np.maximum, "min": np.minimum, "bitand": np.bitwise_and, "bitor": np.bitwise_or,
}


def warp_fn(e: E.WarpOp, fargs: list[Fn], nthreads: int, loc: SourceLoc | None) -> Fn:
    """The closure computing ``e`` for all ``nthreads`` lanes; ``fargs`` compute its operands."""
    t = np.arange(nthreads)
    lane = t % E.WARP_SIZE
    warp0 = t - lane
    out = numerics.storage_dtype(e.dtype)
    op = e.op

    def lanes(x: Any) -> np.ndarray:
        return np.broadcast_to(np.asarray(x), (nthreads,))

    if op in E.BLOCK_VOTE_OPS:
        return _block_vote(op, fargs[0], nthreads, out.type, loc)
    if op in E.SHUFFLE_OPS:
        source = _shuffle_source(op, lane, e.width)
        fv, fb = fargs

        def shuffle(env: list) -> Any:
            _converged(env[MASK], op, loc)
            return lanes(fv(env))[warp0 + source(lanes(fb(env)).astype(np.int64))]

        return shuffle
    if op == "activemask":
        return lambda env: _ballot(np.ones(nthreads, bool) if env[MASK] is None else lanes(env[MASK]), lane, warp0)
    if op == "elect_sync":
        elected = lane == 0

        def elect(env: list) -> Any:
            _converged(env[MASK], op, loc)
            return elected

        return elect
    (fv,) = fargs
    if op.startswith("warp_reduce_"):
        combine = _COMBINE[op[len("warp_reduce_"):]]
        dt = e.dtype
        narrow = dt.is_float and dt.bits <= 16

        def reduce(env: list) -> Any:
            _converged(env[MASK], op, loc)
            v = lanes(fv(env))
            if narrow:
                v = v.astype(np.float32)
            for m in _BUTTERFLY:
                v = combine(v, v[warp0 + (lane ^ m)])
            return numerics.convert(v, dt) if narrow else v

        return reduce

    if op in ("match_any_sync", "match_all_sync"):

        def match(env: list) -> Any:
            _converged(env[MASK], op, loc)
            same = _match_any(_bits(lanes(fv(env))))
            if op == "match_any_sync":
                return same
            agreed = (same.reshape(-1, E.WARP_SIZE) == _FULL).all(axis=1)
            return np.repeat(np.where(agreed, _FULL, np.uint32(0)), E.WARP_SIZE)

        return match

    def vote(env: list) -> Any:
        _converged(env[MASK], op, loc)
        p = lanes(fv(env)).astype(bool)
        if op == "ballot_sync":
            return _ballot(p, lane, warp0)
        per_warp = p.reshape(-1, E.WARP_SIZE)
        hit = per_warp.any(axis=1) if op == "any_sync" else per_warp.all(axis=1)
        return np.repeat(hit, E.WARP_SIZE).astype(out)

    return vote


def _block_vote(op: str, fp: Fn, nthreads: int, out: Any, loc: SourceLoc | None) -> Fn:
    """``__syncthreads_count/and/or`` over the block's ``nthreads`` lanes: one value for all."""

    def vote(env: list) -> Any:
        mask = env[MASK]
        if mask is not None and not np.all(mask):
            raise TileLangError(f"T.{op} is executed by only some threads of the block (a condition or loop around "
                                "it differs between them)", loc=loc,
                                hint="every thread of the block must reach a block barrier: vote before the `if`")
        p = np.broadcast_to(np.asarray(fp(env)), (nthreads,)).astype(bool)
        if op == "syncthreads_count":
            return out(np.count_nonzero(p))
        return out(p.all() if op == "syncthreads_and" else p.any())

    return vote


def _shuffle_source(op: str, lane: np.ndarray, width: int) -> Callable[[np.ndarray], np.ndarray]:
    """The lane each lane reads, from the per-lane operand ``b`` (PTX's clamp and segment mask)."""
    lo = lane & (E.WARP_SIZE - width)
    hi = lo | (width - 1)

    def source(b: np.ndarray) -> np.ndarray:
        b = b & (E.WARP_SIZE - 1)
        if op == "shfl_sync":
            return lo | (b & (width - 1))
        j = {"shfl_xor": lane ^ b, "shfl_down": lane + b, "shfl_up": lane - b}[op]
        ok = j >= lo if op == "shfl_up" else j <= hi
        return np.where(ok, j, lane)

    return source


def _ballot(p: np.ndarray, lane: np.ndarray, warp0: np.ndarray) -> np.ndarray:
    bits = np.where(p, np.left_shift(np.uint64(1), lane.astype(np.uint64)), np.uint64(0))
    per_warp = np.bitwise_or.reduce(bits.reshape(-1, E.WARP_SIZE), axis=1)
    return np.repeat(per_warp, E.WARP_SIZE)


_FULL = np.uint32(0xFFFFFFFF)


def _bits(v: np.ndarray) -> np.ndarray:
    """``v``'s bit patterns (floats compared as CUDA's ``__match_any_sync`` does: -0.0 != 0.0)."""
    return v.view(f"u{v.dtype.itemsize}") if v.dtype.kind == "f" else v


def _match_any(v: np.ndarray) -> np.ndarray:
    """Per lane, the uint32 mask of the lanes of its warp holding the same value."""
    per_warp = v.reshape(-1, E.WARP_SIZE)
    same = per_warp[:, :, None] == per_warp[:, None, :]
    weights = np.left_shift(np.uint64(1), np.arange(E.WARP_SIZE, dtype=np.uint64))
    return (same * weights).sum(axis=2, dtype=np.uint64).astype(np.uint32).reshape(-1)


def _converged(mask: Any, op: str, loc: SourceLoc | None) -> None:
    """Raise when some warp executes ``op`` with only part of its lanes."""
    if mask is None:
        return
    active = np.asarray(mask, dtype=bool).reshape(-1, E.WARP_SIZE)
    partial = active.any(axis=1) & ~active.all(axis=1)
    if partial.any():
        w = int(np.argmax(partial))
        idle = int(np.argmin(active[w])) + w * E.WARP_SIZE
        raise TileLangError(
            f"T.{op} is executed by only some lanes of warp {w} (thread {idle} does not reach it: a "
            "condition or loop around it differs within the warp)", loc=loc,
            hint="all 32 lanes of a warp must execute a warp operation: compute it before the `if` / loop, "
            "or make the condition the same for the whole warp")
