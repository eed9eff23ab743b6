"""The barrier of a thread-block cluster, a block's rank in it and the launch's cluster shape
(TileLang's ``tilelang.language.cluster`` and the cluster queries of ``tilelang.language.kernel``),
for kernels launched with ``T.Kernel(..., cluster_dims=...)`` (or ``T.ClusterKernel``).

Each barrier call is a ``Sync`` statement of one of the ``CLUSTER_SCOPES``; the rank is a
``ClusterRank`` expression. Without ``cluster_dims`` a block is a cluster of its own: the barrier
is a barrier of the block and the rank is 0.

The queries are arithmetic on the launch, as in TileLang: a cluster is a ``cluster_dims``-shaped
tile of the grid, so the cluster index along a dim is the block index divided by the cluster's
extent there (on sm_90a ``%clusterid``, the grid being a multiple of the cluster shape) and the
count of clusters the grid's extent divided by it, rounded up (``%nclusterid``). They need nothing
of a backend and agree between all of them.
"""

from __future__ import annotations

import math
from typing import Any

from ..core_ir import expr as E
from ..core_ir.errors import TileLangSyntaxError
from ..core_ir.source import caller_loc
from ..core_ir.stmt import Sync
from . import builder as bld

__all__ = ["block_rank_in_cluster", "cluster_arrive", "cluster_arrive_relaxed", "cluster_sync", "cluster_wait",
           "get_cluster_dims", "get_cluster_extent", "get_cluster_extents", "get_cluster_id", "get_cluster_ids",
           "get_cluster_size", "kernel_cluster_dims"]


def _emit(scope: str) -> None:
    b = bld.require_kernel(f"T.{scope}")
    b.emit(Sync(scope, loc=caller_loc()))


def cluster_arrive() -> None:
    """``T.cluster_arrive()``: every thread of the block arrives at the cluster barrier (PTX
    ``barrier.cluster.arrive.aligned``); what it wrote before is visible to the cluster's threads
    after their matching ``T.cluster_wait()``."""
    _emit("cluster_arrive")


def cluster_arrive_relaxed() -> None:
    """``T.cluster_arrive_relaxed()``: as ``T.cluster_arrive()``, without ordering memory
    (``barrier.cluster.arrive.relaxed.aligned``)."""
    _emit("cluster_arrive_relaxed")


def cluster_wait() -> None:
    """``T.cluster_wait()``: waits until every block of the cluster has arrived at the barrier
    since the caller's last wait (``barrier.cluster.wait.aligned``); each wait follows an arrive."""
    _emit("cluster_wait")


def cluster_sync() -> None:
    """``T.cluster_sync()``: ``T.cluster_arrive()`` then ``T.cluster_wait()``: every block of the
    cluster meets here."""
    _emit("cluster_sync")


def block_rank_in_cluster() -> E.Expr:
    """The block's rank in its cluster (``%cluster_ctarank``, a uint32): its grid index modulo the
    cluster shape, linearised x fastest; 0 without ``cluster_dims``."""
    bld.require_kernel("T.block_rank_in_cluster")
    return E.ClusterRank(loc=caller_loc())


def kernel_cluster_dims(frame: Any) -> tuple[int, int, int]:
    """The cluster shape of the open ``T.Kernel`` frame, three ints (``(1, 1, 1)`` without
    ``cluster_dims``)."""
    dims = list(dict(frame.annotations).get("cluster_dims") or ()) + [1, 1, 1]
    return dims[0], dims[1], dims[2]


def _frame(what: str) -> Any:
    return bld.require_kernel(what).kernel_frame


def _dim(dim: Any, what: str) -> int:
    d = E.as_int(dim)
    if isinstance(dim, bool) or d is None or not 0 <= d <= 2:
        raise TileLangSyntaxError(f"{what}(dim={dim!r}): dim must be 0, 1 or 2 (x, y, z)", loc=caller_loc(),
                                  hint="the cluster shape has three dims, x first")
    return d


def get_cluster_dims() -> list[int]:
    """``T.get_cluster_dims()``: the launch's ``cluster_dims`` as ``[x, y, z]`` (``[1, 1, 1]``
    without clusters)."""
    return list(kernel_cluster_dims(_frame("T.get_cluster_dims")))


def get_cluster_size() -> int:
    """``T.get_cluster_size()``: how many blocks a cluster holds."""
    return math.prod(kernel_cluster_dims(_frame("T.get_cluster_size")))


def _cluster_id(frame: Any, d: int) -> E.Expr:
    if d >= len(frame.vars):
        return E.const(0)
    c = kernel_cluster_dims(frame)[d]
    return frame.vars[d] if c == 1 else frame.vars[d] // c


def get_cluster_id(dim: int = 0) -> E.Expr:
    """``T.get_cluster_id(dim)``: the index of the calling block's cluster along ``dim``, its block
    index divided by the cluster's extent there (0 past the grid's dims)."""
    what = "T.get_cluster_id"
    frame = _frame(what)
    return _cluster_id(frame, _dim(dim, what))


def get_cluster_ids() -> list[E.Expr]:
    """``T.get_cluster_ids()``: the cluster index along every dim of the grid."""
    frame = _frame("T.get_cluster_ids")
    return [_cluster_id(frame, d) for d in range(len(frame.vars))]


def _cluster_extent(frame: Any, d: int) -> Any:
    if d >= len(frame.grid):
        return 1
    c = kernel_cluster_dims(frame)[d]
    g = frame.grid[d]
    n = E.as_int(g)
    if n is not None:
        return -(-n // c)
    return g if c == 1 else (g + (c - 1)) // c


def get_cluster_extent(dim: int = 0) -> Any:
    """``T.get_cluster_extent(dim)``: how many clusters the grid holds along ``dim`` (its extent
    divided by the cluster's, rounded up): an int for a static grid, else an expression."""
    what = "T.get_cluster_extent"
    frame = _frame(what)
    return _cluster_extent(frame, _dim(dim, what))


def get_cluster_extents() -> list[Any]:
    """``T.get_cluster_extents()``: the count of clusters along x, y and z."""
    frame = _frame("T.get_cluster_extents")
    return [_cluster_extent(frame, d) for d in range(3)]
