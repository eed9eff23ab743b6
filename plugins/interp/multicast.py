"""The interpreter's multicast TMA loads: ``T.tma_copy(src, dst, barrier=bar, cluster_mask=m)``.

On a GPU the lowest rank of the mask loads its tile once into the shared tile of every block of the
mask, completing each one's barrier; the other blocks of the mask issue nothing, and a block outside
the mask loads its own tile. The interpreter runs each block's copy as that block's own load (each
block expects and receives the bytes on its own barrier, as on the GPU), which gives the GPU's
result whenever the blocks of the mask name the same tile: this module checks that they do. Each
block's ``k``-th run of a multicast copy is compared with the first block of its cluster and mask
to run it ``k`` times; a block that names another tile is a ``TileLangError`` at the copy (on a GPU
it would receive the leader's tile instead of its own).

What the interpreter does not see: the leader's load landing in a peer's shared tile while that
peer still reads the tile's previous contents (each block here writes only its own tile, when it
runs the copy itself). A kernel orders that reuse with ``T.cluster_sync()`` (or barriers its
peers arrive on) between the reads and the next multicast.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tilelang_x.core_ir.errors import TileLangError
from tilelang_x.core_ir.tileops import TmaCopy

from .compile_expr import Fn
from .runtime import FRAME

__all__ = ["multicast_check"]


def multicast_check(s: TmaCopy, starts: Sequence[Fn], shape: tuple[int, int, int]) -> Callable[[list], None]:
    """The check run before each block's copy ``s`` (``starts``: the source tile's corner,
    ``shape``: the kernel's cluster shape)."""
    mask, loc, key = s.mask, s.loc, id(s)
    leader = (mask & -mask).bit_length() - 1
    name = s.src.buffer.name

    def check(env: list) -> None:
        frame = env[FRAME]
        if not mask >> frame.rank & 1:
            return  # outside the mask: the block's own load
        cluster = tuple(b // c for b, c in zip(frame.block, shape))
        log = frame.multicasts
        count = log.get((key, frame.block), 0)
        log[(key, frame.block)] = count + 1
        corner = tuple(int(f(env)) for f in starts)
        first = log.setdefault((key, cluster, count), (frame.block, frame.rank, corner))
        if first[2] != corner:
            raise TileLangError(
                f"T.tma_copy(cluster_mask={mask:#b}): block {frame.block} (rank {frame.rank}) loads `{name}` at "
                f"{_at(corner)}, block {first[0]} (rank {first[1]}) of its cluster at {_at(first[2])}; on a GPU the "
                f"mask's lowest rank ({leader}) loads its tile into every block of the mask", loc=loc,
                hint="give the blocks of the mask the same source tile (from T.get_cluster_id, not the block "
                "index), or load each block's own tile without cluster_mask=")

    return check


def _at(corner: Any) -> str:
    return f"[{', '.join(map(str, corner))}]"
