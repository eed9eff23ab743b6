"""Persistent grid for the warp-specialized Hopper kernel (``pass_configs={"tlx.persistent": True}``).

The grid becomes one block per SM (``tlx_pid``); each block walks tiles ``pid, pid + P, ...`` and the
original block indices are recomputed from the tile index. The producer and the consumers count
k-iterations across tiles (``g = j * n + k``), so the stage ring and its barrier phases run on from
one tile to the next and the producer loads the next tile while the consumers run the epilogue.
Needs a static grid and a k-loop whose trip count does not depend on the block indices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.stmt import For, Kernel, Seq, Stmt

#: SMs of the H100 / H200 SXM; a smaller part runs the extra blocks as a second (short) wave.
DEFAULT_SMS = 132


@dataclass(frozen=True)
class Persistent:
    pid: E.Var
    j: E.Var
    tiles_here: E.Expr
    grid: int
    block_of: dict[E.Var, E.Expr]

    def counter(self, n: E.Expr, k: E.Expr) -> E.Expr:
        """The iteration number across this block's tiles."""
        return self.j * n + k

    def wrap(self, stmts: list[Stmt], loc: object = None) -> Stmt:
        return For(self.j, self.tiles_here, "serial", Seq(tuple(stmts)), None, (), loc)  # type: ignore[arg-type]


def plan_persistent(kernel: Kernel, n: E.Expr, start: E.Expr, sms: int = DEFAULT_SMS) -> Persistent | None:
    dims = [E.as_int(g) for g in kernel.grid]
    if not dims or any(d is None or d < 1 for d in dims):
        return None
    block = {id(v) for v in kernel.block_vars}
    if any(id(v) in block for e in (n, start) for v in E.free_vars(e)):
        return None
    total = math.prod(d for d in dims if d is not None)
    grid = min(total, sms)
    if grid == total:  # one tile per block: nothing to gain
        return None
    pid, j = E.Var("tlx_pid", dtypes.int32), E.Var("tlx_tile_j", dtypes.int32)
    tile = pid + j * grid
    block_of: dict[E.Var, E.Expr] = {}
    stride = 1
    for v, d in zip(kernel.block_vars, dims):
        assert d is not None
        idx = tile // stride if stride > 1 else tile
        block_of[v] = idx % d if stride * d < total else idx
        stride *= d
    tiles_here = (E.const(total - 1) - pid) // grid + 1
    return Persistent(pid, j, tiles_here, grid, block_of)
