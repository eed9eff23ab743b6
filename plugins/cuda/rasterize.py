"""Automatic block rasterisation for GEMM-like kernels (``pass_configs={"tlx.auto_rasterize": ...}``,
on by default).

A 2-D grid ``T.Kernel(ceildiv(N, BN), ceildiv(M, BM))`` runs in hardware order, ``blockIdx.x``
fastest: one wave of ~132 blocks then covers one or two tile rows and ~all tile columns, so every
block of the wave reads a different B panel and a wide B (8192 x 28672) streams from DRAM about
once per tile row. Rasterising in panels of ``G`` tile rows (within a panel ``by`` fastest, then
``bx``) makes a wave a ``G`` x ``wave / G`` rectangle: the ``G`` blocks sharing a B panel run
together and the A panel is reused by the following waves of the same panel.

The remap is the one ``T.use_swizzle(G)`` asks for, defined once (``core_ir.tile_order.panel_order``,
which ``T.Persistent`` walks too): codegen emits
it for ``blockIdx`` and the persistent walk (hopper/persistent.py) for its tile index. It is a
bijection of the grid onto itself for any ``gx``, ``gy``, ``G`` (the last panel
holds the ``gy mod G`` leftover rows), so which block computes which tile changes but not what is
computed. It is applied only when the user did not call ``T.use_swizzle`` (their choice wins,
``enable=False`` included), the kernel has a 2-D static grid and one ``T.gemm`` with static tile
extents, and the heuristic (``choose_panel``) expects a clear gain. A kernel with cluster barriers or
ranks keeps the hardware order, ``T.use_swizzle`` or not: its clusters are the blocks it names.

Heuristic: a wave of ``W`` blocks (the target's SM count) in row-major order reads per k-step
``ceil(W / gx)`` A tiles and ``min(gx, W)`` B tiles; in panels of ``G`` it reads ``G`` A tiles and
``ceil(W / G)`` B tiles. ``G`` minimises the panel cost (ties: the smaller ``G``), within
``2 <= G <= min(gy, 16)`` and such that the A panel (``G * BM * K`` elements) fits in half the L2;
the remap is used when the grid is at least two waves and the panel cost is at most 0.9 of the
row-major cost (4096³ with 128x256 tiles: G = 15, 4224 vs 5248; 8192³: G = 12, 4352 vs 8832;
8192 x 28672 x 4096: G = 15, 4224 vs 28928; all for W = 132, fp16).

The model counts distinct tiles per wave; the L2 also merges requests of blocks that run side by
side, which a panel favours more than the model says. H200 (2026-11-30, persistent 4096³ fp16,
128x256 tiles, Nsight Compute and timed in the same rounds): row-major 43.9 M L2 read sectors,
G = 16 31.1 M, G = 4 27.5 M; G = 16 against row-major 1.004 vs 0.982 of cuBLAS with the bench's L2
flush between calls, 0.988 vs 0.967 back to back (power-limited: 688 W at 1434 MHz vs 691 W at
1385 MHz). So the threshold, once 0.8, now takes 4096³; the G = 15 it picks: 0.992-1.005 flushed
(bench/gemm.py and two A/B runs), 0.983-0.996 back to back.
"""

from __future__ import annotations

import math
from typing import Any

from ...core_ir import expr as E
from ...core_ir.stmt import Annotate, For, Kernel, Stmt
from ...core_ir.tileops import Gemm, GemmSp
from ...core_ir.visit import children, walk
from .cluster_sync import has_cluster_ops
from .perf_options import pass_configs

#: (SMs, L2 bytes) per architecture family; others use the last entry
_MACHINE = {"sm_90": (132, 50 << 20), "sm_80": (108, 40 << 20), "": (128, 32 << 20)}
MAX_PANEL = 16
MIN_GAIN = 0.9


def _machine(arch: str | None) -> tuple[int, int]:
    a = (arch or "").rstrip("a")
    if a.startswith("sm_9"):
        return _MACHINE["sm_90"]
    if a.startswith("sm_8"):
        return _MACHINE["sm_80"]
    return _MACHINE[""]


