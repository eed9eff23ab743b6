"""Hand-written asynchronous copies: TMA copies and transaction counts (TileLang's
``T.tma_copy``, ``T.mbarrier_expect_tx``, ``T.mbarrier_arrive_expect_tx``,
``T.fence_proxy_async``; TMA stores with ``T.tma_store_arrive`` / ``T.tma_store_wait``) and
cp.async groups (``T.async_copy``, ``T.ptx_commit_group``, ``T.ptx_wait_group``).

``T.tma_copy(src, dst, barrier=bar)`` loads a tile of a global tensor into a shared tile: the
threads running it issue it once, it adds the tile's bytes to ``bar``'s expected transactions and
its landed bytes complete them; the kernel arrives and waits with the barrier operations of
``warp_specialize.py``; with ``cluster_mask=m`` the blocks of ranks ``m`` in the cluster share the
tile (a multicast load). ``T.tma_copy(shared_tile, C[...])`` stores a shared tile, committed as a
bulk group of its own. ``T.async_copy(src, dst)`` is a cp.async copy committed as a group of its
own, there once ``T.ptx_wait_group`` has waited for its group. What can be checked while tracing
is checked here, at the user's line.
"""

from __future__ import annotations

import math
from typing import Any

from ..core_ir import expr as E
from ..core_ir.errors import NotSupportedError, ShapeMismatchError, TileLangSyntaxError, TileLangTypeError
from ..core_ir.source import SourceLoc, caller_loc
from ..core_ir.stmt import BarrierExpectTx, BulkGroup, CpAsyncGroup, FenceProxyAsync, freeze_annotations
from ..core_ir.tileops import AsyncCopy, TmaCopy
from . import builder as bld
from .cluster import kernel_cluster_dims
from .surface import _from_point, _operand, _Point
from .warp_specialize import barrier_operand, int_operand, outside_parallel

__all__ = ["async_copy", "fence_proxy_async", "mbarrier_arrive_expect_tx", "mbarrier_expect_tx", "ptx_commit_group",
           "ptx_wait_group", "tma_copy", "tma_store_arrive", "tma_store_wait"]

_EVICTION = ("evict_normal", "evict_first", "evict_last")
_ANNOTATIONS = ("emit_arrive", "eviction_policy")


def _regions(src: Any, dst: Any, what: str, loc: SourceLoc | None) -> tuple[Any, Any]:
    s = _operand(src, f"{what} source")
    d = _operand(dst, f"{what} destination")
    if isinstance(s, _Point) and isinstance(d, _Point):
        raise ShapeMismatchError(f"{what}: neither operand gives the tile's extents", loc=loc,
                                 hint="pass the whole shared tile (or a slice of it) as the destination")
    if isinstance(s, _Point):
        s = _from_point(s, d.extents, what, loc)  # type: ignore[union-attr]
    elif isinstance(d, _Point):
        d = _from_point(d, s.extents, what, loc)
    return s, d


def _check_scopes(s: Any, d: Any, what: str, loc: SourceLoc | None) -> None:
    sb, db = s.buffer, d.buffer
    store = what == "T.tma_copy" and sb.scope == "shared" and db.scope == "global"
    if not store and (sb.scope != "global" or db.scope != "shared"):
        raise TileLangTypeError(
            f"{what} loads a global tensor into a shared tile{' (or stores one)' if what == 'T.tma_copy' else ''}, "
            f"but `{sb.name}` is {sb.scope} and `{db.name}` is {db.scope}", loc=loc,
            hint="T.copy moves tiles between other scopes")
    if sb.dtype != db.dtype:
        raise TileLangTypeError(
            f"{what} cannot convert: `{sb.name}` is {sb.dtype.name} but `{db.name}` is {db.dtype.name}",
            loc=loc, hint=f"allocate `{db.name}` as {sb.dtype.name}, or T.copy (which converts)")


def _arrive_annotation(annotations: dict[str, Any], loc: SourceLoc | None) -> bool:
    unknown = sorted(k for k in annotations if k not in _ANNOTATIONS)
    if unknown:
        raise NotSupportedError(f"T.tma_copy annotation {unknown[0]!r} is not supported", loc=loc,
                                hint=f"the annotations tilelang-x reads are {', '.join(_ANNOTATIONS)}")
    return bool(annotations.get("emit_arrive", False))


