"""Manual warp specialization and explicit mbarriers (TileLang's ``T.ws`` and barrier builtins).

``with T.ws(*ids):`` opens a ``WarpSpecialize`` region that only warpgroups ``ids`` (128 threads
each) run. ``T.alloc_barrier(counts)`` declares mbarriers in shared memory (an ``Alloc`` of a
``barrier``-scope buffer followed by its ``BarrierInit``); ``T.barrier_arrive`` /
``T.barrier_wait`` and TileLang's older spellings (``T.mbarrier_arrive``,
``T.mbarrier_wait_parity``, ``T.create_list_of_mbarrier`` + ``T.get_mbarrier``) become
``BarrierArrive`` / ``BarrierWait``; ``T.alloc_cluster_barrier`` and ``T.barrier_arrive(bar,
cta_id)`` let the blocks of a thread-block cluster arrive on each other's barriers. What can be
checked while tracing is checked here, at the user's line; what needs the whole kernel (which
buffers a region owns) is ``core_ir.verify_ws``.
"""

from __future__ import annotations

import math
from typing import Any

from ..core_ir import dtypes
from ..core_ir import expr as E
from ..core_ir import stmt as S
from ..core_ir.buffer import Buffer
from ..core_ir.errors import TileLangSyntaxError, TileLangTypeError
from ..core_ir.source import SourceLoc, caller_loc
from ..core_ir.stmt import Alloc, BarrierArrive, BarrierInit, BarrierWait, ws_call
from ..core_ir.verify_ws import WARPGROUP
from . import builder as bld
from .cluster import kernel_cluster_dims

__all__ = ["WarpSpecialize", "alloc_barrier", "alloc_cluster_barrier", "barrier_arrive", "barrier_wait",
           "create_list_of_mbarrier", "get_mbarrier", "mbarrier_arrive", "mbarrier_wait_parity", "ws"]

_LIST_NAME = "mbarrier"


def _in_parallel(b: bld.Builder) -> bool:
    return any(f.loop_kind == "parallel" for f in b.frames)


def outside_parallel(b: bld.Builder, what: str, loc: SourceLoc | None) -> None:
    """Refuse ``what`` inside a ``T.Parallel`` body."""
    if _in_parallel(b):
        raise TileLangSyntaxError(f"{what} inside a T.Parallel loop", loc=loc,
                                  hint="a T.Parallel body runs once per element; put it before or after the loop")


class WarpSpecializeFrame:
    """``with T.ws(0):`` / ``with T.ws(0, 1):``: the body runs on the named warpgroups only."""

    def __init__(self, ids: tuple[int, ...]) -> None:
        self.loc = caller_loc()
        self.builder = bld.require_kernel("T.ws")
        self.ids = self._check(ids)
        self.frame: bld.Frame | None = None
        self.depth = 0

    def _check(self, ids: tuple[Any, ...]) -> tuple[int, ...]:
        loc, b = self.loc, self.builder
        if len(ids) == 1 and isinstance(ids[0], (list, tuple)):
            ids = tuple(ids[0])
        if not ids:
            raise TileLangSyntaxError(
                "T.ws() names no warpgroup", loc=loc,
                hint="write T.ws(0) for threads 0..127, T.ws(1) for 128..255, T.ws(0, 1) for both")
        total = math.prod(b.kernel_frame.threads)
        if total % WARPGROUP:
            raise TileLangSyntaxError(
                f"T.ws needs whole warpgroups of {WARPGROUP} threads, but the kernel has threads={total}", loc=loc,
                hint=f"launch a multiple of {WARPGROUP} threads, e.g. threads={WARPGROUP * max(2, total // WARPGROUP)}")
        groups = total // WARPGROUP
        out: list[int] = []
        for g in ids:
            k = None if isinstance(g, bool) else E.as_int(g)
            if k is None:
                raise TileLangTypeError(f"T.ws warpgroup id {g!r} is not a Python int", loc=loc,
                                        hint="the warpgroups of a region are fixed when the kernel is built")
            if not 0 <= k < groups:
                raise TileLangSyntaxError(
                    f"T.ws warpgroup id {k} is out of range: threads={total} makes {groups} warpgroup(s), "
                    f"ids 0..{groups - 1}", loc=loc,
                    hint=f"use an id below {groups}, or launch {WARPGROUP * (k + 1)} threads or more")
            if k in out:
                raise TileLangSyntaxError(f"T.ws names warpgroup {k} twice", loc=loc, hint="list each id once")
            out.append(k)
        return tuple(sorted(out))

    def __enter__(self) -> None:
        b = self.builder
        if b.warp_region is not None:
            raise TileLangSyntaxError(
                f"T.ws regions cannot be nested (this one is inside the {ws_call(b.warp_region)} region)", loc=self.loc,
                hint="close the outer `with T.ws(...)` first; one region may name several warpgroups: T.ws(0, 1)")
        outside_parallel(b, "T.ws", self.loc)
        b.warp_region = self.ids
        self.depth = b.depth
        self.frame = b.push("ws", self.loc)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        b = self.builder
        b.warp_region = None
        if exc_type is not None:
            b.unwind(self.depth)
            return False
        assert self.frame is not None
        b.emit(S.WarpSpecialize(self.ids, b.pop(self.frame), loc=self.loc))
        return False


