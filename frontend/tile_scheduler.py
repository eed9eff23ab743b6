"""``T.BaseTileScheduler`` and ``T.PersistentTileScheduler``: TileLang's tile schedulers, trace-time
helper objects (``T.meta_class``) that walk a persistent block over the output tiles of a 2-D grid.

State lives in four ``T.alloc_var`` int32 variables made by the constructor (``stateful``):
``m_idx`` / ``n_idx`` (the current tile), ``linear_idx`` (the block's cursor in the flattened tile
order) and ``current_iter`` (how many tiles the block has moved past: a clock for double-buffer
parities). ``init`` / ``next_tile`` store to them and are inlined where they are called; ``valid``
and ``coord`` only build expressions, so they work in ``while`` conditions and, for ``coord``, on a
scheduler made with ``stateful=False`` (a pure tile decoder for ``for w in range(waves)`` loops).

The flattened order (``PersistentTileScheduler.coord``): clustering first reshapes the grid to
``ceildiv(num_m_tiles, cluster_size)`` cluster rows by ``num_n_tiles`` columns; then one axis is
swept fastest (M with ``column_major``, else N) while the other advances in panels of
``swizzle_size`` tiles (the last panel narrower when it does not divide), for L2 reuse.
"""

from __future__ import annotations

from typing import Any

from ..core_ir import dtypes
from ..core_ir.errors import ArgumentError, TileLangError
from ..core_ir.source import caller_loc
from .meta import meta_class
from .surface import alloc_var, ceildiv, max_, min_


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArgumentError(f"T.PersistentTileScheduler: {name}={value!r} is not a positive Python int",
                            loc=caller_loc(), hint=f"{name} is a compile-time tile count, e.g. {name}=8")
    return value


@meta_class
class BaseTileScheduler:
    """A block's walk over a tile grid; subclasses decode ``linear_idx`` in ``update_current_idx``
    and set ``_total_tiles``."""

    def __init__(self, prefix: str, stateful: bool = True) -> None:
        self._stateful = stateful
        if stateful:
            self.m_idx = alloc_var(dtypes.int32)
            self.n_idx = alloc_var(dtypes.int32)
            self.linear_idx = alloc_var(dtypes.int32)
            self.current_iter = alloc_var(dtypes.int32)
        self._total_tiles: Any = 0

    def _require_state(self, method: str) -> None:
        if not self._stateful:
            raise TileLangError(f"{type(self).__name__}.{method}() needs the scheduler's state, and it was made "
                                "with stateful=False", loc=caller_loc(),
                                hint="drop stateful=False, or decode tiles with coord(tile_id) in a for loop")

    def update_current_idx(self, linear_idx: Any) -> None:
        """Set ``m_idx`` / ``n_idx`` from ``linear_idx`` (a subclass's job)."""
        raise TileLangError(f"{type(self).__name__} does not decode tiles: BaseTileScheduler is a base class",
                            loc=caller_loc(),
                            hint="subclass it with an update_current_idx that stores self.m_idx[0] and "
                                 "self.n_idx[0], or use T.PersistentTileScheduler")

    def init(self, linear_init: Any) -> None:
        self._require_state("init")
        self.current_iter[0] = 0
        self.linear_idx[0] = linear_init
        self.update_current_idx(self.linear_idx[0])

    def next_tile(self, step: Any) -> None:
        self._require_state("next_tile")
        self.current_iter[0] = self.current_iter[0] + 1
        self.linear_idx[0] = self.linear_idx[0] + step
        self.update_current_idx(self.linear_idx[0])

    def valid(self) -> Any:
        """Whether the cursor is still on a tile (a ``while`` condition)."""
        self._require_state("valid")
        return self.linear_idx[0] < self._total_tiles


@meta_class
class PersistentTileScheduler(BaseTileScheduler):
    """Grid-strided persistent walk: worker ``w`` takes tiles ``w, w + num_workers, ...`` of the
    flattened order (module docstring), with an L2 swizzle and clusters along M."""

    def __init__(self, prefix: str, num_m_tiles: Any, num_n_tiles: Any, num_workers: Any = None,
                 swizzle_size: int = 1, column_major: bool = True, cluster_size: int = 1,
                 stateful: bool = True) -> None:
        super().__init__(prefix, stateful=stateful)
        self.swizzle_size = _positive_int("swizzle_size", swizzle_size)
        self.cluster_size = _positive_int("cluster_size", cluster_size)
        if num_workers is None:  # one block per SM, in clusters
            from ..carver.arch.driver import get_num_sms

            num_workers = get_num_sms() // cluster_size
        self.num_workers = num_workers
        self._column_major = bool(column_major)
        rows = ceildiv(num_m_tiles, cluster_size)
        self._total_tiles = rows * num_n_tiles
        # the fast axis is swept whole inside a panel; the slow one is cut into panels
        self._fast, self._slow = (rows, num_n_tiles) if column_major else (num_n_tiles, rows)

    def coord(self, tile_id: Any) -> tuple[Any, Any]:
        """``(m, n)`` of the tile at ``tile_id`` in the flattened order (``m`` is the cluster row when
        ``cluster_size > 1``: add the block's rank in its cluster)."""
        per_panel = self._fast * self.swizzle_size
        panel = tile_id // per_panel
        first = panel * self.swizzle_size
        width = max_(1, min_(self.swizzle_size, self._slow - first))  # >= 1: no division by 0 past the end
        offset = tile_id - panel * per_panel
        fast, slow = offset // width, first + offset % width
        return (fast, slow) if self._column_major else (slow, fast)

    def update_current_idx(self, linear_idx: Any) -> None:
        m, n = self.coord(linear_idx)
        self.m_idx[0] = m
        self.n_idx[0] = n

    def next_tile(self) -> None:
        self._require_state("next_tile")
        self.current_iter[0] = self.current_iter[0] + 1
        self.linear_idx[0] = self.linear_idx[0] + self.num_workers
        self.update_current_idx(self.linear_idx[0])