def choose_panel(gx: int, gy: int, bm: int, bn: int, k: int | None, elem: int, sms: int, l2: int) -> int:
    """The panel height ``G`` in tile rows, or 0 to keep the hardware (row-major) order."""
    total = gx * gy
    if gx < 2 or gy < 2 or total < 2 * sms or total >= 2**31:  # the C remap computes in int
        return 0
    wave = min(sms, total)
    row_major = min(gy, math.ceil(wave / gx)) * bm + min(gx, wave) * bn
    cap = min(gy, MAX_PANEL)
    if k:
        cap = min(cap, (l2 // 2) // max(1, bm * k * elem))
    best, best_cost = 0, 0
    for g in range(2, cap + 1):
        cost = g * bm + min(gx, math.ceil(wave / g)) * bn
        if not best or cost < best_cost:
            best, best_cost = g, cost
    return best if best and best_cost <= MIN_GAIN * row_major else 0


def _use_swizzle(kernel: Kernel) -> Annotate | None:
    """The kernel's ``T.use_swizzle`` (its annotation), if it calls it."""
    return next((n for n in walk(kernel.body) if isinstance(n, Annotate) and n.kind == "swizzle"), None)


def block_remap(kernel: Kernel, ctx: Any) -> tuple[int, bool] | None:
    """(panel, column-wise) of the remap of ``blockIdx`` codegen emits for ``kernel``
    (``T.use_swizzle``, else this stage's panel), or ``None`` when the block indices are taken as is."""
    if len(kernel.block_vars) != 2 or has_cluster_ops(kernel.body):  # a cluster's blocks stay the hardware's
        return None
    swz = _use_swizzle(kernel)
    if swz is None:
        auto = ctx.data.get("cuda.raster_panel")
        return (int(auto), False) if auto else None
    data = tuple(swz.data)
    if len(data) > 2 and not data[2]:
        return None
    return (int(data[0]) if data else 8), len(data) > 1 and str(data[1]).lower().startswith("col")


def _gemm_tiles(kernel: Kernel) -> tuple[int, int, int | None, int] | None:
    """(BM, BN, K or None, element bytes) of the kernel's one T.gemm (or T.gemm_sp), K = BK x the trip count of
    the innermost serial loop around it (None when that is not a constant)."""
    found: list[tuple[Gemm | GemmSp, int | None]] = []

    def visit(node: Any, trip: int | None) -> None:
        if isinstance(node, (Gemm, GemmSp)):
            found.append((node, trip))
            return
        if isinstance(node, For):
            trip = E.as_int(node.extent)
        for c in children(node):
            if isinstance(c, Stmt):
                visit(c, trip)

    visit(kernel.body, None)
    if len(found) != 1:
        return None
    g, trip = found[0]
    m, n, kk = (E.as_int(x) for x in g.mnk())
    if m is None or n is None or kk is None:
        return None
    return m, n, (kk * trip if trip else None), g.A.buffer.dtype.bytes


def plan_stage(func: Any, ctx: Any) -> Any:
    """Stage: record the panel height for codegen in ``ctx.data["cuda.raster_panel"]``."""
    ctx.data.pop("cuda.raster_panel", None)
    configs = pass_configs(ctx)
    if not bool(configs.get("tlx.auto_rasterize", True)):
        return func
    kernels = [n for n in walk(func.body) if isinstance(n, Kernel)]
    if len(kernels) != 1 or len(kernels[0].block_vars) != 2:
        return func
    kernel = kernels[0]
    if _use_swizzle(kernel) is not None:
        return func
    gx, gy = (E.as_int(g) for g in kernel.grid)
    tiles = _gemm_tiles(kernel)
    if gx is None or gy is None or tiles is None:
        return func
    bm, bn, k, elem = tiles
    sms, l2 = _machine(getattr(getattr(ctx, "target", None), "arch", None))
    panel = choose_panel(gx, gy, bm, bn, k, elem, sms, l2)
    if panel:
        ctx.data["cuda.raster_panel"] = panel
    return func
