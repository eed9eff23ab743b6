"""``tilelang_x.PassConfigKey``: TileLang's names for the ``pass_configs`` keys.

``@tilelang.jit(pass_configs={tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True})`` is the same as
the string key ``"tl.disable_tma_lower"``. The stages honour the keys marked below; the others
are TileLang's own switches, accepted so that kernels carrying them compile, and ignored.
"""

from __future__ import annotations

import difflib
from enum import Enum
from typing import Any

from .core_ir.errors import TileLangSyntaxError
from .core_ir.source import SourceLoc

__all__ = ["PassConfigKey"]


class PassConfigKey(str, Enum):
    """``pass_configs`` keys by TileLang's names; each value is the string key."""

    # honoured by the CUDA backend
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    """No TMA loads or stores on sm_90a (cp.async pipelines, lane stores)."""
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    """No producer/consumer warp specialization on sm_90a."""
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    """No wgmma on sm_90a (mma.sync instead)."""
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    """Compile with fast math (``--use_fast_math``)."""
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    """Extra flags for the device compiler."""
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    """Shared tiles never share bytes, even when they do not fit otherwise (``tlx.merge_shared``)."""
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    """Shared tiles never live at the same time share bytes even when the kernel fits without."""
    # honoured by the core stages, for every backend
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    """No guards on element accesses to global tensors (``core_ir/safe_access.py``): one outside its
    tensor is an error (the interpreter's ``OutOfBoundsError``) instead of a load of 0 or a dropped
    store."""
    # TileLang's own, accepted and ignored
    TL_SIMPLIFY = "tl.Simplify"
    TL_DYNAMIC_ALIGNMENT = "tl.dynamic_alignment"
    TL_DISABLE_DYNAMIC_TAIL_SPLIT = "tl.disable_dynamic_tail_split"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_ENABLE_PTXAS_VERBOSE_OUTPUT = "tl.enable_ptxas_verbose_output"
    TIR_DISABLE_VECTORIZE = "tir.disable_vectorize"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"


def config_key(key: object) -> object:
    """A ``pass_configs`` key as the string the stages look up (a ``PassConfigKey`` by its value)."""
    return key.value if isinstance(key, PassConfigKey) else key


#: The ``tlx.*`` switches (each read by the stage that owns it); a value is ``True`` or ``False``.
TLX_SWITCHES = frozenset({
    "tlx.auto_rasterize", "tlx.barrier_groups", "tlx.block_order", "tlx.defer_store_drain", "tlx.direct_store",
    "tlx.early_wgmma_issue", "tlx.elected_release", "tlx.elide_proxy_fences", "tlx.fold_clear", "tlx.follow",
    "tlx.half_pairs", "tlx.hoist_fragments", "tlx.interp_race_check", "tlx.lazy_wgmma_waits", "tlx.merge_shared",
    "tlx.multicast", "tlx.overlap_epilogue", "tlx.persistent", "tlx.pingpong", "tlx.prefetch_fragments",
    "tlx.prologue_loads", "tlx.reciprocal_division", "tlx.rolled_epilogue_steps", "tlx.rolled_k_loop",
    "tlx.softmax_rotation", "tlx.staged_epilogue", "tlx.stream_k", "tlx.swap_operands", "tlx.tiles_as_grid",
    "tlx.tma_reduce", "tlx.tma_store", "tlx.unswitch_masks", "tlx.vector_epilogue", "tlx.vector_loads",
    "tlx.wgmma_overlap", "tlx.wgmma_sp", "tlx.ws_compute_loops",
})
#: Switches whose ``None`` leaves the choice to the compiler.
TLX_OPTIONAL = frozenset({"tlx.merge_shared", "tlx.overlap_epilogue", "tlx.persistent", "tlx.stream_k",
                          "tlx.ws_compute_loops"})
#: ``tlx.*`` keys that take other values, checked where they are read.
TLX_VALUED = frozenset({"tlx.fp32_gemm", "tlx.producer_regs"})


def check_pass_configs(configs: dict[str, Any], loc: SourceLoc | None) -> None:
    """Reject an unknown ``tlx.*`` key and a switch given something other than a bool: stages read
    switches with ``bool(...)``, so ``"false"`` would silently mean on. TileLang's ``tl.*`` keys
    and others pass through."""
    for key, value in configs.items():
        if not isinstance(key, str) or not key.startswith("tlx."):
            continue
        if key not in TLX_SWITCHES | TLX_VALUED:
            close = difflib.get_close_matches(key, sorted(TLX_SWITCHES | TLX_VALUED), n=3)
            hint = f"did you mean {', '.join(close)}?" if close else "see docs/language.md for the tlx.* pass configs"
            raise TileLangSyntaxError(f"unknown pass config {key!r}", loc=loc, hint=hint)
        if key in TLX_SWITCHES and not _is_switch_value(key, value):
            allowed = "True, False or None" if key in TLX_OPTIONAL else "True or False"
            raise TileLangSyntaxError(f"pass config {key!r} is {value!r}; it takes {allowed}", loc=loc,
                                hint=f'e.g. pass_configs={{"{key}": False}}')


def _is_switch_value(key: str, value: Any) -> bool:
    return isinstance(value, bool) or (value is None and key in TLX_OPTIONAL)
