"""The ``lower_tile_ops`` stage: tile ops and parallel loops become thread-level code.

Each op's lowering lives in its own module (``copy``, ``fill``, ``gemm``, ``reduce``, ``cumsum``,
``atomic``, ``parallel``); ``lower_op`` dispatches, and the stage asks the plugin hook
``tlx_lower_op`` first (when the compiler passes a hook caller in ``ctx.options["hook"]``) so
that a third-party plugin can replace one op.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ....core_ir.stmt import PrimFunc, Stmt
from .context import LowerCtx


def lower_op(op: Stmt, ctx: Any) -> Stmt | None:
    """The lowered form of one tile op (``ctx`` is the StageContext of the compilation)."""
    from ....core_ir.tileops import Atomic, Copy, CumSum, Fill, FinalizeReducer, Gemm, GemmSp, Reduce, ReducerInit

    lc: LowerCtx = ctx.data["cuda.lower"]
    if isinstance(op, Copy):
        from .copy import lower_copy

        return lower_copy(op, lc)
    if isinstance(op, Fill):
        from .fill import lower_fill

        return lower_fill(op, lc)
    if isinstance(op, Gemm):
        if getattr(lc.gemm.get(id(op)), "kind", None) == "wgmma":
            from .gemm_wgmma import lower_wgmma

            return lower_wgmma(op, lc)
        from .gemm import lower_gemm

        return lower_gemm(op, lc)
    if isinstance(op, GemmSp):
        if getattr(lc.gemm.get(id(op)), "kind", None) == "wgmma_sp":
            from ..hopper.wgmma_sp import lower_wgmma_sp

            return lower_wgmma_sp(op, lc, ctx.data)
        from .gemm_sp import lower_gemm_sp

        return lower_gemm_sp(op, lc, ctx.data)
    if isinstance(op, Reduce):
        from .reduce import lower_reduce

        return lower_reduce(op, lc)
    if isinstance(op, CumSum):
        from .cumsum import lower_cumsum

        return lower_cumsum(op, lc)
    if isinstance(op, Atomic):
        from .atomic import lower_atomic

        return lower_atomic(op, lc)
    if isinstance(op, ReducerInit):
        from .reducer import lower_reducer_init

        return lower_reducer_init(op, lc)
    if isinstance(op, FinalizeReducer):
        from .reducer import lower_finalize

        return lower_finalize(op, lc)
    return None


def lower_stage(func: PrimFunc, ctx: Any) -> PrimFunc:
    from ..launch_bounds import annotated_min_blocks
    from ..layout_inference import find_kernel
    from ..perf_options import perf_options
    from ..registers import check_region_budget
    from ..target import has_capability
    from .walker import lower_body

    lc = LowerCtx.from_stage(func, ctx)
    opts = perf_options(ctx)
    lc.fold_clear, lc.prefetch_fragments, lc.hoist_fragments = (
        opts.fold_clear, opts.prefetch_fragments, opts.hoist_fragments)
    lc.vector_epilogue, lc.reciprocal_division = opts.vector_epilogue, opts.reciprocal_division
    lc.half_pairs, lc.vector_loads = opts.half_pairs, opts.vector_loads
    lc.vector_red = opts.vector_epilogue and has_capability(ctx.target, "vector_red")
    lc.setmaxnreg = has_capability(ctx.target, "setmaxnreg")
    if lc.setmaxnreg and lc.manual:
        kernel = find_kernel(func.body)
        check_region_budget(kernel, annotated_min_blocks(kernel.body) or 1)
    lc.defer_store_drain = "cuda.persistent" in ctx.data and opts.defer_store_drain
    if lc.manual:  # T.ws regions (warp_specialize.py): shared tiles change under another warpgroup's hands
        lc.prefetch_fragments = lc.hoist_fragments = False
    lc.staged_epilogue, lc.smem_spare = _staged_setup(
        func, ctx, opts.vector_epilogue and opts.staged_epilogue and not lc.manual)
    if lc.staged_epilogue and opts.tma_store:
        _tma_store_setup(func, ctx, lc)
    _user_tma_setup(func, ctx, lc)
    ctx.data["cuda.lower"] = lc
    hook = ctx.options.get("hook") if isinstance(getattr(ctx, "options", None), dict) else None

    def dispatch(op: Stmt) -> Stmt | None:
        if hook is not None:
            got = hook.tlx_lower_op(target=ctx.target, op=op, ctx=ctx)
            if got is not None:
                return got
        return lower_op(op, ctx)

    body = lower_body(func.body, lc, dispatch)
    if lc.defer_store_drain and lc.tmaps:
        body = _drain_after_tiles(body, ctx.data["cuda.persistent"].j)
    if lc.tma_reduce or lc.user_tma_stores:
        body = _drain_reductions(body, lc.user_tma_stores)
    if lc.tmaps:
        ctx.data["cuda.tmaps"] = [*ctx.data.get("cuda.tmaps", ()), *lc.tmaps.values()]
    if lc.aligns:
        ctx.data["cuda.smem_align"] = {**ctx.data.get("cuda.smem_align", {}), **lc.aligns}
    return dataclasses.replace(func, body=body)


def _tma_store_setup(func: PrimFunc, ctx: Any, lc: LowerCtx) -> None:
    """Lets staged epilogues use TMA stores (lower/tma_store.py) when TMA is on; which parameters
    are written only by fragment copies is read from the function before the Hopper pipeline
    (whose TMA loads no longer name the tensors they read)."""
    from ..hopper.config import hopper_config
    from ..perf_options import pass_configs
    from .tma_reduce import KEY as REDUCE_KEY
    from .tma_reduce import reduce_only_params
    from .tma_store import store_only_params

    if not hopper_config(ctx).tma:
        return
    source = ctx.data.get("cuda.source_func", func)
    lc.tma_params = tuple(func.params)
    lc.tma_store_dsts = store_only_params(source)
    lc.tma_reduce = bool(pass_configs(ctx).get(REDUCE_KEY, True))
    lc.tma_reduce_dsts = reduce_only_params(source) if lc.tma_reduce else frozenset()


def _user_tma_setup(func: PrimFunc, ctx: Any, lc: LowerCtx) -> None:
    """What the kernel's own T.tma_copy loads and stores and transaction counts need
    (lower/tma_copy.py)."""
    from ....core_ir.tileops import TmaCopy
    from ....core_ir.visit import walk
    from ..cluster_sync import check_multicast
    from ..hopper.config import hopper_config
    from ..layout_inference import find_kernel
    from ..target import has_capability

    arch = getattr(ctx.target, "arch", None)
    kernel = find_kernel(func.body)
    if kernel is not None:
        check_multicast(kernel, arch)
    lc.async_proxy = has_capability(ctx.target, "tma")
    lc.user_tma = lc.async_proxy and arch == "sm_90a" and hopper_config(ctx).tma
    if lc.user_tma and any(isinstance(n, TmaCopy) for n in walk(func.body)):
        lc.tma_params = tuple(func.params)


def _drain_reductions(body: Stmt, stores: bool = False) -> Stmt:
    """The kernel's TMA reductions (``stores``: and its own TMA stores) have read their slots
    (tiles) before it ends (lower/tma_reduce.py)."""
    from ....core_ir.stmt import Kernel, Seq
    from ....core_ir.visit import rewrite
    from .tma_reduce import drain_at_exit
    from .tma_store import drain

    def fn(n: Any) -> Any:
        if not isinstance(n, Kernel):
            return None
        return dataclasses.replace(n, body=Seq((n.body, drain())) if stores else drain_at_exit(n.body))

    return rewrite(body, fn)


def _drain_after_tiles(body: Stmt, tile: Any) -> Stmt:
    """A persistent kernel's staged epilogues leave their TMA stores in flight from one tile to the
    next (lower/staged_epilogue.py): after the tile loop that issues them, wait until they have read
    shared memory, which the block must not leave before."""
    from ....core_ir.stmt import For, Seq
    from ....core_ir.visit import rewrite, walk
    from ..lir import Intrin
    from .tma_store import drain

    def stores(n: Stmt) -> bool:
        return any(isinstance(m, Intrin) and m.fn.startswith("tlx_tma_store_") for m in walk(n))

    return rewrite(body, lambda n: Seq((n, drain())) if isinstance(n, For) and n.var is tile and stores(n) else None)


def _staged_setup(func: PrimFunc, ctx: Any, wanted: bool) -> tuple[bool, int]:
    """Whether the staged epilogue may be used (sm_90a), and the shared memory bytes a workspace
    may still take (the limit minus the kernel's shared tiles, each counted with the largest
    alignment padding codegen may add)."""
    import math

    from ....core_ir.stmt import Alloc
    from ....core_ir.visit import walk
    from ..target import CAPABILITIES

    arch = getattr(getattr(ctx, "target", None), "arch", None)
    if not wanted or arch != "sm_90a":
        return False, 0
    used = 0
    for n in walk(func.body):
        if isinstance(n, Alloc) and n.buffer.scope == "shared":
            shape = n.buffer.static_shape()
            if shape is None:
                return False, 0
            used += math.prod(shape) * n.buffer.dtype.bytes + 1024
    limit = CAPABILITIES[arch]["max_smem"]
    assert isinstance(limit, int)
    return True, limit - used