def ws(*warp_group_ids: Any) -> WarpSpecializeFrame:
    """``with T.ws(*ids):`` a region that only the warpgroups ``ids`` run."""
    return WarpSpecializeFrame(warp_group_ids)


WarpSpecialize = ws


# ---- barriers ----------------------------------------------------------------------------------

def _counts(arrive_count: Any, what: str, loc: SourceLoc | None) -> tuple[int, ...]:
    items = list(arrive_count) if isinstance(arrive_count, (list, tuple)) else [arrive_count]
    ok = bool(items) and all(not isinstance(c, bool) and E.as_int(c) is not None and E.as_int(c) > 0 for c in items)
    if not ok:
        raise TileLangSyntaxError(
            f"{what}: arrive_count={arrive_count!r} must be a positive Python int or a non-empty list of them",
            loc=loc, hint="give the number of threads that arrive per phase, e.g. T.alloc_barrier(128)")
    return tuple(int(E.as_int(c)) for c in items)  # type: ignore[arg-type]


def _declare(counts: tuple[int, ...], name: str, what: str, loc: SourceLoc | None) -> Buffer:
    b = bld.require_kernel(what)
    if b.warp_region is not None or any(f.kind in bld.CONTROL_KINDS for f in b.frames):
        raise TileLangSyntaxError(f"{what} inside a T.ws region, loop or if", loc=loc,
                                  hint="allocate barriers at the top level of the T.Kernel body, before the regions")
    buf = b.new_buffer(name, (len(counts),), dtypes.uint64, "barrier", loc)
    b.emit(Alloc(buf, None, loc=loc))
    b.emit(BarrierInit(buf, counts, loc=loc))
    return buf


def alloc_barrier(arrive_count: Any) -> Buffer:
    """``T.alloc_barrier(128)`` / ``T.alloc_barrier([128, 128])``: mbarriers in shared memory; a
    phase of barrier ``k`` completes when ``arrive_count[k]`` threads have arrived."""
    loc = caller_loc()
    return _declare(_counts(arrive_count, "T.alloc_barrier", loc), "barrier", "T.alloc_barrier", loc)


def alloc_cluster_barrier(arrive_count: Any) -> Buffer:
    """``T.alloc_cluster_barrier(2)``: mbarriers that the blocks of the thread-block cluster may
    arrive on, with ``T.barrier_arrive(bar, cta_id)`` (every mbarrier may be one here: this is
    ``T.alloc_barrier``). Peers arrive only once the barrier is initialized in every block of the
    cluster: a ``T.cluster_sync()`` after the allocation orders that."""
    loc = caller_loc()
    return _declare(_counts(arrive_count, "T.alloc_cluster_barrier", loc), "cluster_barrier",
                    "T.alloc_cluster_barrier", loc)


def create_list_of_mbarrier(*arrive_counts: Any) -> None:
    """TileLang's older spelling: ``T.create_list_of_mbarrier([128, 128])`` declares the kernel's
    mbarriers, which the barrier calls then name by their index (``T.mbarrier_arrive(0)``)."""
    loc = caller_loc()
    b = bld.require_kernel("T.create_list_of_mbarrier")
    if b.mbarrier_list is not None:
        raise TileLangSyntaxError("T.create_list_of_mbarrier is called twice in one kernel", loc=loc,
                                  hint="declare all the list's barriers in one call")
    counts = arrive_counts[0] if len(arrive_counts) == 1 and isinstance(arrive_counts[0], (list, tuple)) \
        else arrive_counts
    b.mbarrier_list = _declare(_counts(counts, "T.create_list_of_mbarrier", loc), _LIST_NAME,
                               "T.create_list_of_mbarrier", loc)


def get_mbarrier(index: Any) -> E.Load:
    """Barrier ``index`` of ``T.create_list_of_mbarrier``'s list."""
    loc = caller_loc()
    b = bld.require_kernel("T.get_mbarrier")
    return _element(b, b.mbarrier_list, index, "T.get_mbarrier", loc)


def _element(b: bld.Builder, buf: Buffer | None, index: Any, what: str, loc: SourceLoc | None) -> E.Load:
    if buf is None:
        raise TileLangSyntaxError(f"{what}: barrier {index!r} names an index, but the kernel has no "
                                  "T.create_list_of_mbarrier list", loc=loc,
                                  hint="pass the buffer T.alloc_barrier returned (or an element of it: bar[k])")
    i = int_operand(index, f"{what}: the barrier index", loc)
    n = E.as_int(buf.shape[0])
    k = E.as_int(i)
    if k is not None and n is not None and not 0 <= k < n:
        raise TileLangSyntaxError(f"{what}: barrier index {k} is out of range for `{buf.name}`, which holds {n}",
                                  loc=loc, hint=f"use an index in 0..{n - 1}")
    return E.Load(buf, (i,), loc)


