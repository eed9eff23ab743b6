"""The TileLang language surface (``import tilelang_x.language as T``).

This module is only a namespace: the implementations live in ``surface.py`` (tile ops, loops,
allocation, expressions), ``function.py`` (``prim_func``, ``macro``), ``meta.py`` (``inline``,
``meta_class``), ``ref.py`` (``Ref``) and ``spec.py`` (``Tensor``). Names that shadow Python
builtins (``T.min``, ``T.max``, ``T.abs``, ``T.print``, ``T.bool``...) are bound here, where no
code runs that could trip over them. ``T.<name>`` for a name that tilelang-x does not provide
raises a located ``TileLangSyntaxError`` (which is also an ``AttributeError``).
"""

from __future__ import annotations

from ..core_ir import dtypes as _dtypes
from ..core_ir.dtypes import (
    as_dtype,
    bfloat16,
    float8_e4m3,
    float8_e5m2,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
)
from ..core_ir.errors import NotSupportedError
from . import surface as _surface
from .allreduce import attr, comm_reducer, reinterpret, tvm_thread_allreduce
from .cluster import (
    block_rank_in_cluster,
    cluster_arrive,
    cluster_arrive_relaxed,
    cluster_sync,
    cluster_wait,
    get_cluster_dims,
    get_cluster_extent,
    get_cluster_extents,
    get_cluster_id,
    get_cluster_ids,
    get_cluster_size,
)
from .compile_annotations import annotate_compile_flags, annotate_pass_configs
from .extern import CUDASourceCodeKernel, call_extern, evaluate, import_source
from .frames import ClusterKernelFrame as _ClusterKernelFrame
from .frames import KernelFrame as _KernelFrame
from .function import macro, prim_func
from .grid import pdl_sync, pdl_trigger, sync_grid
from .ir_if import Else, If, Then
from .meta import inline, meta_class
from .packed import Ramp, abs2, add2, bfloat16x2, float16x2, float32x2, fma2, max2, min2, mul2, sub2
from .pointers import make_tensor, ptr
from .reducer import alloc_reducer, finalize_reducer, reducer_init, reducer_update
from .ref import Ref
from .registers import (
    annotate_consumer_reg_alloc,
    annotate_producer_reg_dealloc,
    dec_max_nreg,
    disable_warp_group_reg_alloc,
    inc_max_nreg,
    no_set_max_nreg,
    set_max_nreg,
)
from .rng import rng_init, rng_rand, rng_rand_float
from .simt import (
    activemask,
    all_sync,
    any_sync,
    ballot,
    ballot_sync,
    get_block_binding,
    get_block_bindings,
    get_block_extent,
    get_block_extents,
    get_lane_idx,
    get_thread_binding,
    get_thread_bindings,
    get_thread_extent,
    get_thread_extents,
    get_warp_group_idx,
    get_warp_idx,
    get_warp_idx_sync,
    match_all_sync,
    match_any_sync,
    shfl_down,
    shfl_sync,
    shfl_up,
    shfl_xor,
    shuffle_elect,
    syncthreads_and,
    syncthreads_count,
    syncthreads_or,
    thread_binding,
    tvm_warp_shuffle,
    warp_reduce_bitand,
    warp_reduce_bitor,
    warp_reduce_max,
    warp_reduce_min,
    warp_reduce_sum,
)
from .sparse import gemm_sp, gemm_sp_v2
from .surface import (
    FragmentBuffer,
    GemmWarpPolicy,
    LocalBuffer,
    LocalTensor,
    Parallel,
    Persistent,
    Pipelined,
    SharedBuffer,
    SharedTensor,
    StridedTensor,
    Tensor,
    all_of,
    alloc_buffer,
    alloc_fragment,
    alloc_local,
    alloc_shared,
    alloc_var,
    annotate_l2_hit_ratio,
    annotate_layout,
    annotate_min_blocks_per_sm,
    annotate_restrict_buffers,
    annotate_safe_value,
    any_of,
    assume,
    atomic_add,
    atomic_addx2,
    atomic_addx4,
    atomic_and,
    atomic_load,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_store,
    atomic_xor,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    cast,
    ceildiv,
    clamp,
    clear,
    clz,
    const,
    copy,
    cummax,
    cumsum,
    device_assert,
    dp4a,
    dynamic,
    empty,
    fill,
    floordiv,
    floormod,
    fma,
    gemm,
    grid,
    ieee_add,
    ieee_fdiv,
    ieee_fmaf,
    ieee_frcp,
    ieee_frsqrt,
    ieee_fsqrt,
    ieee_mul,
    ieee_sub,
    if_then_else,
    im2col,
    infinity,
    likely,
    loop_break,
    max_value,
    min_value,
    named_barrier_arrive,
    popcount,
    reduce,
    reduce_absmax,
    reduce_abssum,
    reduce_bitand,
    reduce_bitor,
    reduce_bitxor,
    reduce_max,
    reduce_min,
    reduce_sum,
    serial,
    shift_left,
    shift_right,
    symbolic,
    sync_threads,
    sync_warp,
    transpose,
    truncdiv,
    truncmod,
    unroll,
    use_swizzle,
    vectorized,
)
from .tile_scheduler import BaseTileScheduler, PersistentTileScheduler
from .tma_copy import (
    async_copy,
    fence_proxy_async,
    mbarrier_arrive_expect_tx,
    mbarrier_expect_tx,
    ptx_commit_group,
    ptx_wait_group,
    tma_copy,
    tma_store_arrive,
    tma_store_wait,
)
from .view import reshape, view
from .warp_specialize import (
    WarpSpecialize,
    alloc_barrier,
    alloc_cluster_barrier,
    barrier_arrive,
    barrier_wait,
    create_list_of_mbarrier,
    get_mbarrier,
    mbarrier_arrive,
    mbarrier_wait_parity,
    ws,
)
from .wgmma_sync import wait_wgmma, warpgroup_arrive, warpgroup_commit_batch, warpgroup_fence_operand, warpgroup_wait
from .workspace import alloc_global

