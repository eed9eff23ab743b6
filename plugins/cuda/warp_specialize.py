"""CUDA code of manual warp specialization (``T.ws`` regions) and explicit mbarriers.

A kernel with regions or barriers is *manual*: ``ctx.data["cuda.manual_ws"]`` is set by
``manual_setup`` (the first stage), and then
- the compiler's own pipelining, warp specialization, rasterisation, mask unswitching and direct
  stores do not run (``unless_manual``): the kernel's mbarriers are its pipeline;
- every tile op is laid out and lowered for one warpgroup (128 threads): ``tx`` is
  ``threadIdx.x & 127``; a region ``T.ws(g)`` is ``if (tlx_ws_wg() == g)``; a tile op, parallel
  loop or store of shared / global memory outside the regions runs on warpgroup 0, and one in a
  region of several warpgroups on its first (``leader_only``), followed by a barrier of the block
  (of the region's warpgroups): the interpreter's meeting, where none goes on before it is done;
- barriers the sync pass needs inside a region are the region's named barrier (one warpgroup g:
  ``bar.sync 1 + g, 128``; a set of several: one of 9..15 for all their threads), so the other
  warpgroups never join them; between two regions the pass puts no barrier (they run side by side,
  ordered by the kernel's mbarriers: a barrier of the block between them would hang a producer
  that waits for its consumer), before a statement outside the regions it puts
  ``__syncthreads()`` as usual (``_Sync.region`` in sync.py);
- ``T.alloc_barrier`` is a ``uint64`` array in shared memory, initialised by thread 0, fenced and
  published by a block barrier; ``T.barrier_arrive`` / ``T.barrier_wait`` are ``mbarrier.arrive``
  / a ``try_wait`` (sm_90) or ``test_wait`` (sm_80) loop on it, made by every thread that runs
  them (``include/tlx_ws.h``); ``T.barrier_arrive(bar, cta_id)`` arrives at a peer's barrier
  (cluster_sync.py).
More than 7 distinct sets of several warpgroups, or a multi-dimensional block, are not lowered
(``NotSupportedError``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ...core_ir import dtypes
from ...core_ir import expr as E
from ...core_ir.buffer import Buffer
from ...core_ir.errors import NotSupportedError
from ...core_ir.stmt import (
    Alloc,
    BarrierArrive,
    BarrierInit,
    BarrierWait,
    If,
    PrimFunc,
    Seq,
    Stmt,
    WarpSpecialize,
)
from ...core_ir.verify_ws import WARPGROUP, uses_barriers
from ...core_ir.visit import rewrite, walk
from .cluster_sync import REMOTE_ARRIVE
from .lir import THREAD, Barrier, Block, Evaluate, Intrin, SmemAddr

__all__ = ["MANUAL", "SETS", "WG", "barrier_addr", "leader_only", "lower_ws", "manual_setup", "region_barriers",
           "unless_manual", "uses_ws_header", "ws_header", "ws_threads"]

#: ``ctx.data`` keys: the number of warpgroups of a kernel with T.ws regions or explicit barriers;
#: the named barrier of each set of several warpgroups a region names (warpgroup g alone: 1 + g)
MANUAL = "cuda.manual_ws"
SETS = "cuda.manual_ws_sets"
WG = Intrin("tlx_ws_wg", ())
_GROUPS = 8  # warpgroups of a 1024-thread block: named barriers 1..8
_SET_BARRIERS = 15 - _GROUPS  # named barriers 9..15


def manual_setup(func: PrimFunc, ctx: Any) -> PrimFunc:
    """Mark a kernel with regions or barriers as manual, number its sets of several warpgroups;
    refuse what CUDA does not lower."""
    from .layout_inference import find_kernel

    kernel = find_kernel(func.body)
    if kernel is None or not uses_barriers(kernel.body):
        return func
    sets = sorted({n.ids for n in walk(kernel.body) if isinstance(n, WarpSpecialize) and len(n.ids) > 1})
    if len(sets) > _SET_BARRIERS:
        where = next(n for n in walk(kernel.body) if isinstance(n, WarpSpecialize) and n.ids == sets[_SET_BARRIERS])
        raise NotSupportedError(
            f"{where.call}: CUDA has named barriers for {_SET_BARRIERS} sets of several warpgroups, and this kernel's "
            f"regions name {len(sets)}", loc=where.loc, hint="give these warpgroups regions of their own")
    if len(kernel.threads) != 1:
        raise NotSupportedError(
            f"T.ws regions and barriers need a 1-D block on CUDA, not threads={list(kernel.threads)}", loc=kernel.loc,
            hint=f"launch threads={kernel.num_threads}")
    ctx.data[MANUAL] = -(-kernel.num_threads // WARPGROUP)  # its warpgroups (the last may be partial)
    ctx.data[SETS] = {ids: 1 + _GROUPS + k for k, ids in enumerate(sets)}
    return func


def unless_manual(stage: Callable[[PrimFunc, Any], PrimFunc]) -> Callable[[PrimFunc, Any], PrimFunc]:
    """``stage``, skipped for a manual kernel."""

    def run(func: PrimFunc, ctx: Any) -> PrimFunc:
        return func if ctx.data.get(MANUAL) else stage(func, ctx)

    run.__name__ = getattr(stage, "__name__", "stage")
    return run


def ws_threads(kernel: Any, ctx: Any) -> int:
    """The threads tile ops are laid out over: one warpgroup in a manual kernel, else the block."""
    return min(WARPGROUP, kernel.num_threads) if ctx.data.get(MANUAL) else kernel.num_threads


def leader_only(out: Stmt, loc: Any, g: int = 0) -> Stmt:
    """A statement of the whole block, or of a region of several warpgroups, in a manual kernel:
    its first warpgroup ``g`` runs it (a unit for the sync pass), its own barriers (a cross-warp
    reduction's) that warpgroup's named barrier."""
    return Block(If(_in((g,)), _named(out, (g,), {}, loc), None, loc), f"warpgroup {g}", loc)


def _in(ids: tuple[int, ...]) -> E.Expr:
    """Whether the calling thread is in warpgroups ``ids``."""
    lo, hi = ids[0], ids[-1]
    if len(ids) == 1:
        return E.binary("==", WG, lo)
    if list(ids) == list(range(lo, hi + 1)):
        return E.binary("and", E.binary(">=", WG, lo), E.binary("<=", WG, hi))
    out = E.binary("==", WG, lo)
    for g in ids[1:]:
        out = E.binary("or", out, E.binary("==", WG, g))
    return out


def _named(body: Stmt, ids: tuple[int, ...], sets: dict[tuple[int, ...], int], loc: Any) -> Stmt:
    """``body`` with its barriers the named barrier of warpgroups ``ids``."""
    bar = 1 + ids[0] if len(ids) == 1 else sets[ids]
    named = Evaluate(Intrin("tlx_ws_sync", (E.const(bar), E.const(WARPGROUP * len(ids)))), loc)
    return rewrite(body, lambda n: named if isinstance(n, Barrier) else None)


# ---- lowering -----------------------------------------------------------------------------------

def _twin(buf: Buffer, lc: Any) -> Buffer:
    """The shared ``uint64`` array holding the mbarriers of ``buf``."""
    twin = lc.barriers.get(buf)
    if twin is None:
        twin = lc.barriers[buf] = Buffer(buf.name, buf.shape, dtypes.uint64, "shared", buf.loc)
    return twin


def barrier_addr(buf: Buffer, index: E.Expr, lc: Any) -> SmemAddr:
    """The shared address of mbarrier ``buf[index]``."""
    return SmemAddr(_twin(buf, lc), (index,), "async")  # "async": not a data access for the sync pass


def lower_ws(s: Stmt, lc: Any, lower_region: Callable[[tuple[int, ...], Stmt], Stmt]) -> Stmt | None:
    """The lowered form of a region or barrier statement (``None`` for another statement)."""
    if isinstance(s, Alloc) and s.buffer.scope == "barrier":
        return Alloc(_twin(s.buffer, lc), None, s.loc)
    if isinstance(s, BarrierInit):
        inits = tuple(Evaluate(Intrin("tlx_ws_bar_init", (barrier_addr(s.buffer, E.const(i), lc), E.const(c))), s.loc)
                      for i, c in enumerate(s.counts))
        thread_0 = E.binary("and", E.binary("==", WG, 0), E.binary("==", THREAD, 0))
        return Seq((If(thread_0, Seq(inits), None, s.loc), Evaluate(Intrin("tlx_ws_bar_fence_init", ())),
                    Barrier(s.loc)), s.loc)
    if isinstance(s, BarrierArrive) and s.cta is not None:  # a peer's barrier (cluster_sync.py)
        return Evaluate(Intrin(REMOTE_ARRIVE, (barrier_addr(s.buffer, s.index, lc), s.cta)), s.loc)
    if isinstance(s, BarrierArrive):
        return Evaluate(Intrin("tlx_ws_arrive", (barrier_addr(s.buffer, s.index, lc),)), s.loc)
    if isinstance(s, BarrierWait):
        return Evaluate(Intrin("tlx_ws_wait", (barrier_addr(s.buffer, s.index, lc), s.parity)), s.loc)
    if isinstance(s, WarpSpecialize):
        return WarpSpecialize(s.ids, lower_region(s.ids, s.body), s.loc)
    return None


# ---- after sync insertion -----------------------------------------------------------------------

def region_barriers(s: WarpSpecialize, sets: dict[tuple[int, ...], int]) -> Stmt:
    """The region as ``if`` its warpgroups, its barriers their named barrier."""
    return If(_in(s.ids), _named(s.body, s.ids, sets, s.loc), None, s.loc)


def uses_ws_header(body: Stmt) -> bool:
    return any(isinstance(n, Intrin) and n.fn.startswith("tlx_ws_") for n in walk(body))


def ws_header() -> str:
    with open(os.path.join(os.path.dirname(__file__), "include", "tlx_ws.h")) as fh:
        return fh.read()

