"""TileLang's SIMT escape hatch: thread and block queries, shuffles, warp reductions, votes (of a
warp, and the block's barriers that vote), ``T.match_any_sync``, ``T.match_all_sync`` and
``T.shuffle_elect``.

A thread query (``T.get_thread_binding``...) gives a value that differs between the threads of a
block; the warp operations read the values of the other lanes of the calling thread's warp.
``core_ir.uniformity`` says which values they make per-thread, ``core_ir.verify_simt`` where they
may be used. The block queries are uniform: the ``T.Kernel`` block variables and grid extents.
"""

from __future__ import annotations

from typing import Any

from ..core_ir import dtypes
from ..core_ir import expr as E
from ..core_ir.errors import TileLangSyntaxError, TileLangTypeError
from ..core_ir.source import caller_loc
from . import builder as bld

FULL_MASK = 0xFFFFFFFF


def _kernel(what: str) -> Any:
    return bld.require_kernel(what).kernel_frame


def _dim(dim: Any, what: str) -> int:
    d = E.as_int(dim)
    if d is None or not 0 <= d <= 2:
        raise TileLangSyntaxError(f"{what}(dim={dim!r}): dim must be 0, 1 or 2 (x, y, z)", loc=caller_loc())
    return d


def _threads(frame: Any) -> tuple[int, int, int]:
    t = tuple(frame.threads) + (1,) * (3 - len(frame.threads))
    return t[0], t[1], t[2]


def get_thread_binding(dim: int = 0) -> E.Expr:
    """The calling thread's index along dimension ``dim`` of ``T.Kernel(threads=...)``
    (``threadIdx.x`` / ``.y`` / ``.z``): per-thread."""
    frame = _kernel("T.get_thread_binding")
    d = _dim(dim, "T.get_thread_binding")
    return E.ThreadIndex(d) if _threads(frame)[d] > 1 else E.const(0)


_THREAD_AXES = {"threadIdx.x": 0, "threadIdx.y": 1, "threadIdx.z": 2}


def thread_binding(start: Any, stop: Any = None, thread: str | None = None, **_: Any) -> E.Expr:
    """TVM's spelling of ``T.get_thread_binding``, as TileLang's examples use it:
    ``tx = T.thread_binding(0, threads, thread="threadIdx.x")`` is the calling thread's index along
    that axis, whose range must be the whole block's (``threads=`` of ``T.Kernel``)."""
    what = "T.thread_binding"
    frame = _kernel(what)
    lo, hi = (0, start) if stop is None else (start, stop)
    d = _THREAD_AXES.get(thread) if isinstance(thread, str) else None
    if d is None:
        raise TileLangSyntaxError(f"{what}(..., thread={thread!r}): thread must be 'threadIdx.x', 'threadIdx.y' "
                                  "or 'threadIdx.z'", loc=caller_loc(),
                                  hint="T.get_thread_binding(dim) gives the same index by dimension number")
    n = _threads(frame)[d]
    if E.as_int(lo) != 0 or E.as_int(hi) != n:
        raise TileLangSyntaxError(
            f"{what}({lo!r}, {hi!r}, thread={thread!r}): the range must be the block's, 0 to {n} "
            f"(T.Kernel's threads= along {thread[-1]})", loc=caller_loc(),
            hint="the block size is set by T.Kernel(..., threads=...); a sub-range of threads is an `if` on "
                 "T.get_thread_binding()")
    return E.ThreadIndex(d) if n > 1 else E.const(0)


def get_thread_bindings() -> list[E.Expr]:
    """``[T.get_thread_binding(0), T.get_thread_binding(1), T.get_thread_binding(2)]``."""
    frame = _kernel("T.get_thread_bindings")
    return [E.ThreadIndex(d) if n > 1 else E.const(0) for d, n in enumerate(_threads(frame))]


def get_thread_extent(dim: int = 0) -> int:
    """The block size along dimension ``dim`` (1 past the dimensions ``threads=`` names)."""
    return _threads(_kernel("T.get_thread_extent"))[_dim(dim, "T.get_thread_extent")]


def get_thread_extents() -> list[int]:
    """The block size along x, y and z."""
    return list(_threads(_kernel("T.get_thread_extents")))


def get_block_binding(dim: int = 0) -> E.Expr:
    """The block index along grid dimension ``dim`` (the ``T.Kernel`` block variable; 0 past the
    grid's dimensions)."""
    frame = _kernel("T.get_block_binding")
    d = _dim(dim, "T.get_block_binding")
    return frame.vars[d] if d < len(frame.vars) else E.const(0)


