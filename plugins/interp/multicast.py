"""The interpreter's multicast TMA loads: ``T.tma_copy(src, dst, barrier=bar, cluster_mask=m)``,
as on a GPU (TileLang's semantics).

Every block of the cluster runs the copy and expects the tile's bytes on its own barrier. The lowest
rank of the mask loads the tile it names into its own shared tile and into the same region of the
same shared tile of every other block of the mask, completing the bytes on each one's barrier at
the same index; the mask's other blocks issue nothing (the tile they name is not read); a block
outside the mask loads its own tile. A kernel with multicast copies runs the blocks of each cluster
side by side (``cluster_sync``), each block registering its slots there when it initializes its
barriers (``ClusterTurns.envs``), so the leader finds its peers' tiles and barriers; a peer that
has not initialized its barriers yet is a ``TileLangError`` at the copy (on a GPU the bytes would
complete a barrier before its init: a ``T.cluster_sync()`` after the allocation orders them).

What the interpreter does not flag: the leader's load landing in a peer's shared tile while that
peer still reads the tile's previous contents; the kernel orders that with ``T.cluster_sync()`` or
with barriers its peers arrive on (``T.barrier_arrive(bar, cta_id)``) before the next load.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tilelang_x.core_ir.errors import TileLangError
from tilelang_x.core_ir.tileops import TmaCopy

from .compile_expr import Fn
from .runtime import FRAME
from .team import MBarriers

__all__ = ["Deliver", "multicast_copy", "peer_barriers"]


#: ``deliver(env, bars, k, nbytes)``: see ``multicast_copy``
Deliver = Callable[[list, MBarriers, int, int], bool]


def multicast_copy(s: TmaCopy, own: Fn, slot: int) -> Deliver:
    """``deliver(env, bars, k, nbytes)`` for the copy ``s`` of a block whose barrier ``bars[k]``
    already expects ``nbytes``: what the block's rank does (see the module docstring); ``False``
    for a block outside the mask, which then loads its own tile. ``own`` copies the block's tile,
    ``slot`` holds the barrier buffer."""
    assert s.barrier is not None
    mask, loc, dst, bar = s.mask, s.loc, s.dst, s.barrier.name
    leader = (mask & -mask).bit_length() - 1

    def deliver(env: list, bars: MBarriers, k: int, nbytes: int) -> bool:
        frame = env[FRAME]
        rank = frame.rank
        if not mask >> rank & 1:
            return False
        if rank != leader:
            return True  # its tile and bytes come from the leader
        own(env)
        cluster = frame.cluster
        if cluster is not None:
            starts, extents = frame.bounds(dst)
            at = tuple(slice(a, a + n) for a, n in zip(starts, extents))
            tile = np.array(frame.array(dst.buffer)[at])
            for r in range(rank + 1, mask.bit_length()):
                if mask >> r & 1:
                    peer = peer_barriers(cluster, r, slot, f"T.tma_copy(cluster_mask={mask:#b})", bar, "bytes",
                                         loc)
                    penv = cluster.envs[r]
                    penv[FRAME].array(dst.buffer)[at] = tile
                    peer.complete(k, nbytes)
        bars.complete(k, nbytes)
        return True

    return deliver


def peer_barriers(cluster: Any, rank: int, slot: int, what: str, bar: str, event: str, loc: Any) -> MBarriers:
    """The barriers in ``slot`` of the block of ``rank`` in ``cluster``, which ``event`` reaches
    (``TileLangError`` when that block has not initialized them)."""
    env = cluster.envs.get(rank)
    bars = None if env is None else env[slot]
    if not isinstance(bars, MBarriers):
        raise TileLangError(f"{what}: block {cluster.blocks[rank]} (rank {rank}) has not initialized `{bar}` yet "
                            f"(on a GPU its barrier would receive the {event} before its init)", loc=loc,
                            hint="call T.cluster_sync() after allocating the barriers, before a block loads into or "
                            "arrives at a peer's")
    return bars
