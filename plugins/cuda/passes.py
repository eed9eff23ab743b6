"""The CUDA backend's ordered stages (what ``tlx_pipeline`` returns)."""

from __future__ import annotations

from typing import Any

from .block_order import block_order_stage
from .fragment_fallback import fragment_fallback_stage
from .layout_inference import infer_stage
from .lower import lower_stage
from .pipelining import pipeline_stage
from .rasterize import plan_stage
from .smem_plan import smem_plan_stage
from .sync import sync_stage
from .unswitch_mask import unswitch_stage
from .warp_specialize import manual_setup, unless_manual


def stages(target: Any) -> list[tuple[str, Any]]:
    if getattr(target, "arch", None) == "sm_90a":
        from .hopper.stages import hopper_stages

        return hopper_stages()
    return [
        ("manual_ws", manual_setup),
        ("fragment_fallback", fragment_fallback_stage),
        ("rasterize", unless_manual(plan_stage)),
        ("block_order", block_order_stage),
        ("unswitch_masks", unless_manual(unswitch_stage)),
        ("pipeline", unless_manual(pipeline_stage)),
        ("layout_inference", infer_stage),
        ("lower_tile_ops", lower_stage),
        ("smem_plan", smem_plan_stage),
        ("sync_insertion", sync_stage),
    ]
