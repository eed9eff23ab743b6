"""The launch of a kernel with cluster barriers (``T.Kernel(..., cluster_dims=...)`` of more than one
block) and its barrier statements: the clusters in grid order, the blocks of each side by side
(``cluster_sync``)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tilelang_x.core_ir.errors import TileLangError
from tilelang_x.core_ir.source import SourceLoc
from tilelang_x.core_ir.stmt import Sync

from .cluster_sync import ClusterTurns, run_cluster
from .compile_expr import Fn
from .runtime import FRAME

if TYPE_CHECKING:
    from .warp_regions import Regions

__all__ = ["cluster_barrier", "cluster_kernel"]


def _grid_order(dims: Sequence[int]) -> list[tuple[int, ...]]:
    """The indices of a grid of ``dims``, x fastest."""
    return [rev[::-1] for rev in itertools.product(*[range(n) for n in reversed(dims)])]


def cluster_barrier(s: Sync) -> Fn:
    """The closure of a cluster barrier statement, run once per block (by the whole block)."""
    call, loc = s.call, s.loc
    arrive = s.scope in ("cluster_arrive", "cluster_arrive_relaxed", "cluster_sync")
    wait = s.scope in ("cluster_wait", "cluster_sync")

    def barrier(env: list) -> None:
        frame = env[FRAME]
        turns: ClusterTurns = frame.cluster
        if arrive:
            turns.arrive(frame.rank, call, loc)
        if wait:
            turns.wait(frame.rank, call, loc)

    return barrier


def cluster_kernel(fgrid: list[Fn], slots: list[int], types: list[Any], bind_threads: Fn | None, body: Fn,
                   regions: Regions | None, shape: tuple[int, int, int], loc: SourceLoc | None) -> Fn:
    """The launch: ``fgrid`` computes the grid, ``slots`` / ``types`` are the block variables',
    ``regions`` runs a block as a team (``warp_regions``), ``shape`` is the cluster's."""
    ndim = len(fgrid)
    cshape = shape[:ndim]

    def kernel(env: list) -> None:
        dims = [int(f(env)) for f in fgrid]
        if any(d % c for d, c in zip(dims, cshape)) or any(c > 1 for c in shape[ndim:]):
            raise TileLangError(f"T.Kernel grid {tuple(dims)} cannot be launched in clusters of {shape} blocks: it is "
                                "not a multiple of the cluster shape in every dimension", loc=loc,
                                hint="choose cluster_dims that divide the grid in every dimension")
        if bind_threads is not None:
            bind_threads(env)
        launch = env[FRAME]
        clusters = [d // c for d, c in zip(dims, cshape)]
        if launch.races is not None:
            launch.races.launch(clusters, unit="cluster")
        members = _grid_order(cshape)
        for cid, cluster in enumerate(_grid_order(clusters)):
            blocks = [tuple(c * n + m for c, n, m in zip(cluster, cshape, member)) for member in members]

            def start(block: tuple[int, ...], turns: ClusterTurns, rank: int, cid: int = cid) -> Callable[[], None]:
                frame = launch.fork(block, None, 0, block_id=cid)
                frame.cluster, frame.rank = turns, rank
                benv = frame.env
                for k, t, b in zip(slots, types, block):
                    benv[k] = t(b)
                if regions is not None:
                    return lambda: regions.run_block(benv, block, body)
                return lambda: body(benv)

            run_cluster(blocks, start)

    return kernel