def get_block_bindings() -> list[E.Expr]:
    """The block indices along x, y and z."""
    frame = _kernel("T.get_block_bindings")
    return [frame.vars[d] if d < len(frame.vars) else E.const(0) for d in range(3)]


def get_block_extent(dim: int = 0) -> E.Expr:
    """The grid size along dimension ``dim`` (1 past the grid's dimensions)."""
    frame = _kernel("T.get_block_extent")
    d = _dim(dim, "T.get_block_extent")
    return frame.grid[d] if d < len(frame.grid) else E.const(1)


def get_block_extents() -> list[E.Expr]:
    """The grid size along x, y and z."""
    frame = _kernel("T.get_block_extents")
    return [frame.grid[d] if d < len(frame.grid) else E.const(1) for d in range(3)]


def _linear(what: str) -> E.Expr:
    """The linear thread index ``x + X * (y + Y * z)``, x fastest (CUDA's order)."""
    extents = _threads(_kernel(what))
    index: E.Expr | None = None
    for d in (2, 1, 0):
        if index is not None:
            index = index * extents[d]
        if extents[d] > 1:
            index = E.ThreadIndex(d) if index is None else index + E.ThreadIndex(d)
    return E.const(0) if index is None else index


def _positive(value: Any, default: int, what: str) -> int:
    if value is None:
        return default
    n = E.as_int(value)
    if n is None or n <= 0:
        raise TileLangSyntaxError(f"{what}={value!r}: expected a positive Python int", loc=caller_loc())
    return n


def get_lane_idx(warp_size: int | None = None) -> E.Expr:
    """The calling thread's lane in its warp: linear thread index % ``warp_size`` (32)."""
    return _linear("T.get_lane_idx") % _positive(warp_size, E.WARP_SIZE, "warp_size")


def get_warp_idx_sync(warp_size: int | None = None) -> E.Expr:
    """The calling thread's warp in the block: linear thread index // ``warp_size`` (32)."""
    return _linear("T.get_warp_idx_sync") // _positive(warp_size, E.WARP_SIZE, "warp_size")


def get_warp_idx(warp_size: int | None = None) -> E.Expr:
    """As ``T.get_warp_idx_sync``."""
    return _linear("T.get_warp_idx") // _positive(warp_size, E.WARP_SIZE, "warp_size")


def get_warp_group_idx(warp_size: int | None = None, warps_per_group: int | None = None) -> E.Expr:
    """The calling thread's warpgroup: linear thread index // (``warp_size`` * ``warps_per_group``),
    32 and 4 by default."""
    if warps_per_group is not None and warp_size is None:
        raise TileLangSyntaxError("T.get_warp_group_idx(warps_per_group=...) needs warp_size= too",
                                  loc=caller_loc(), hint="write T.get_warp_group_idx(32, warps_per_group)")
    size = _positive(warp_size, E.WARP_SIZE, "warp_size") * _positive(warps_per_group, 4, "warps_per_group")
    return _linear("T.get_warp_group_idx") // size


# ---- warp operations ---------------------------------------------------------------------------

def _full_mask(mask: Any, what: str) -> None:
    if E.as_int(mask) != FULL_MASK:
        raise TileLangSyntaxError(
            f"{what}(mask={mask!r}): only the full warp mask 0xFFFFFFFF is supported", loc=caller_loc(),
            hint="every lane of the warp takes part in a warp operation; leave mask= out")


def _value(value: Any, what: str) -> E.Expr:
    bld.require_kernel(what)
    e = E.convert(value)
    if e.dtype.bits > 64 or e.dtype.name.startswith("float8"):
        raise TileLangTypeError(f"{what} of a {e.dtype} value is not supported", loc=caller_loc(),
                                hint="cast it to float16, float32 or an integer type first")
    return e


def _lane_arg(x: Any, what: str) -> E.Expr:
    e = E.convert(x)
    if not e.dtype.is_int:
        raise TileLangTypeError(f"{what}: the lane or offset must be an integer, got {e.dtype}", loc=caller_loc())
    return E.cast(e, dtypes.int32)


