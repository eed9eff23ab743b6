"""The barrier of a thread-block cluster and a block's rank in it (TileLang's
``tilelang.language.cluster``), for kernels launched with ``T.Kernel(..., cluster_dims=...)``.

Each barrier call is a ``Sync`` statement of one of the ``CLUSTER_SCOPES``; the rank is a
``ClusterRank`` expression. Without ``cluster_dims`` a block is a cluster of its own: the barrier
is a barrier of the block and the rank is 0.
"""

from __future__ import annotations

from ..core_ir import expr as E
from ..core_ir.source import caller_loc
from ..core_ir.stmt import Sync
from . import builder as bld

__all__ = ["block_rank_in_cluster", "cluster_arrive", "cluster_arrive_relaxed", "cluster_sync", "cluster_wait"]


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
