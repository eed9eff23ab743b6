"""Switches for the sm_80-class path's performance transformations, read from TileLang-style pass
configs (``jit(pass_configs={"tlx.prefetch_fragments": False})``, reaching the stages as
``ctx.options["pass_configs"]``). Every one is on by default; turning one off gives the plain form.

- ``tlx.prefetch_fragments``: a pipelined loop whose body is copies + one mma T.gemm keeps two
  register sets of operand fragments and loads the next k-tile's first fragments before the last
  k-step's MMAs of the current tile (``lower/mainloop.py``).
- ``tlx.hoist_fragments``: the A-operand fragments of a T.gemm inside a loop whose A tile is a
  shared buffer the loop never writes are loaded once before the loop (``lower/hoist.py``).
- ``tlx.fold_clear``: ``T.clear(C)`` right before ``T.gemm(..., C)`` becomes ``clear_accum``, and
  a clearing mma gemm starts from zero accumulators in its first k-step instead of storing zeros.
- ``tlx.vector_epilogue``: a fragment → global ``T.copy`` (the GEMM epilogue) stores the adjacent
  columns a thread holds (pairs in the mma/wgmma accumulators) with one 4/8/16-byte store
  (``lower/epilogue.py``), and so does a fragment → shared copy of 16-bit registers of the tile's
  own type (a dequantized weight tile); off: one store per element. Applies to the sm_80 and sm_90a
  paths.
- ``tlx.staged_epilogue``: on sm_90a, an fp16/bf16 copy of a wgmma accumulator to global goes
  through a per-warp shared staging slot (stmatrix, then 16-byte coalesced stores;
  ``lower/staged_epilogue.py``); once per tile in persistent kernels. Off: the vector epilogue above.
- ``tlx.tma_store``: the staged epilogue's chunks go to global memory as TMA stores when the
  destination is a kernel argument a tensor map can describe (``lower/tma_store.py``); always
  off when TMA is (``tl.disable_tma_lower``). Off: the 16-byte stores of every lane.
- ``tlx.reciprocal_division``: in a ``T.Parallel`` nest, a float32 division by a value that is the
  same along one of the nest's loop variables (``acc_o[i, j] /= logsum[i]``) multiplies by the
  value's correctly rounded reciprocal, computed once per value, and corrects the product once with
  an FMA-computed remainder (``lower/reciprocal.py``): the division's quotient in every trial (a
  subnormal divisor gives infinities). Off: an IEEE division per element.
  Both paths.
- ``tlx.half_pairs``: a ``T.Parallel`` nest writing a float16 / bfloat16 register fragment with
  16-bit arithmetic computes slot pairs with ``f16x2`` / ``bf16x2`` instructions, and small integer
  codes become float16 through their bits (``half_pairs.py``). Off: float32 per element. Both paths.
- ``tlx.defer_store_drain``: in a persistent kernel, a tile's TMA stores stay in flight while the
  next tile computes; the next epilogue waits for them before its first slot write, and the block
  once after its last tile. Off: each epilogue waits for its own stores. H200 (2026-11-30,
  ``bench/variants.py``, two variants each): GEMM 4096³ and 8192³ +0.5–0.7 %.
- ``tlx.auto_rasterize``: a large 2-D grid of a one-gemm kernel runs its blocks in panels of tile
  rows for L2 reuse (the ``T.use_swizzle`` remap, panel height from the grid, tile and L2 size;
  ``rasterize.py``, read there); never when the kernel calls ``T.use_swizzle``. Both paths.
- ``tlx.vector_loads``: a global → fragment ``T.copy`` loads the adjacent columns a thread holds
  with one 4/8/16-byte load (``lower/vector_load.py``); off: one load per element. Both paths.
- ``tlx.block_order``: when blocks differing only in the first grid index read nothing in common
  and those differing in another one do (FlashAttention backward's grid ``(heads, key blocks,
  batch)``), that axis is launched first, for L2 reuse (``block_order.py``, read there). Both paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def pass_configs(ctx: Any) -> dict[str, Any]:
    """The kernel's pass configs (``ctx.options["pass_configs"]``, ``{}`` when none)."""
    options = getattr(ctx, "options", None) or {}
    return (options.get("pass_configs") or {}) if isinstance(options, dict) else {}


@dataclass(frozen=True)
class PerfOptions:
    prefetch_fragments: bool = True
    hoist_fragments: bool = True
    fold_clear: bool = True
    vector_epilogue: bool = True
    staged_epilogue: bool = True
    tma_store: bool = True
    defer_store_drain: bool = True
    reciprocal_division: bool = True
    half_pairs: bool = True
    vector_loads: bool = True


def perf_options(ctx: Any) -> PerfOptions:
    configs = pass_configs(ctx)

    def on(name: str) -> bool:
        return bool(configs.get(name, True))

    return PerfOptions(on("tlx.prefetch_fragments"), on("tlx.hoist_fragments"), on("tlx.fold_clear"),
                       on("tlx.vector_epilogue"), on("tlx.staged_epilogue"), on("tlx.tma_store"),
                       on("tlx.defer_store_drain"), on("tlx.reciprocal_division"),
                       on("tlx.half_pairs"), on("tlx.vector_loads"))