def _cluster_mask(b: Any, mask: Any, store: bool, loc: SourceLoc | None) -> int:
    """``cluster_mask=`` of a load: a positive Python int whose bits name ranks of the kernel's
    cluster."""
    what = f"T.tma_copy(cluster_mask={mask!r})"
    if store:
        raise TileLangSyntaxError(f"{what}: a TMA store is not multicast", loc=loc,
                                  hint="cluster_mask= names the blocks a load of a global tile lands in")
    if isinstance(mask, bool) or not isinstance(mask, int) or mask <= 0:
        raise TileLangSyntaxError(f"{what}: the mask must be a positive Python int, bit r for the block of rank r "
                                  "in the cluster", loc=loc,
                                  hint="e.g. cluster_mask=0b11 for ranks 0 and 1 (known when the kernel is built)")
    dims = kernel_cluster_dims(b.kernel_frame)
    if "cluster_dims" not in dict(b.kernel_frame.annotations):
        raise TileLangSyntaxError(f"{what} in a kernel launched without clusters", loc=loc,
                                  hint="launch it in clusters, e.g. T.Kernel(..., cluster_dims=(2, 1, 1)), or drop "
                                  "cluster_mask= (each block loads its own tile)")
    size = math.prod(dims)
    if mask >> size:
        outside = [r for r in range(size, mask.bit_length()) if mask >> r & 1]
        raise TileLangSyntaxError(
            f"{what} names rank{'s' if len(outside) > 1 else ''} {', '.join(map(str, outside))}, outside the "
            f"cluster of {size} block{'s' if size > 1 else ''} (cluster_dims={dims})", loc=loc,
            hint=f"use bits 0..{size - 1} (mask < {1 << size:#b}), or a larger cluster_dims")
    return mask


def tma_copy(src: Any, dst: Any, *, barrier: Any = None, cluster_mask: Any = None,
             leader_scope_threads: Any = None, eviction_policy: str | None = None,
             annotations: dict[str, Any] | None = None) -> None:
    """``T.tma_copy(A[by * bm, k * bk], A_s, barrier=full[s])``: load a global tile into a shared
    tile, completing on ``barrier``'s transaction count (see the module docstring);
    ``cluster_mask=m``: the blocks of ranks ``m`` in the cluster share the tile, which the lowest
    of them loads into all (``core_ir.tileops.TmaCopy``)."""
    loc = caller_loc()
    b = bld.require_kernel("T.tma_copy")
    s, d = _regions(src, dst, "T.tma_copy", loc)
    _check_scopes(s, d, "T.tma_copy", loc)
    store = s.buffer.scope == "shared"
    if barrier is None and not store:
        raise TileLangSyntaxError("T.tma_copy of a global tile into shared memory needs barrier=", loc=loc,
                                  hint="pass the mbarrier its bytes complete: T.tma_copy(A[...], A_s, barrier=bar)")
    if barrier is not None and store:
        raise TileLangSyntaxError("a T.tma_copy into global memory (a TMA store) takes no barrier=", loc=loc,
                                  hint="it completes on bulk groups: T.tma_store_wait() before the tile is "
                                  "written again")
    mask = 0 if cluster_mask is None else _cluster_mask(b, cluster_mask, store, loc)
    if leader_scope_threads is not None:
        raise NotSupportedError("T.tma_copy(leader_scope_threads=...) is not supported: the threads running a "
                                "T.tma_copy issue it once", loc=loc, hint="drop leader_scope_threads")
    ann = dict(annotations or {})
    if eviction_policy is not None:
        ann.setdefault("eviction_policy", eviction_policy)
    if ann.get("eviction_policy", "evict_normal") not in (*_EVICTION, 0, 1, 2):
        raise TileLangSyntaxError(f"T.tma_copy: eviction_policy={ann['eviction_policy']!r}", loc=loc,
                                  hint=f"use one of {', '.join(_EVICTION)}")
    arrive = _arrive_annotation(ann, loc)
    if store:
        if arrive:
            raise TileLangSyntaxError("a TMA store arrives at no barrier: emit_arrive is for loads", loc=loc)
        outside_parallel(b, "T.tma_copy", loc)
        op = TmaCopy(s, d, freeze_annotations(ann), loc)
    else:
        buf, index = barrier_operand(barrier, "T.tma_copy", loc)
        op = TmaCopy(s, d, freeze_annotations(ann), loc, buf, index, arrive, mask)
    op.check()
    b.emit(op)


def tma_store_arrive() -> None:
    """``T.tma_store_arrive()``: the TMA stores not yet committed form a bulk group (each
    ``T.tma_copy`` store commits its own)."""
    loc = caller_loc()
    b = bld.require_kernel("T.tma_store_arrive")
    outside_parallel(b, "T.tma_store_arrive", loc)
    b.emit(BulkGroup("commit", loc=loc))


