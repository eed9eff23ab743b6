"""The panel order of a 2-D grid of tiles, as IR: the block remap of ``T.use_swizzle`` and the
CUDA backend's rasterisation (plugins/cuda/rasterize.py), and the walk of ``T.Persistent``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import expr as E


def panel_order(bid: E.Expr, gx: E.Expr, gy: E.Expr, panel: int, column: bool,
                let: Callable[[str, E.Expr], E.Expr] = lambda name, e: e) -> tuple[E.Expr, E.Expr]:
    """(bx, by) of the ``bid``-th block of a ``gx`` × ``gy`` grid walked in panels of ``panel`` block
    rows, ``by`` fastest within a panel (block columns and ``bx`` when ``column``). The last panel
    holds the leftover rows; its height is at least 1 however ``bid`` is bounded, which lets the
    divisions by it compile as unsigned ones. ``let(name, value)`` may bind the intermediate values
    to named variables (codegen declares them)."""
    across, along = (gx, gy) if column else (gy, gx)  # panels cut ``across``; ``along`` is walked inside
    group = let("tlx_grp", along * panel)
    first = let("tlx_first", bid // group * panel)
    height = let("tlx_h", E.binary("max", E.binary("min", across - first, E.const(panel)), E.const(1)))
    local = bid % group
    inner, outer = first + local % height, local // height
    return (inner, outer) if column else (outer, inner)


#: the ``For`` annotation ``T.Persistent`` leaves on its loop (a ``PersistentWalk``)
PERSISTENT_WALK = "persistent_walk"


@dataclass(frozen=True, eq=False)
class PersistentWalk:
    """What a ``T.Persistent`` loop walks: block ``index`` of ``wave_size`` takes tile ``index +
    wave * wave_size`` of ``domain`` in iteration ``wave`` of the loop, whose coordinates the body
    reads as ``coords`` (expressions of that number, one per dimension, named ``names``). A backend
    may turn the walk back into a grid over the tiles (plugins/cuda/hopper/tiles_as_grid.py)."""

    domain: tuple[E.Expr, ...]
    wave_size: E.Expr
    index: E.Expr
    coords: tuple[E.Expr, ...]
    names: tuple[str, ...]

    def __repr__(self) -> str:
        return f"PersistentWalk(domain=({', '.join(map(str, self.domain))}), wave_size={self.wave_size}, " \
               f"index={self.index})"