Kernel = _KernelFrame
ClusterKernel = _ClusterKernelFrame
c2d_im2col = im2col  # TileLang's earlier name
Buffer = _surface.Buffer_
Select = if_then_else
Cast = _surface.tvm_cast
Serial, Unroll, Vectorized = serial, unroll, vectorized
min = _surface.min_  # noqa: A001
max = _surface.max_  # noqa: A001
print = _surface.print_  # noqa: A001
bool = _dtypes.bool_  # noqa: A001
float8_e4m3fn = float8_e4m3
float8_e5m2fn = float8_e5m2

_MATH = _surface.MATH
exp = _MATH["exp"]
exp2 = _MATH["exp2"]
exp10 = _MATH["exp10"]
log = _MATH["log"]
log2 = _MATH["log2"]
log10 = _MATH["log10"]
log1p = _MATH["log1p"]
expm1 = _MATH["expm1"]
sqrt = _MATH["sqrt"]
rsqrt = _MATH["rsqrt"]
tanh = _MATH["tanh"]
sigmoid = _MATH["sigmoid"]
abs = _MATH["abs"]  # noqa: A001
sin = _MATH["sin"]
cos = _MATH["cos"]
tan = _MATH["tan"]
asin = _MATH["asin"]
acos = _MATH["acos"]
atan = _MATH["atan"]
sinh = _MATH["sinh"]
cosh = _MATH["cosh"]
erf = _MATH["erf"]
floor = _MATH["floor"]
ceil = _MATH["ceil"]
round = _MATH["round"]  # noqa: A001
trunc = _MATH["trunc"]
isnan = _MATH["isnan"]
isinf = _MATH["isinf"]
isfinite = _MATH["isfinite"]
pow = _MATH["pow"]  # noqa: A001
fmod = _MATH["fmod"]
atan2 = _MATH["atan2"]
nearbyint = _MATH["nearbyint"]
__exp = _MATH["__exp"]
__exp10 = _MATH["__exp10"]
__log = _MATH["__log"]
__log2 = _MATH["__log2"]
__log10 = _MATH["__log10"]
__tan = _MATH["__tan"]
__cos = _MATH["__cos"]
__sin = _MATH["__sin"]
fast_rcp = _surface.fast_rcp

