"""The CUDA stages on sm_90a: the Hopper pipeline (TMA, warp specialization) in place of the
cp.async one, the wgmma rule ahead of the sm_80 gemm rule, and ``hopper_finalize`` last. Each
Hopper feature falls back to the sm_80 form when a pass config turns it off (hopper_config.py)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from ....core_ir.stmt import PrimFunc
from ....core_ir.tileops import Gemm
from ....core_ir.visit import rewrite
from ..block_order import block_order_stage
from ..cluster import check as check_cluster
from ..fragment_fallback import fragment_fallback_stage
from ..layout_inference import find_kernel, infer_stage
from ..lower import lower_stage
from ..lower.tma_copy import preset_user_tma
from ..rasterize import plan_stage
from ..smem_plan import smem_plan_stage
from ..sync import sync_stage
from ..unswitch_mask import unswitch_stage
from ..warp_specialize import manual_setup, unless_manual
from .config import hopper_config, log
from .direct_store import direct_store_stage
from .finalize import hopper_finalize_stage
from .pipeline import hopper_pipeline_stage
from .tiles_as_grid import tiles_as_grid_stage
from .wgmma_rule import wgmma_rule


def _compiler_placed_waits(func: PrimFunc) -> PrimFunc:
    """Every ``T.gemm(..., wg_wait=n)`` as ``wg_wait=0``: the compiler places the wgmma waits. A
    group the kernel leaves in flight would still be reading its stage when the plain pipeline
    refills it, and its accumulators when the epilogue reads them (the warp-specialized pipeline
    keeps one in flight itself, with the stage release and the drain that make it safe)."""

    def fn(n: Any) -> Any:
        if isinstance(n, Gemm) and n.wg_wait != 0:
            log.debug("T.gemm(wg_wait=%s) at line %s: the compiler places the wgmma waits", n.wg_wait,
                      getattr(n.loc, "line", "?"))
            return dataclasses.replace(n, wg_wait=0)
        return None

    body = rewrite(func.body, fn)
    return func if body is func.body else dataclasses.replace(func, body=body)


def _setup(func: Any, ctx: Any) -> Any:
    func = _compiler_placed_waits(func)
    ctx.data["cuda.source_func"] = func  # for the no-TMA rebuild (runtime_tma.py fallback)
    kernel = find_kernel(func.body)
    if kernel is not None:
        check_cluster(kernel, ctx.target.arch)  # on the user's grid, before the persistent form changes it
    cfg = hopper_config(ctx)
    if cfg.wgmma:
        ctx.data["cuda.gemm_rule"] = wgmma_rule if cfg.swap_operands else functools.partial(wgmma_rule, swap=False)
    return func


def hopper_stages() -> list[tuple[str, Any]]:
    return [
        ("manual_ws", manual_setup),
        ("hopper_setup", _setup),
        ("tiles_as_grid", unless_manual(tiles_as_grid_stage)),
        ("fragment_fallback", fragment_fallback_stage),
        ("rasterize", unless_manual(plan_stage)),
        ("block_order", block_order_stage),
        ("unswitch_masks", unless_manual(unswitch_stage)),
        ("direct_store", unless_manual(direct_store_stage)),
        ("pipeline", unless_manual(hopper_pipeline_stage)),
        ("user_tma", preset_user_tma),
        ("layout_inference", infer_stage),
        ("lower_tile_ops", lower_stage),
        ("smem_plan", smem_plan_stage),
        ("sync_insertion", sync_stage),
        ("hopper_finalize", hopper_finalize_stage),
    ]