def tma_store_wait(count: Any = 0, read: bool = True) -> None:
    """``T.tma_store_wait(n)``: wait until at most the ``n`` newest TMA store groups are pending
    (have not read their shared tiles; ``read=False``: not written the tensor)."""
    loc = caller_loc()
    b = bld.require_kernel("T.tma_store_wait")
    k = _pending(b, "T.tma_store_wait", count, "cp.async.bulk.wait_group", loc)
    b.emit(BulkGroup("wait", k, bool(read), loc=loc))


def _expect(barrier: Any, tx: Any, arrive: bool, what: str) -> None:
    loc = caller_loc()
    b = bld.require_kernel(what)
    buf, index = barrier_operand(barrier, what, loc)
    nbytes = int_operand(tx, f"{what}: the byte count", loc)
    n = E.as_int(nbytes)
    if n is not None and n < 0:
        raise TileLangSyntaxError(f"{what}: the byte count {n} is negative", loc=loc,
                                  hint="give the bytes the barrier's copies deliver in this phase")
    b.emit(BarrierExpectTx(buf, index, nbytes, arrive, loc=loc))


def mbarrier_expect_tx(mbarrier: Any, tx: Any) -> None:
    """``T.mbarrier_expect_tx(bar, nbytes)``: the threads running it expect ``nbytes`` more
    transaction bytes on ``bar`` (issued once)."""
    _expect(mbarrier, tx, False, "T.mbarrier_expect_tx")


def mbarrier_arrive_expect_tx(mbarrier: Any, tx: Any) -> None:
    """``T.mbarrier_arrive_expect_tx(bar, nbytes)``: as ``T.mbarrier_expect_tx``, and one arrival."""
    _expect(mbarrier, tx, True, "T.mbarrier_arrive_expect_tx")


def fence_proxy_async() -> None:
    """``T.fence_proxy_async()``: the calling threads' shared-memory writes before it are visible
    to the TMA copies and wgmma reads after it."""
    loc = caller_loc()
    b = bld.require_kernel("T.fence_proxy_async")
    outside_parallel(b, "T.fence_proxy_async", loc)
    b.emit(FenceProxyAsync(loc=loc))


def async_copy(src: Any, dst: Any, *, coalesced_width: int | None = None, annotations: dict[str, Any] | None = None,
               loop_layout: Any = None) -> None:
    """``T.async_copy(A[by * bm, k * bk], A_s)``: a cp.async copy of a global tile into a shared
    tile, committed as a group of its own; wait for it with ``T.ptx_wait_group`` before reading."""
    loc = caller_loc()
    b = bld.require_kernel("T.async_copy")
    outside_parallel(b, "T.async_copy", loc)
    s, d = _regions(src, dst, "T.async_copy", loc)
    _check_scopes(s, d, "T.async_copy", loc)
    ann = dict(annotations or {})
    if coalesced_width is not None:
        ann["coalesced_width"] = coalesced_width
    if loop_layout is not None:
        ann["loop_layout"] = loop_layout
    op = AsyncCopy(s, d, freeze_annotations(ann), loc)
    op.check()
    b.emit(op)


def ptx_commit_group() -> None:
    """``T.ptx_commit_group()``: the calling threads' uncommitted cp.async copies form a group."""
    loc = caller_loc()
    b = bld.require_kernel("T.ptx_commit_group")
    outside_parallel(b, "T.ptx_commit_group", loc)
    b.emit(CpAsyncGroup("commit", loc=loc))


def ptx_wait_group(n: Any = 0) -> None:
    """``T.ptx_wait_group(n)``: wait until at most the ``n`` newest cp.async groups are pending;
    the threads running it then see one another's landed copies."""
    loc = caller_loc()
    b = bld.require_kernel("T.ptx_wait_group")
    b.emit(CpAsyncGroup("wait", _pending(b, "T.ptx_wait_group", n, "cp.async.wait_group", loc), loc=loc))


def _pending(b: Any, name: str, count: Any, instr: str, loc: Any) -> int:
    """The count of groups a wait leaves pending: a non-negative Python int (outside T.Parallel)."""
    outside_parallel(b, name, loc)
    k = None if isinstance(count, bool) else E.as_int(count)
    if k is None or k < 0:
        raise TileLangSyntaxError(f"{name}({count!r}): the count of groups left pending must be a non-negative "
                                  "Python int", loc=loc, hint=f"{instr} takes a constant: {name}(0) waits for all")
    return int(k)
