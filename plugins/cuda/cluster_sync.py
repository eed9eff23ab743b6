"""CUDA code of the cluster barrier and rank (``T.cluster_arrive`` / ``_relaxed``,
``T.cluster_wait``, ``T.cluster_sync``, ``T.block_rank_in_cluster``) and of arrivals at a peer's
mbarrier (``T.barrier_arrive(bar, cta_id)``; ``include/tlx_cluster.h``); where a multicast
``T.tma_copy`` may be (its code: lower/tma_copy.py).

Each barrier statement becomes a call of a ``tlx_cluster_*`` helper, the rank ``tlx_cluster_rank()``.
The header defines them as PTX's ``barrier.cluster.*.aligned``, ``%cluster_ctarank`` and ``mapa`` +
``mbarrier.arrive.release.cluster.shared::cluster`` in a kernel launched in clusters (sm_90a,
cluster.py), and otherwise for a cluster of one block: the wait is ``__syncthreads()``, the rank 0
and a peer's barrier the caller's own. A kernel asking for clusters of several blocks on a target
without them (sm_80..sm_90) cannot keep its meaning there: ``BackendNotImplementedError`` at the
first cluster operation.

The kernel's blocks must be where the hardware puts them for its clusters to be the kernel's: a
kernel with cluster operations is neither rasterized (rasterize.py) nor warp-specialized (so neither
persistent nor multicast, whose own cluster barriers stay apart from the kernel's).
"""

from __future__ import annotations

import os

from ...core_ir import expr as E
from ...core_ir.cluster import cluster_ops
from ...core_ir.errors import BackendNotImplementedError
from ...core_ir.source import SourceLoc
from ...core_ir.stmt import Kernel, Stmt, Sync
from ...core_ir.tileops import TmaCopy
from ...core_ir.visit import walk
from .cluster import launch_dims, requested
from .lir import Evaluate, Intrin

__all__ = ["REMOTE_ARRIVE", "check", "check_multicast", "cluster_header", "has_cluster_ops", "lower_cluster_sync",
           "uses_cluster_header"]

_CALLS = {"cluster_arrive": "tlx_cluster_arrive", "cluster_arrive_relaxed": "tlx_cluster_arrive_relaxed",
          "cluster_wait": "tlx_cluster_wait", "cluster_sync": "tlx_cluster_barrier"}
#: ``T.barrier_arrive(bar, cta_id)``: every thread arrives at ``bar`` of the block of rank ``cta_id``
REMOTE_ARRIVE = "tlx_cluster_arrive_remote"
_SPELLED = {fn: f"T.{scope}()" for scope, fn in _CALLS.items()} | {REMOTE_ARRIVE: "T.barrier_arrive(..., cta_id=...)"}


def lower_cluster_sync(s: Sync) -> Stmt:
    """The call of a cluster barrier ``Sync``."""
    return Evaluate(Intrin(_CALLS[s.scope], ()), s.loc)


def _ops(body: Stmt) -> list[tuple[str, SourceLoc | None]]:
    """The cluster operations of the lowered ``body``: (how the kernel spells it, where)."""
    out: list[tuple[str, SourceLoc | None]] = []
    for n in walk(body):
        if isinstance(n, Evaluate) and isinstance(n.value, Intrin) and n.value.fn in _SPELLED:
            out.append((_SPELLED[n.value.fn], n.loc))
        elif isinstance(n, E.ClusterRank):
            out.append(("T.block_rank_in_cluster()", n.loc))
    return out


def uses_cluster_header(body: Stmt) -> bool:
    return bool(_ops(body))


def has_cluster_ops(body: Stmt) -> bool:
    """Whether ``body``, lowered or not, uses cluster barriers or ranks."""
    return bool(_ops(body) or cluster_ops(body))


def check(kernel: Kernel, arch: str | None) -> None:
    """Raise where the lowered ``kernel`` uses clusters of several blocks that ``arch`` cannot launch."""
    dims = requested(kernel)
    if dims is None or dims == (1, 1, 1) or launch_dims(kernel, arch) is not None:
        return
    ops = _ops(kernel.body)
    if ops:
        what, loc = ops[0]
        raise BackendNotImplementedError(
            f"{what} in a kernel of T.Kernel(cluster_dims={dims}): {arch} has no thread-block clusters",
            loc=loc or kernel.loc, hint="compile for sm_90a, or drop cluster_dims (each block is then a cluster "
            "of its own: T.cluster_sync() is a barrier of the block and T.block_rank_in_cluster() is 0)")


def check_multicast(kernel: Kernel, arch: str | None) -> None:
    """Raise at the first ``T.tma_copy(..., cluster_mask=...)`` of a kernel asking for clusters of
    several blocks that ``arch`` cannot launch (before lowering, which makes it an ordinary copy
    there)."""
    dims = requested(kernel)
    if dims is None or dims == (1, 1, 1) or launch_dims(kernel, arch) is not None:
        return
    op = next((n for n in walk(kernel.body) if isinstance(n, TmaCopy) and n.mask), None)
    if op is not None:
        raise BackendNotImplementedError(
            f"T.tma_copy(..., cluster_mask={op.mask:#b}) in a kernel of T.Kernel(cluster_dims={dims}): {arch} has no "
            "thread-block clusters", loc=op.loc or kernel.loc,
            hint="compile for sm_90a, or drop cluster_mask= and cluster_dims (each block then loads its own tile)")


def cluster_header(launched: bool) -> str:
    """The helpers' text; ``launched``: the kernel is declared with ``__cluster_dims__``."""
    with open(os.path.join(os.path.dirname(__file__), "include", "tlx_cluster.h")) as fh:
        text = fh.read()
    return ("#define TLX_CLUSTER_LAUNCH\n" if launched else "") + text
