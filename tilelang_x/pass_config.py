"""``tilelang_x.PassConfigKey``: TileLang's names for the ``pass_configs`` keys.

``@tilelang.jit(pass_configs={tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True})`` is the same as
the string key ``"tl.disable_tma_lower"``. The stages honour the keys marked below; the others
are TileLang's own switches, accepted so that kernels carrying them compile, and ignored.
"""

from __future__ import annotations

from enum import Enum

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