__all__ = [
    # program structure
    "prim_func", "macro", "inline", "meta_class", "BaseTileScheduler", "PersistentTileScheduler", "Ref", "If", "Then",
    "Else", "Kernel", "ClusterKernel", "CUDASourceCodeKernel", "Tensor",
    "Buffer", "StridedTensor",
    "SharedBuffer", "FragmentBuffer", "LocalBuffer", "SharedTensor", "LocalTensor", "const", "dynamic", "symbolic",
    "empty", "ptr", "make_tensor",
    # allocation
    "alloc_shared", "alloc_fragment", "alloc_local", "alloc_var", "alloc_buffer", "alloc_reducer", "alloc_global",
    "view", "reshape",
    # loops
    "Parallel", "Pipelined", "Persistent", "serial", "unroll", "vectorized", "grid", "Serial", "Unroll", "Vectorized",
    "loop_break",
    # tile ops
    "copy", "fill", "clear", "gemm", "gemm_sp", "gemm_sp_v2", "im2col", "c2d_im2col", "transpose", "dp4a",
    "GemmWarpPolicy", "reduce", "reduce_sum", "reduce_max", "reduce_min",
    "reduce_abssum", "reduce_absmax", "reduce_bitand", "reduce_bitor", "reduce_bitxor", "cumsum", "cummax",
    "reducer_init", "reducer_update", "finalize_reducer",
    "atomic_add", "atomic_addx2", "atomic_addx4", "atomic_max", "atomic_min", "atomic_or", "atomic_and",
    "atomic_xor", "atomic_load", "atomic_store",
    # annotations, debugging
    "annotate_layout", "annotate_restrict_buffers", "annotate_l2_hit_ratio", "annotate_safe_value",
    "annotate_min_blocks_per_sm", "use_swizzle", "annotate_pass_configs", "annotate_compile_flags",
    "print", "device_assert", "assume", "sync_threads", "named_barrier_arrive", "sync_warp", "wait_wgmma",
    "sync_grid", "pdl_trigger", "pdl_sync",
    "cluster_arrive", "cluster_arrive_relaxed", "cluster_wait", "cluster_sync", "block_rank_in_cluster",
    "get_cluster_dims", "get_cluster_size", "get_cluster_id", "get_cluster_ids", "get_cluster_extent",
    "get_cluster_extents",
    "syncthreads_count", "syncthreads_and", "syncthreads_or",
    # threads and warps
    "get_thread_binding", "get_thread_bindings", "get_thread_extent", "get_thread_extents", "get_block_binding",
    "get_block_bindings", "get_block_extent", "get_block_extents", "get_lane_idx", "get_warp_idx",
    "get_warp_idx_sync", "get_warp_group_idx", "shfl_xor", "shfl_down", "shfl_up", "shfl_sync", "tvm_warp_shuffle",
    "warp_reduce_sum", "warp_reduce_max", "warp_reduce_min", "warp_reduce_bitand", "warp_reduce_bitor", "any_sync",
    "all_sync", "ballot_sync", "ballot", "activemask", "match_any_sync", "match_all_sync",
    "shuffle_elect", "thread_binding",
    "attr", "comm_reducer", "tvm_thread_allreduce",
    # warp specialization and mbarriers
    "ws", "WarpSpecialize", "alloc_barrier", "alloc_cluster_barrier", "barrier_arrive", "barrier_wait",
    "mbarrier_arrive", "mbarrier_wait_parity", "create_list_of_mbarrier", "get_mbarrier", "tma_copy",
    "mbarrier_expect_tx", "mbarrier_arrive_expect_tx", "fence_proxy_async", "async_copy", "ptx_commit_group",
    "ptx_wait_group", "tma_store_arrive", "tma_store_wait",
    # Hopper register control and wgmma synchronization
    "set_max_nreg", "inc_max_nreg", "dec_max_nreg", "annotate_producer_reg_dealloc", "annotate_consumer_reg_alloc",
    "no_set_max_nreg", "disable_warp_group_reg_alloc", "warpgroup_arrive", "warpgroup_commit_batch",
    "warpgroup_wait", "warpgroup_fence_operand",
    # expressions
    "ceildiv", "floordiv", "floormod", "truncdiv", "truncmod", "min", "max", "clamp", "fma", "likely", "if_then_else",
    "Select", "infinity", "any_of", "all_of", "shift_left", "shift_right", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_not", "cast", "Cast", "reinterpret", "max_value", "min_value", "popcount", "clz", "ieee_add", "ieee_sub",
    "ieee_mul", "ieee_fmaf", "ieee_frcp", "ieee_fsqrt", "ieee_frsqrt", "ieee_fdiv", *_MATH,
    "rng_init", "rng_rand", "rng_rand_float", "import_source", "call_extern", "evaluate",
    "fast_rcp", "add2", "sub2", "mul2", "fma2", "max2", "min2", "abs2", "Ramp",
    # dtypes
    "float16", "bfloat16", "float32", "float64", "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float8_e5m2fn",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool", "dtype",
    "float16x2", "bfloat16x2", "float32x2",
]

dtype = as_dtype  # TileLang's T.dtype(...): a dtype from any spelling (also a parameter annotation)

_LAYOUT_NAMES = ("Layout", "Fragment")