def _shuffle(op: str, value: Any, lane: Any, width: Any, mask: Any) -> E.Expr:
    what = f"T.{op}"
    v = _value(value, what)
    _full_mask(mask, what)
    w = E.as_int(width)
    if w is None or w <= 0 or w > E.WARP_SIZE or w & (w - 1):
        raise TileLangSyntaxError(f"{what}(width={width!r}): width must be a power of two from 1 to 32",
                                  loc=caller_loc())
    if lane is None:
        raise TileLangSyntaxError(f"{what} needs the lane offset (delta)", loc=caller_loc())
    return E.WarpOp(op, (v, _lane_arg(lane, what)), w, v.dtype)


def shfl_xor(value: Any, delta: Any = None, width: int = E.WARP_SIZE, mask: Any = FULL_MASK,
             offset: Any = None) -> E.Expr:
    """``value`` of lane ``lane ^ delta`` (within groups of ``width`` lanes; a lane in a later group
    keeps its own value). ``offset=`` is TileLang's earlier name of ``delta``."""
    return _shuffle("shfl_xor", value, offset if delta is None else delta, width, mask)


def shfl_down(value: Any, delta: Any = None, width: int = E.WARP_SIZE, mask: Any = FULL_MASK,
              offset: Any = None) -> E.Expr:
    """``value`` of lane ``lane + delta`` (past the end of its group of ``width``: its own value)."""
    return _shuffle("shfl_down", value, offset if delta is None else delta, width, mask)


def shfl_up(value: Any, delta: Any = None, width: int = E.WARP_SIZE, mask: Any = FULL_MASK,
            offset: Any = None) -> E.Expr:
    """``value`` of lane ``lane - delta`` (before the start of its group of ``width``: its own value)."""
    return _shuffle("shfl_up", value, offset if delta is None else delta, width, mask)


def shfl_sync(value: Any, srcLane: Any = None, width: int = E.WARP_SIZE, mask: Any = FULL_MASK,  # noqa: N803
              src_lane: Any = None) -> E.Expr:
    """``value`` of lane ``srcLane % width`` of the caller's group of ``width`` lanes."""
    return _shuffle("shfl_sync", value, src_lane if srcLane is None else srcLane, width, mask)


def tvm_warp_shuffle(mask: Any, value: Any, src_lane: Any, width: Any, warp_size: Any) -> E.Expr:
    """TVM's ``tvm_warp_shuffle(mask, value, lane, width, warp_size)``: ``T.shfl_sync(value, lane,
    width, mask)`` (``warp_size`` must be 32)."""
    if E.as_int(warp_size) != E.WARP_SIZE:
        raise TileLangSyntaxError(f"T.tvm_warp_shuffle(warp_size={warp_size!r}): the warp size is 32",
                                  loc=caller_loc())
    return _shuffle("shfl_sync", value, src_lane, width, mask)


def _warp_reduce(kind: str, value: Any) -> E.Expr:
    what = f"T.warp_reduce_{kind}"
    v = _value(value, what)
    if kind in ("bitand", "bitor") and not v.dtype.is_int:
        raise TileLangTypeError(f"{what} needs an integer value, got {v.dtype}", loc=caller_loc())
    if v.dtype.is_bool:
        raise TileLangTypeError(f"{what} of a bool value", loc=caller_loc(), hint="use T.any_sync / T.all_sync")
    return E.WarpOp(f"warp_reduce_{kind}", (v,), E.WARP_SIZE, v.dtype)


def warp_reduce_sum(value: Any) -> E.Expr:
    """The sum of ``value`` over the 32 lanes of the warp, in every lane."""
    return _warp_reduce("sum", value)


def warp_reduce_max(value: Any) -> E.Expr:
    """The maximum of ``value`` over the 32 lanes of the warp, in every lane."""
    return _warp_reduce("max", value)


def warp_reduce_min(value: Any) -> E.Expr:
    """The minimum of ``value`` over the 32 lanes of the warp, in every lane."""
    return _warp_reduce("min", value)


def warp_reduce_bitand(value: Any) -> E.Expr:
    """The bitwise and of an integer ``value`` over the 32 lanes of the warp, in every lane."""
    return _warp_reduce("bitand", value)


def warp_reduce_bitor(value: Any) -> E.Expr:
    """The bitwise or of an integer ``value`` over the 32 lanes of the warp, in every lane."""
    return _warp_reduce("bitor", value)


def _vote(op: str, predicate: Any, mask: Any, dtype: dtypes.DType) -> E.Expr:
    what = f"T.{op}"
    p = _value(predicate, what)
    _full_mask(mask, what)
    return E.WarpOp(op, (E.cast(p != 0, dtypes.bool_) if not p.dtype.is_bool else p,), E.WARP_SIZE, dtype)


