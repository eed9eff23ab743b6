"""The panel order of a 2-D grid of tiles, as IR: the block remap of ``T.use_swizzle`` and the
CUDA backend's rasterisation (plugins/cuda/rasterize.py), and the walk of ``T.Persistent``."""

from __future__ import annotations

from collections.abc import Callable

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