#: TileLang names with no counterpart here, and what to write instead: the explicit PTX loads and
#: stores, whose untyped 32-bit words and uint32 vectors the IR cannot carry; TileLang's low-level
#: cp.async and TMA builtins; the wgmma descriptors and the declarative warp-specialization
#: schedule, which the CUDA backend derives itself
_INSTEAD = dict.fromkeys(
    tuple(f"{op}{bits}" for op in ("ldg", "stg") for bits in (32, 64, 128, 256))
    + tuple(f"{op}{bits}" for op in ("lds", "sts") for bits in (32, 64, 128)),
    "read and write elements (A[T.Ramp(i, 1, 2)] for a packed pair), or T.copy a tile, whose global "
    "accesses the CUDA backend vectorizes (up to 16 bytes)",
)
_INSTEAD["ptx_cp_async"] = "T.async_copy(src, dst) for a tile, or T.copy (which the backend pipelines)"
_INSTEAD.update(dict.fromkeys(
    ("tma_load", "create_tma_descriptor"),
    "T.tma_copy(src, dst, barrier=bar) for a TMA load, T.tma_copy(shared_tile, C[...]) for a store (the "
    "backend builds the tensor maps)",
))
_INSTEAD["copy_cluster"] = (
    "T.tma_copy(src, shared_tile, barrier=bar, cluster_mask=m) for a TMA load multicast to the blocks of the "
    "cluster (it does not wait: T.mbarrier_wait_parity(bar, parity) does), or T.copy inside T.Pipelined with "
    "cluster_dims=, which multicasts shared tiles for you; no copy between the shared memories of a cluster")
_INSTEAD["cp_async_barrier_noinc"] = ("T.tma_copy(src, dst, barrier=bar) (its bytes complete the barrier's phase), or "
                                      "T.async_copy with T.ptx_wait_group")
_INSTEAD.update(dict.fromkeys(
    ("alloc_wgmma_desc", "alloc_descriptor", "initialize_wgmma_descriptor", "wgmma_gemm", "ptx_wgmma_ss",
     "ptx_wgmma_rs"),
    "T.gemm(A_shared, B_shared, C_fragment): on sm_90a the backend issues wgmma and builds its descriptors "
    "(T.warpgroup_arrive / _commit_batch / _wait are accepted and left to it)",
))
_INSTEAD["allocate"] = "T.alloc_shared, T.alloc_fragment or T.alloc_local (the scope is in the name)"
_INSTEAD["alloc_tmem"] = "nothing: tensor-core operands are managed by the backend (T.gemm into a T.alloc_fragment)"
_INSTEAD.update(dict.fromkeys(
    ("tcgen05_gemm", "gemm_blockscaled"), "T.gemm(A_shared, B_shared, C_fragment): the backend picks the instruction"))
_INSTEAD.update(dict.fromkeys(("wgmma_gemm_sp", "tcgen05_gemm_sp"), "T.gemm_sp(A_sparse, E, B, C)"))
_INSTEAD.update(dict.fromkeys(
    ("access_ptr", "make_tensor_from_addr"),
    "tensor parameters and their regions (A[i, j:j + n]), or T.make_tensor over a T.ptr parameter"))
_INSTEAD.update(dict.fromkeys(
    ("int4", "tfloat32", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn"),
    "one of the dtypes tilelang_x supports (docs/language.md, Data types): float16, bfloat16, float32, "
    "float8_e4m3, float8_e5m2, int8 ... uint64 (4-bit codes: uint8 with shifts and masks; TF32: a float32 T.gemm)"))
_INSTEAD.update(dict.fromkeys(
    ("annotate_ws_schedule", "WSSchedule", "WSRole", "WSPipeline", "WSInstr", "WSOpRef", "WSSync", "WSSyncKind",
     "WSScope", "ws_op", "annotate_ws_pipeline_depth"),
    "write the roles by hand (`with T.ws(g):` regions and T.alloc_barrier barriers), or a T.Pipelined loop "
    "that the CUDA backend warp-specializes itself (T.annotate_producer_reg_dealloc / "
    "T.annotate_consumer_reg_alloc set its register split)",
))


def __getattr__(name: str) -> object:
    if name.startswith("__"):
        raise AttributeError(name)
    if name in _LAYOUT_NAMES:
        try:
            from ..core_ir import layout as _layout
        except ImportError:
            _layout = None
        if _layout is not None and hasattr(_layout, name):
            return getattr(_layout, name)
    import difflib

    from ..core_ir.source import caller_loc

    close = difflib.get_close_matches(name, __all__, n=3)
    hint = _INSTEAD.get(name) or (f"did you mean {', '.join('T.' + c for c in close)}?" if close else (
        "see tilelang_x.language.__all__ for what is available"
    ))
    raise NotSupportedError(f"T.{name} is not supported by tilelang-x", loc=caller_loc(), hint=hint)
