"""What a kernel asks of its thread-block cluster: the shape (``T.Kernel(..., cluster_dims=...)``)
and the cluster operations it calls (``T.cluster_arrive`` / ``_relaxed``, ``T.cluster_wait``,
``T.cluster_sync``, ``T.block_rank_in_cluster``, ``T.tma_copy(..., cluster_mask=...)``,
``T.barrier_arrive(..., cta_id=...)``).

A block's rank in its cluster is linear, x fastest: ``(bx % cx) + cx * ((by % cy) + cy * (bz % cz))``
(PTX ``%cluster_ctarank`` for a grid launched in clusters of ``(cx, cy, cz)`` blocks in
``blockIdx`` order). Without ``cluster_dims`` every block is a cluster of its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .expr import ClusterRank
from .source import SourceLoc
from .stmt import CLUSTER_SCOPES, BarrierArrive, Kernel, Stmt, Sync
from .tileops import TmaCopy
from .visit import walk

__all__ = ["cluster_ops", "cluster_shape", "cluster_size", "couples_blocks", "rank_in_cluster"]


def cluster_shape(kernel: Kernel) -> tuple[int, int, int]:
    """The kernel's cluster shape as three ints (``(1, 1, 1)`` without ``cluster_dims``)."""
    dims = [int(d) for d in kernel.ann().get("cluster_dims") or ()]
    dims += [1] * (3 - len(dims))
    return dims[0], dims[1], dims[2]


def cluster_size(kernel: Kernel) -> int:
    """How many blocks a cluster of ``kernel`` holds."""
    return math.prod(cluster_shape(kernel))


def cluster_ops(body: Stmt) -> list[tuple[str, SourceLoc | None]]:
    """The cluster operations in ``body``, as (how the kernel spells it, where), in program order."""
    out: list[tuple[str, SourceLoc | None]] = []
    for n in walk(body):
        if isinstance(n, Sync) and n.scope in CLUSTER_SCOPES:
            out.append((n.call, n.loc))
        elif isinstance(n, ClusterRank):
            out.append(("T.block_rank_in_cluster()", n.loc))
        elif isinstance(n, TmaCopy) and n.mask:
            out.append((f"T.tma_copy(..., cluster_mask={n.mask:#b})", n.loc))
        elif isinstance(n, BarrierArrive) and n.cta is not None:
            out.append(("T.barrier_arrive(..., cta_id=...)", n.loc))
    return out


def couples_blocks(body: Stmt) -> bool:
    """Whether the blocks of a cluster running ``body`` act on each other: it arrives at or waits
    on the cluster barrier, arrives at mbarriers of other blocks or loads tiles into them (multicast)."""
    return any(isinstance(n, Sync) and n.scope in CLUSTER_SCOPES or isinstance(n, BarrierArrive) and n.cta is not None
               or isinstance(n, TmaCopy) and n.mask for n in walk(body))


def rank_in_cluster(block: Sequence[int], shape: Sequence[int]) -> int:
    """The rank of the block at grid index ``block`` in its cluster of ``shape``."""
    rank = 0
    for b, c in zip(reversed(tuple(block) + (0,) * (3 - len(block))), reversed(tuple(shape))):
        rank = rank * c + b % c
    return rank
