"""Which Hopper features a compilation uses: sm_90a only, each one switched off by TileLang's pass
configs (``jit(pass_configs={"tl.disable_wgmma": True, ...})``), reaching us as
``options["pass_configs"]``."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ....core_ir.errors import ArgumentError
from ..perf_options import pass_configs

log = logging.getLogger("tilelang_x.cuda.hopper")


@dataclass(frozen=True)
class HopperConfig:
    wgmma: bool
    tma: bool
    warp_specialize: bool
    #: keep one wgmma group in flight across iterations of a gemm-only warp-specialized loop
    #: (``wgmma.wait_group 1``); pass_configs={"tlx.wgmma_overlap": False} turns it off.
    overlap_wgmma: bool = True
    #: warp-specialize loops that compute more than gemms (FlashAttention's softmax) too: ``None``
    #: (default) when the block's shared memory leaves no room for a second block per SM
    #: (pipeline.py ``_owns_sm``), else as given by pass_configs={"tlx.ws_compute_loops": bool}.
    ws_compute_loops: bool | None = None
    #: persistent grid for a warp-specialized kernel with more tiles than SMs (one block per SM
    #: walking the tiles in the block order rasterisation chose; the producer loads the next
    #: tile while the consumers run the epilogue; persistent.py). ``None`` (default): for
    #: gemm-only loops (a clustered kernel walks cluster tiles and keeps its multicast, which a
    #: rasterized grid of clusters loses); pass_configs={"tlx.persistent": bool} forces it either
    #: way. H200, bench/variants.py (2026-11-30, three runs): GEMM 4096³ +1.3 to +3 %, 8192³ +0.6
    #: to +1.5 %; in (1,2,1) clusters (session 8) +2 to +3.3 %, in (2,1,1) clusters -0.8 to +1.4 %.
    persistent: bool | None = None
    #: two consumer warpgroups of a warp-specialized compute loop take turns issuing their wgmma
    #: groups (hopper/pingpong.py); pass_configs={"tlx.pingpong": False} turns it off. H200,
    #: FlashAttention D128, bench/variants.py (2026-11-29, two runs): causal +2.5 % and +4.5 %,
    #: non-causal -0.3 % and +2.4 %.
    pingpong: bool = True
    #: copies of a warp-specialized loop used by different statements get their own full/empty
    #: barriers (pipeline.py ``_Group``): pass_configs={"tlx.barrier_groups": True}. Off: on the
    #: H200 FlashAttention D128 ran 4-7 % slower with K and V on separate barriers (2026-11-29).
    barrier_groups: bool = False
    #: the FlashAttention-3 rotation of a warp-specialized compute loop (hopper/rotate.py: P·V of
    #: block k-1 in flight during the softmax of block k); pass_configs={"tlx.softmax_rotation":
    #: False} turns it off.
    softmax_rotation: bool = True
    #: global → shared copies before a warp-specialized loop at block-level coordinates into tiles
    #: nothing else writes (FlashAttention's Q) are TMA loads the producer issues at the block's
    #: start (pipeline.py ``_prologue_loads``); pass_configs={"tlx.prologue_loads": False}: the
    #: consumers copy them with ordinary loads and stores.
    prologue_loads: bool = True
    #: split the tail of a persistent gemm-only kernel's tiles between its blocks (stream_k.py):
    #: pass_configs={"tlx.stream_k": True}; unset: a tail of at most half the SMs, in parts,
    #: when persistent.auto_stream_k says it pays; False: never
    stream_k: bool | None = None
    #: a float32 (TF32) or 8-bit T.gemm with B stored K × N runs on wgmma as Cᵀ = Bᵀ·Aᵀ, Bᵀ
    #: gathered into registers (wgmma_rule.py); pass_configs={"tlx.swap_operands": False}: mma.sync
    swap_operands: bool = True
    #: registers per producer thread of a warp-specialized kernel with two or more consumer
    #: warpgroups (``setmaxnreg``); the consumers get what the block's registers leave, at most 240:
    #: pass_configs={"tlx.producer_regs": 24} gives them 240 instead of 232. A kernel's own
    #: T.annotate_producer_reg_dealloc / T.annotate_consumer_reg_alloc override the split for it
    #: (registers.py ``ws_split``)
    producer_regs: int = 40
    #: the gemm-only warp-specialized k-loop carries ``#pragma unroll 1`` (pipeline.py
    #: ``_consumer_loop``), halving the wgmma copies NVRTC compiles; pass_configs={"tlx.rolled_k_loop": False}
    #: lets NVVM unroll it (0.2-2.5 % faster on large GEMMs, about 0.3 s more to compile)
    rolled_k_loop: bool = True


def _flag(configs: dict[str, Any], *names: str) -> bool:
    return any(bool(configs.get(n)) for n in names)


def _tri(configs: dict[str, Any], name: str) -> bool | None:
    """``None`` when ``name`` is not set (the compiler decides), else its truth."""
    value = configs.get(name)
    return None if value is None else bool(value)


def hopper_config(ctx: Any) -> HopperConfig:
    arch = getattr(getattr(ctx, "target", None), "arch", None)
    configs = pass_configs(ctx)
    hopper = arch == "sm_90a"
    wgmma = hopper and not _flag(configs, "tl.disable_wgmma")
    tma = hopper and not _flag(configs, "tl.disable_tma_lower", "tl.disable_tma")
    ws = tma and not _flag(configs, "tl.disable_warp_specialized", "tl.disable_warp_specialization")
    overlap = bool(configs.get("tlx.wgmma_overlap", True))
    return HopperConfig(wgmma, tma, ws, overlap, _tri(configs, "tlx.ws_compute_loops"),
                        _tri(configs, "tlx.persistent"), bool(configs.get("tlx.pingpong", True)),
                        _flag(configs, "tlx.barrier_groups"), bool(configs.get("tlx.softmax_rotation", True)),
                        bool(configs.get("tlx.prologue_loads", True)), _tri(configs, "tlx.stream_k"),
                        bool(configs.get("tlx.swap_operands", True)), _producer_regs(configs),
                        bool(configs.get("tlx.rolled_k_loop", True)))


def _producer_regs(configs: dict[str, Any]) -> int:
    value = configs.get("tlx.producer_regs", 40)
    if not isinstance(value, int) or isinstance(value, bool) or not 24 <= value <= 256 or value % 8:
        raise ArgumentError(f"pass config tlx.producer_regs={value!r}: setmaxnreg takes a multiple of 8 from 24 "
                            "to 256; give e.g. 24 or 40")
    return value


def no_tma_rebuild(ctx: Any) -> Any:
    """A factory of the launcher of the same kernel compiled without TMA (for tensors TMA cannot
    describe), from the function ``hopper_setup`` kept in ``ctx.data["cuda.source_func"]``."""
    func = ctx.data.get("cuda.source_func")
    if func is None:
        return None
    target, options = ctx.target, dict(getattr(ctx, "options", None) or {})

    def build() -> Any:
        from tilelang_x.compiler import compile_prim_func

        configs = dict(options.get("pass_configs") or {})
        configs["tl.disable_tma_lower"] = True
        opts = {**options, "pass_configs": configs}
        return compile_prim_func(func, target=target, options=opts).launcher

    return build
