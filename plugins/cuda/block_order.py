"""Heaviest blocks first (``pass_configs={"tlx.heavy_first": ...}``, on by default).

A causal attention kernel's loop runs ``min(n, (bx + 1) * BM / BN)`` times: block ``bx`` of each
row does ``bx + 1`` units of work, and the hardware starts blocks in ``blockIdx.x`` order, so the
last blocks to start are the heaviest and the grid ends on a tail where a few SMs finish long
blocks while the others idle. Reversing that block index (``bx -> gx - 1 - bx``, a bijection of
the grid: which block computes which tile changes, not what is computed) starts the heavy blocks
first and ends on the light ones.

Taken when the grid is static, no block remap is asked for (``T.use_swizzle``, rasterize.py) and
no cluster is given, and a loop's trip count depends on exactly one block index, through nothing
else, and is larger for the last block than for the first."""

from __future__ import annotations

import dataclasses
from typing import Any

from ...core_ir import expr as E
from ...core_ir.evaluate import evaluate
from ...core_ir.stmt import Annotate, For, Kernel, PrimFunc
from ...core_ir.visit import rewrite, substitute, walk


def _growing_axis(kernel: Kernel) -> int | None:
    """The block axis whose index alone sets a loop's trip count, growing with it, or ``None``."""
    grid = [E.as_int(g) for g in kernel.grid]
    for loop in (n for n in walk(kernel.body) if isinstance(n, For)):
        free = E.free_vars(loop.extent)
        axes = [i for i, v in enumerate(kernel.block_vars) if v in free]
        if len(axes) != 1 or len(free) != 1:
            continue
        axis = axes[0]
        last = grid[axis]
        if last is None or last < 2:
            continue
        var = kernel.block_vars[axis]
        try:
            first_trips, last_trips = (evaluate(loop.extent, {var: b}) for b in (0, last - 1))
        except (ArithmeticError, TypeError, ValueError):
            continue
        if last_trips > first_trips:
            return axis
    return None


def _reversed(kernel: Kernel) -> Kernel | None:
    if kernel.ann().get("cluster_dims") or any(isinstance(n, Annotate) and n.kind == "swizzle"
                                               for n in walk(kernel.body)):
        return None
    axis = _growing_axis(kernel)
    if axis is None:
        return None
    var, size = kernel.block_vars[axis], E.as_int(kernel.grid[axis])
    assert size is not None
    return dataclasses.replace(kernel, body=substitute(kernel.body, {var: E.const(size - 1) - var}))


def heavy_first_stage(func: PrimFunc, ctx: Any) -> PrimFunc:
    options = getattr(ctx, "options", None) or {}
    configs = options.get("pass_configs") or {} if isinstance(options, dict) else {}
    if not bool(configs.get("tlx.heavy_first", True)) or ctx.data.get("cuda.raster_panel"):
        return func

    def fn(n: Any) -> Any:
        return _reversed(n) if isinstance(n, Kernel) else None

    return dataclasses.replace(func, body=rewrite(func.body, fn))