def any_sync(predicate: Any, mask: Any = FULL_MASK) -> E.Expr:
    """1 (int32) in every lane when ``predicate`` is nonzero in some lane of the warp, else 0."""
    return _vote("any_sync", predicate, mask, dtypes.int32)


def all_sync(predicate: Any, mask: Any = FULL_MASK) -> E.Expr:
    """1 (int32) in every lane when ``predicate`` is nonzero in every lane of the warp, else 0."""
    return _vote("all_sync", predicate, mask, dtypes.int32)


def ballot_sync(predicate: Any, mask: Any = FULL_MASK) -> E.Expr:
    """A uint64 with bit ``l`` set where lane ``l``'s ``predicate`` is nonzero."""
    return _vote("ballot_sync", predicate, mask, dtypes.uint64)


def ballot(predicate: Any) -> E.Expr:
    """``T.ballot_sync(predicate)``."""
    return _vote("ballot_sync", predicate, FULL_MASK, dtypes.uint64)


def _block_vote(op: str, predicate: Any) -> E.Expr:
    p = _value(predicate, f"T.{op}")
    return E.WarpOp(op, (E.cast(p != 0, dtypes.bool_) if not p.dtype.is_bool else p,), 0, dtypes.int32)


def syncthreads_count(predicate: Any) -> E.Expr:
    """A barrier of the whole block (``__syncthreads_count``) whose int32 value, in every thread, is
    the number of the block's threads whose ``predicate`` is nonzero."""
    return _block_vote("syncthreads_count", predicate)


def syncthreads_and(predicate: Any) -> E.Expr:
    """A barrier of the whole block (``__syncthreads_and``): 1 (int32) in every thread when
    ``predicate`` is nonzero in every thread of the block, else 0."""
    return _block_vote("syncthreads_and", predicate)


def syncthreads_or(predicate: Any) -> E.Expr:
    """A barrier of the whole block (``__syncthreads_or``): 1 (int32) in every thread when
    ``predicate`` is nonzero in some thread of the block, else 0."""
    return _block_vote("syncthreads_or", predicate)


def activemask() -> E.Expr:
    """A uint64 with bit ``l`` set where lane ``l`` of the warp executes this expression."""
    bld.require_kernel("T.activemask")
    return E.WarpOp("activemask", (), E.WARP_SIZE, dtypes.uint64)


def match_any_sync(value: Any, mask: Any = FULL_MASK) -> E.Expr:
    """A uint32 with bit ``l`` set where lane ``l``'s ``value`` equals the calling lane's (bit for bit)."""
    what = "T.match_any_sync"
    v = _value(value, what)
    _full_mask(mask, what)
    return E.WarpOp("match_any_sync", (v,), E.WARP_SIZE, dtypes.uint32)


def match_all_sync(value: Any, mask: Any = FULL_MASK) -> E.Expr:
    """A uint32: the full mask (``0xffffffff``) when every lane of the warp holds the same ``value``
    (bit for bit), else 0 (CUDA's ``__match_all_sync`` without its predicate: ``!= 0`` is it)."""
    what = "T.match_all_sync"
    v = _value(value, what)
    _full_mask(mask, what)
    return E.WarpOp("match_all_sync", (v,), E.WARP_SIZE, dtypes.uint32)


def shuffle_elect(thread_extent: int) -> E.Expr:
    """True (bool) in one thread of each group of ``thread_extent`` consecutive threads (lane 0 of
    the group's first warp); ``0``: in one thread of the block."""
    bld.require_kernel("T.shuffle_elect")
    n = E.as_int(thread_extent)
    if n is None or n < 0 or n % E.WARP_SIZE:
        raise TileLangSyntaxError(
            f"T.shuffle_elect({thread_extent!r}): the group size must be 0 (the whole block) or a positive "
            "multiple of 32", loc=caller_loc(),
            hint="T.shuffle_elect(32) elects one lane per warp, 128 one per warpgroup")
    elect = E.WarpOp("elect_sync", (), E.WARP_SIZE, dtypes.bool_)
    if n == E.WARP_SIZE:
        return elect
    warp = _linear("T.shuffle_elect") // E.WARP_SIZE
    first = warp == 0 if n == 0 else warp % (n // E.WARP_SIZE) == 0
    return E.binary("and", first, elect)