def int_operand(value: Any, what: str, loc: SourceLoc | None) -> E.Expr:
    """``value`` as an integer expression, or ``TileLangTypeError`` naming ``what``."""
    if isinstance(value, bool) or not (isinstance(value, E.Expr) or isinstance(value, int)):
        raise TileLangTypeError(f"{what} must be an integer or an integer expression, got {value!r}", loc=loc)
    e = E.convert(value)
    if not e.dtype.is_int:
        raise TileLangTypeError(f"{what} must be an integer, got `{e}` of dtype {e.dtype}", loc=loc)
    return e


def barrier_operand(value: Any, what: str, loc: SourceLoc | None) -> tuple[Buffer, E.Expr]:
    """(barrier buffer, index) of a barrier argument: a ``T.alloc_barrier`` buffer (its barrier 0),
    one element of it, or an index into the ``T.create_list_of_mbarrier`` list."""
    b = bld.require_kernel(what)
    if isinstance(value, Buffer) and value.scope == "barrier":
        buf, index = value, 0
    elif isinstance(value, E.Load) and value.buffer.scope == "barrier":
        buf, index = value.buffer, value.indices[0]
    elif isinstance(value, (Buffer, E.Load)):
        name = value.name if isinstance(value, Buffer) else value.buffer.name
        raise TileLangTypeError(f"{what}: `{name}` is not a barrier", loc=loc,
                                hint="pass a buffer made by T.alloc_barrier (or one element of it)")
    else:
        buf, index = b.mbarrier_list, value
    outside_parallel(b, what, loc)
    element = _element(b, buf, index, what, loc)
    return element.buffer, element.indices[0]


def _cta(b: bld.Builder, cta_id: Any, what: str, loc: SourceLoc | None) -> E.Expr:
    """``cta_id=``: the rank, in the caller's cluster, of the block whose barrier it arrives at."""
    cta = int_operand(cta_id, f"{what}: cta_id", loc)
    size = math.prod(kernel_cluster_dims(b.kernel_frame))
    c = E.as_int(cta)
    if c is not None and not 0 <= c < size:
        raise TileLangSyntaxError(
            f"{what}(..., cta_id={c}): the cluster holds {size} block{'s' if size > 1 else ''} (ranks 0..{size - 1})",
            loc=loc, hint="name a rank of the caller's cluster (T.block_rank_in_cluster() is the caller's own), or "
            "launch larger clusters with T.Kernel(..., cluster_dims=...)")
    return E.cast(cta, dtypes.uint32)


def barrier_arrive(barrier_id: Any, cta_id: Any = None) -> None:
    """``T.barrier_arrive(bar)``: every thread that runs it arrives once at ``bar``;
    ``cta_id=r``: at ``bar`` of the block of rank ``r`` in the caller's cluster."""
    loc = caller_loc()
    what = "T.barrier_arrive"
    buf, index = barrier_operand(barrier_id, what, loc)
    b = bld.require_kernel(what)
    cta = None if cta_id is None else _cta(b, cta_id, what, loc)
    b.emit(BarrierArrive(buf, index, loc=loc, cta=cta))


def barrier_wait(barrier_id: Any, parity: Any = None) -> None:
    """``T.barrier_wait(bar, parity)``: wait until the phase of parity ``parity`` of ``bar`` is complete."""
    loc = caller_loc()
    what = "T.barrier_wait"
    buf, index = barrier_operand(barrier_id, what, loc)
    if parity is None:
        raise TileLangSyntaxError(f"{what} needs the parity of the phase to wait for", loc=loc,
                                  hint="e.g. T.barrier_wait(bar, k % 2) in the k-th round")
    p = int_operand(parity, f"{what}: parity", loc)
    c = E.as_int(p)
    if c is not None and c not in (0, 1):
        raise TileLangSyntaxError(f"{what}: parity {c} is neither 0 nor 1", loc=loc,
                                  hint="a phase parity is 0 or 1: write `k % 2` rather than `k`")
    bld.require_kernel(what).emit(BarrierWait(buf, index, p, loc=loc))


def mbarrier_arrive(mbarrier: Any, cta_id: Any = None) -> None:
    """TileLang's spelling of ``T.barrier_arrive``."""
    barrier_arrive(mbarrier, cta_id)


def mbarrier_wait_parity(mbarrier: Any, parity: Any) -> None:
    """TileLang's spelling of ``T.barrier_wait``."""
    barrier_wait(mbarrier, parity)
