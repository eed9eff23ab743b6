"""The implementation of the ``T.*`` language surface.

``language.py`` assembles the public namespace from this module (it also binds names such as
``T.min``, ``T.print`` and ``T.bool`` that would shadow Python builtins here). Every tile op
builds its ``core_ir.tileops`` node with the user's source location and checks it on the spot,
so a shape or scope mistake is reported at the line that made it.
"""

from __future__ import annotations

import builtins
import enum
import itertools
import math
from typing import Any

from ..core_ir import dtypes, packed
from ..core_ir import expr as E
from ..core_ir.buffer import CORE_SCOPES, Buffer, Region, known_scope
from ..core_ir.errors import (
    NotSupportedError,
    ShapeMismatchError,
    TileLangSyntaxError,
    TileLangTypeError,
    UnboundConstError,
)
from ..core_ir.layout import MetadataLayout
from ..core_ir.source import SourceLoc, caller_loc
from ..core_ir.stmt import (
    NAMED_BARRIER_IDS,
    Alloc,
    Annotate,
    Assert,
    For,
    NamedBarrier,
    Print,
    Store,
    Sync,
    freeze_annotations,
)
from ..core_ir.tileops import BIT_ATOMIC_KINDS, BIT_REDUCE_KINDS, REDUCE_KINDS, Atomic, Copy, CumSum, Fill, Gemm, Reduce
from . import builder as bld
from .fold import fold_extent
from .frames import IRLoop, KernelFrame, _range_dims, nest, persistent_loop, serial_loop
from .reducer import fill_reducer
from .spec import StridedTensorProxy, TensorProxy, dtype_of, shape_of

# ---- kernel and loops --------------------------------------------------------------------------

Kernel = KernelFrame


def Parallel(*extents: Any, coalesced_width: int | None = None, loop_layout: Any = None,
             prefer_async: bool | None = None) -> IRLoop:
    """``for i, j in T.Parallel(M, N)``: element-parallel loops over a tile."""
    ann = {k: v for k, v in (("coalesced_width", coalesced_width), ("loop_layout", loop_layout),
                             ("prefer_async", prefer_async)) if v is not None}
    return nest("parallel", "T.Parallel", extents, ann)


def Pipelined(start: Any, stop: Any = None, num_stages: int = 0, order: Any = None, stage: Any = None,
              sync: Any = None, group: Any = None) -> IRLoop:
    """``for k in T.Pipelined(n, num_stages=3)``: a software-pipelined serial loop."""
    loc = caller_loc()
    stages = E.as_int(num_stages)
    if stages is None or stages < 0:
        raise TileLangSyntaxError(f"T.Pipelined num_stages={num_stages!r} must be a non-negative int", loc=loc)
    ann: dict[str, Any] = {"num_stages": stages}
    for key, value in (("order", order), ("stage", stage)):
        if value is None:
            continue
        if not isinstance(value, (list, tuple)) or not all(E.as_int(v) is not None for v in value):
            raise TileLangSyntaxError(f"T.Pipelined {key}= must be a list of ints, got {value!r}", loc=loc)
        ann[key] = tuple(int(v) for v in value)
    if "order" in ann and "stage" in ann and len(ann["order"]) != len(ann["stage"]):
        raise TileLangSyntaxError(
            f"T.Pipelined order= has {len(ann['order'])} entries but stage= has {len(ann['stage'])}", loc=loc,
            hint="give one order and one stage entry per statement of the loop body",
        )
    if sync is not None:
        ann["sync"] = tuple(tuple(s) if isinstance(s, list) else s for s in sync)
    if group is not None:
        ann["group"] = tuple(tuple(g) if isinstance(g, list) else g for g in group)
    args = (start,) if stop is None else (start, stop)
    dims, _ = _range_dims(args, "T.Pipelined")
    return IRLoop("pipelined", "T.Pipelined", dims, ann)


def serial(*args: Any, annotations: dict[str, Any] | None = None) -> IRLoop:
    """``for i in T.serial(n)`` / ``T.serial(start, stop[, step])``."""
    return serial_loop("serial", "T.serial", args, annotations)


def unroll(*args: Any, explicit: bool = False, unroll_factor: int | None = None,
           annotations: dict[str, Any] | None = None) -> IRLoop:
    """``for i in T.unroll(n)``: a serial loop the backend unrolls."""
    ann = dict(annotations or {})
    if explicit:
        ann["explicit"] = True
    if unroll_factor is not None:
        ann["unroll_factor"] = unroll_factor
    return serial_loop("unroll", "T.unroll", args, ann)


def vectorized(*args: Any, annotations: dict[str, Any] | None = None) -> IRLoop:
    """``for i in T.vectorized(n)``."""
    return serial_loop("vectorized", "T.vectorized", args, annotations)


def Persistent(domain: Any, wave_size: Any, index: Any, group_size: Any = 8, num_stages: Any = None) -> IRLoop:
    """``for bx, by in T.Persistent([gx, gy], wave_size, index)``: the tiles of a persistent block."""
    return persistent_loop(domain, wave_size, index, group_size)


def grid(*extents: Any) -> IRLoop:
    """``for i, j in T.grid(M, N)``: nested serial loops."""
    return nest("serial", "T.grid", extents)


# ---- declarations -----------------------------------------------------------------------------

_SCOPE_SPELLINGS = {
    "shared": "shared", "shared.dyn": "shared", "fragment": "fragment", "local.fragment": "fragment",
    "local": "local", "var": "var", "local.var": "var", "global": "global",
}


def _scope(scope: str, default: str, what: str) -> str:
    if scope in ("barrier", "shared.barrier"):
        raise TileLangSyntaxError(f"{what}: barriers are not allocated as buffers", loc=caller_loc(),
                                  hint="use T.alloc_barrier(arrive_count)")
    found = _SCOPE_SPELLINGS.get(scope)
    if found is not None:
        return found
    if known_scope(scope):
        return scope
    raise TileLangSyntaxError(
        f"{what}: unknown memory scope {scope!r}", loc=caller_loc(),
        hint=f"leave scope= out (default {default!r}) or use one of {', '.join(CORE_SCOPES)}",
    )


def _alloc(scope: str, shape: Any, dtype: Any, what: str, default_name: str) -> Buffer:
    b = bld.require_kernel(what)
    loc = caller_loc()
    dims = shape_of(shape, what)
    if any(E.as_int(d) == 0 for d in dims):
        raise TileLangTypeError(f"{what}: shape ({', '.join(map(str, dims))}) has a dimension of size 0", loc=loc,
                                hint="every dimension of a tile needs at least one element")
    buf = b.new_buffer(default_name, dims, dtype_of(dtype), scope, loc)
    b.emit(Alloc(buf, None, loc=loc))
    return buf


def alloc_shared(shape: Any, dtype: Any, scope: str = "shared.dyn") -> Buffer:
    """A tile in shared memory (visible to every thread of the block)."""
    return _alloc(_scope(scope, "shared.dyn", "T.alloc_shared"), shape, dtype, "T.alloc_shared", "shared")


def alloc_fragment(shape: Any, dtype: Any, scope: str = "local.fragment") -> Buffer:
    """A register tile distributed over the block's threads (layout inferred)."""
    return _alloc(_scope(scope, "local.fragment", "T.alloc_fragment"), shape, dtype, "T.alloc_fragment", "frag")


def alloc_local(shape: Any, dtype: Any, scope: str = "local") -> Buffer:
    """A per-thread private array."""
    return _alloc(_scope(scope, "local", "T.alloc_local"), shape, dtype, "T.alloc_local", "local")


_BUFFER_NAMES = {"shared": "shared", "fragment": "frag", "local": "local"}


def alloc_buffer(shape: Any, dtype: Any = "float32", scope: str = "global") -> Buffer:
    """TileLang's allocation by scope name: ``T.alloc_buffer(shape, dtype, scope="shared.dyn")``
    is ``T.alloc_shared``, ``"local.fragment"`` ``T.alloc_fragment``, ``"local"`` ``T.alloc_local``."""
    found = _scope(scope, "global", "T.alloc_buffer")
    if found not in _BUFFER_NAMES:
        raise TileLangSyntaxError(
            f"T.alloc_buffer in {scope!r} memory is not supported inside a kernel", loc=caller_loc(),
            hint="pass scope='shared.dyn', 'local.fragment' or 'local'; global tensors are parameters or T.empty, "
            "a global workspace is T.alloc_global, a scalar is T.alloc_var")
    return _alloc(found, shape, dtype, "T.alloc_buffer", _BUFFER_NAMES[found])


def alloc_var(dtype: Any, init: Any = None, scope: str = "local.var") -> Buffer:
    """A scalar variable: reads as its value; ``v = e`` / ``v += e`` store to it."""
    b = bld.require_kernel("T.alloc_var")
    loc = caller_loc()
    dt = dtype_of(dtype)
    buf = b.new_buffer("var", (1,), dt, "var", loc)
    value = None if init is None else E.cast(init, dt)
    b.emit(Alloc(buf, value, loc=loc))
    return buf


def empty(shape: Any, dtype: Any = "float32") -> Buffer:
    """Declare an output tensor of the function (allocated by the runtime, returned by a call)."""
    b = bld.require("T.empty")
    loc = caller_loc()
    if b.kernel_open:
        raise TileLangSyntaxError(
            "T.empty declares an output of the function; it cannot be called inside `with T.Kernel(...)`",
            loc=loc, hint="call T.empty before the kernel block; inside it use T.alloc_shared / T.alloc_fragment",
        )
    buf = b.new_buffer("out", shape_of(shape, "T.empty"), dtype_of(dtype), "global", loc)
    b.outputs.append(buf)
    return buf


def _split_names(names: tuple[Any, ...]) -> list[str]:
    out: list[str] = []
    for n in names:
        if not isinstance(n, str):
            raise TileLangSyntaxError(f"T.const takes names as strings, got {n!r}", loc=caller_loc(),
                                      hint='write M, N = T.const("M, N")')
        out += [p for p in n.replace(",", " ").split() if p]
    if not out:
        raise TileLangSyntaxError("T.const needs at least one name", loc=caller_loc(), hint='T.const("M, N, K")')
    for p in out:
        if not p.isidentifier():
            raise TileLangSyntaxError(f"T.const name {p!r} is not an identifier", loc=caller_loc())
    return out


def const(*names: str, dtype: Any = dtypes.int32) -> Any:
    """``M, N = T.const("M, N")``: sizes bound at call time from the tensors' shapes (eager style)."""
    b = bld.require("T.const")
    loc = caller_loc()
    if b.mode == "prim":
        raise TileLangSyntaxError(
            "T.const is only for eager-style @tilelang.jit functions", loc=loc,
            hint="in a @T.prim_func use Python ints from the enclosing factory, or T.dynamic for runtime sizes",
        )
    dt = dtype_of(dtype)
    values: list[Any] = []
    for name in _split_names(names):
        if b.mode == "probe":
            var = b.const_vars.get(name)
            if var is None:
                var = b.const_vars[name] = E.Var(name, dt, loc)
                b.const_locs[name] = loc
            values.append(var)
        elif name in b.const_values:
            values.append(b.const_values[name])
        else:
            raise UnboundConstError(
                f"T.const `{name}` has no value: it is not a dimension of any annotated tensor parameter",
                loc=loc,
                hint=f"use `{name}` directly as a dimension in a parameter annotation "
                f"(e.g. `A: T.Tensor(({name}, ...), dtype)`), or pass {name}=<int> as a keyword argument",
            )
    return values[0] if len(values) == 1 else tuple(values)


def dynamic(name: str, dtype: Any = dtypes.int32) -> E.Var:
    """A size known only at run time (a symbolic variable bound from tensor shapes at each call)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise TileLangSyntaxError(f"T.dynamic needs a name, got {name!r}", loc=caller_loc(), hint='T.dynamic("m")')
    dt = dtype_of(dtype)
    if not dt.is_int:
        raise TileLangTypeError(f"T.dynamic(`{name}`) must have an integer dtype, got {dt}", loc=caller_loc())
    return E.Var(name, dt, caller_loc())


symbolic = dynamic

Tensor = TensorProxy("Tensor")
Buffer_ = TensorProxy("Buffer")
StridedTensor = StridedTensorProxy("StridedTensor")
SharedBuffer = TensorProxy("SharedBuffer", "shared")
FragmentBuffer = TensorProxy("FragmentBuffer", "fragment")
LocalBuffer = TensorProxy("LocalBuffer", "local")
SharedTensor = TensorProxy("SharedTensor", "shared")  # the spellings of TileLang's older examples
LocalTensor = TensorProxy("LocalTensor", "local")


# ---- operands of tile ops ---------------------------------------------------------------------

class _Point:
    """``A[i, j]`` given to a tile op: a start whose extents come from the other operand."""

    __slots__ = ("buffer", "indices")

    def __init__(self, load: E.Load) -> None:
        self.buffer = load.buffer
        self.indices = load.indices


def _fold_region(r: Region) -> Region:
    extents = tuple(fold_extent(e) for e in r.extents)
    if all(a is b for a, b in zip(extents, r.extents)):
        return r
    return Region(r.buffer, r.starts, extents)


def _operand(x: Any, what: str) -> Region | _Point:
    if type(x) is Buffer:
        return Region.full(x)
    if isinstance(x, Region):
        return _fold_region(x)
    if isinstance(x, E.Load):
        return _Point(x)
    raise TileLangTypeError(
        f"{what} must be a buffer or a part of one (A, A[i:j, :] or A[i, j]), got {type(x).__name__} {x!r}",
        loc=caller_loc(),
    )


def _region(x: Any, what: str) -> Region:
    r = _operand(x, what)
    if isinstance(r, _Point):
        return _one_element(r)
    return r


def _one_element(p: _Point) -> Region:
    return Region(p.buffer, p.indices, tuple(E.const(1) for _ in p.indices))


def _from_point(p: _Point, extents: tuple[E.Expr, ...], op: str, loc: SourceLoc | None) -> Region:
    """The region starting at ``p`` with the other operand's extents (ranks matched by padding or
    dropping dimensions of extent 1)."""
    n = p.buffer.ndim
    ext = list(extents)
    while len(ext) > n and E.as_int(ext[0]) == 1:
        ext.pop(0)
    if len(ext) > n:
        ext = [e for e in ext if E.as_int(e) != 1]
    if len(ext) > n:
        dims = ", ".join(str(e) for e in extents)
        raise ShapeMismatchError(
            f"{op}: `{p.buffer.name}` has {n} dimension{'s' if n != 1 else ''} but the other operand is [{dims}]",
            loc=loc,
            hint=f"slice `{p.buffer.name}` explicitly, e.g. {p.buffer.name}[a:b, c:d]",
        )
    ext = [E.const(1)] * (n - len(ext)) + ext
    return Region(p.buffer, p.indices, tuple(ext))


def _check_scope(r: Region, allowed: tuple[str, ...], op: str, operand: str, hint: str,
                 loc: SourceLoc | None) -> None:
    scope = r.buffer.scope
    if scope in allowed or scope not in CORE_SCOPES:
        return
    raise TileLangSyntaxError(
        f"{op}: {operand} `{r.buffer.name}` is a {scope} buffer; it must be {' or '.join(allowed)}",
        loc=loc, hint=hint,
    )


def _py_bool(value: Any, what: str, loc: SourceLoc | None) -> bool:
    if isinstance(value, E.Expr) and not isinstance(value, E.Const):
        raise TileLangSyntaxError(f"{what} must be a Python bool, got the symbolic value `{value}`", loc=loc)
    if isinstance(value, str):  # any non-empty string, "False" included, would read as True
        raise TileLangSyntaxError(f"{what} must be a Python bool, got the string {value!r}", loc=loc,
                                  hint="write True or False, without quotes")
    return builtins.bool(value)


def _py_int(value: Any, what: str, loc: SourceLoc | None) -> int:
    v = E.as_int(value)
    if v is None:
        raise TileLangSyntaxError(f"{what} must be a Python int, got {value!r}", loc=loc)
    return v


# ---- tile ops ---------------------------------------------------------------------------------

def copy(src: Any, dst: Any, *, coalesced_width: int | None = None, disable_tma: bool = False,
         eviction_policy: str | None = None, prefer_instruction: str | None = None, loop_layout: Any = None,
         annotations: dict[str, Any] | None = None) -> None:
    """``T.copy(src, dst)``: copy a tile between any two memory scopes (converting dtypes).

    ``A[i, j]`` as an operand is the start of a region as large as the other operand.
    """
    b = bld.require_kernel("T.copy")
    loc = caller_loc()
    s = _operand(src, "T.copy source")
    d = _operand(dst, "T.copy destination")
    if isinstance(s, _Point) and isinstance(d, _Point):
        s, d = _one_element(s), _one_element(d)
    elif isinstance(s, _Point):
        s = _from_point(s, d.extents, "T.copy", loc)  # type: ignore[union-attr]
    elif isinstance(d, _Point):
        d = _from_point(d, s.extents, "T.copy", loc)
    ann = dict(annotations or {})
    for key, value in (("coalesced_width", coalesced_width), ("eviction_policy", eviction_policy),
                       ("prefer_instruction", prefer_instruction), ("loop_layout", loop_layout)):
        if value is not None:
            ann[key] = value
    if disable_tma:
        ann["disable_tma"] = True
    op = Copy(s, d, freeze_annotations(ann), loc=loc)  # type: ignore[arg-type]
    op.check()
    b.emit(op)


def _tile_dims(r: Region) -> list[tuple[int, int | None]]:
    """The dimensions of ``r`` wider than 1, each with its extent (``None`` when not constant)."""
    return [(k, E.as_int(e)) for k, e in enumerate(r.extents) if E.as_int(e) != 1]


def _is_constant_tile(dims: list[tuple[int, int | None]]) -> bool:
    return len(dims) == 2 and all(e is not None for _, e in dims)


def _at(r: Region, first: int, second: int, i: E.Expr, j: E.Expr) -> tuple[E.Expr, ...]:
    """The indices of element (``i``, ``j``) of the 2-d tile ``r``: ``i`` along dimension
    ``first``, ``j`` along ``second``."""
    return tuple(st + i if k == first else st + j if k == second else st for k, st in enumerate(r.starts))


def _tile_loop(rows: int, cols: int, loc: SourceLoc | None, store: Any) -> For:
    """``for i, j in T.Parallel(rows, cols): store(i, j)``."""
    i, j = E.Var("i", dtypes.int32, loc), E.Var("j", dtypes.int32, loc)
    return For(i, E.const(rows), "parallel", For(j, E.const(cols), "parallel", store(i, j), loc=loc), loc=loc)


def im2col(img: Any, col: Any, nhw_step: Any, c_step: Any, kernel: int, stride: int, dilation: int, pad: int,
           eviction_policy: str | None = None, annotations: dict[str, Any] | None = None) -> None:
    """``T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)``: the im2col tile of a
    2-D convolution. ``img`` is NHWC ``[N, H, W, C]``; ``col`` a ``[block_M, block_K]`` tile whose
    row ``i`` is output position ``m = nhw_step * block_M + i`` (``m`` = (n, oh, ow), ``ow``
    fastest) and column ``j`` the filter tap ``k = c_step * block_K + j`` (``k`` = (kh, kw, c),
    ``c`` fastest) of a square ``kernel``: ``img[n, oh * stride + kh * dilation - pad, ow * stride +
    kw * dilation - pad, c]``, 0 outside the image (padding) and past the last position or tap."""
    b = bld.require_kernel("T.im2col")
    loc = caller_loc()
    if type(img) is not Buffer or img.ndim != 4:
        raise TileLangTypeError(f"T.im2col image must be a 4-d NHWC buffer, got {img!r}", loc=loc)
    r = _region(col, "T.im2col column tile")
    tile = _tile_dims(r)
    if not _is_constant_tile(tile):
        raise TileLangSyntaxError(f"T.im2col column tile `{r.buffer.name}` must be a [block_M, block_K] tile of "
                                  f"constant size, got extents {', '.join(str(e) for e in r.extents)}", loc=loc)
    ksize, step, dil, padding = (_py_int(v, f"T.im2col {name}", loc) for v, name in
                                 ((kernel, "kernel"), (stride, "stride"), (dilation, "dilation"), (pad, "pad")))
    n, h, w, c = img.shape
    oh = fold_extent((h + 2 * padding - dil * (ksize - 1) - 1) // step + 1)
    ow = fold_extent((w + 2 * padding - dil * (ksize - 1) - 1) // step + 1)
    (row_dim, rows), (col_dim, cols) = tile

    def store(i: E.Var, j: E.Var) -> Store:
        m = E.convert(nhw_step) * rows + i
        k = E.convert(c_step) * cols + j
        y = m % (oh * ow) // ow * step + k // (ksize * c) * dil - padding
        x = m % ow * step + k // c % ksize * dil - padding
        inside = E.binary("and", E.binary("<", m, n * oh * ow), E.binary("<", k, ksize * ksize * c))
        for bound in (E.binary(">=", y, 0), E.binary(">=", x, 0), E.binary("<", y, h), E.binary("<", x, w)):
            inside = E.binary("and", inside, bound)
        pixel = E.Load(img, (m // (oh * ow), y, x, k % c), loc)
        value = E.cast(E.select(inside, pixel, E.const(0, img.dtype)), r.buffer.dtype)
        return Store(r.buffer, _at(r, row_dim, col_dim, i, j), value, loc=loc)

    b.emit(_tile_loop(rows, cols, loc, store))


def transpose(src: Any, dst: Any) -> None:
    """``T.transpose(src, dst)``: ``dst[j, i] = src[i, j]`` over a ``[M, N]`` tile (or region) and
    an ``[N, M]`` one, as one ``T.Parallel`` loop."""
    b = bld.require_kernel("T.transpose")
    loc = caller_loc()
    s, d = _region(src, "T.transpose source"), _region(dst, "T.transpose destination")
    dims = [_tile_dims(r) for r in (s, d)]
    if not all(_is_constant_tile(x) for x in dims) or \
            (dims[0][0][1], dims[0][1][1]) != (dims[1][1][1], dims[1][0][1]):
        raise ShapeMismatchError(
            f"T.transpose takes an [M, N] and an [N, M] tile of constant size, got `{s.buffer.name}` "
            f"{', '.join(str(e) for e in s.extents)} and `{d.buffer.name}` {', '.join(str(e) for e in d.extents)}",
            loc=loc)
    (s0, rows), (s1, cols) = dims[0]
    (d0, _), (d1, _) = dims[1]

    def store(i: E.Var, j: E.Var) -> Store:
        value = E.cast(E.Load(s.buffer, _at(s, s0, s1, i, j), loc), d.buffer.dtype)
        return Store(d.buffer, _at(d, d1, d0, i, j), value, loc=loc)

    b.emit(_tile_loop(rows, cols, loc, store))


def dp4a(A: Any, B: Any, C: Any) -> None:
    """``T.dp4a(A, B, C)``: ``C[0] += A[0] * B[0] + ... + A[3] * B[3]``, the four 8-bit integers
    that start at ``A`` and ``B`` (buffers or elements) multiplied and summed into the 32-bit
    integer ``C``, exactly."""
    b = bld.require_kernel("T.dp4a")
    loc = caller_loc()
    starts = []
    for name, x in (("A", A), ("B", B), ("C", C)):
        ld = E.Load(x, tuple(E.const(0) for _ in x.shape), loc) if type(x) is Buffer else x
        if not isinstance(ld, E.Load) or not ld.buffer.dtype.is_int:
            raise TileLangTypeError(f"T.dp4a {name} must be an integer buffer or element, got {x!r}", loc=loc,
                                    hint="e.g. T.dp4a(A_local, B_local, C_local) on int8, int8, int32 buffers")
        starts.append(ld)
    a, bb, c = starts
    if a.buffer.dtype.bits != 8 or bb.buffer.dtype.bits != 8:
        raise TileLangTypeError(f"T.dp4a multiplies 8-bit integers, got {a.buffer.dtype} and {bb.buffer.dtype}",
                                loc=loc)
    total: E.Expr = E.Load(c.buffer, c.indices, loc)
    for t in range(4):
        x, y = (_next_along_last(ld, t) for ld in (a, bb))
        total = total + E.cast(x, dtypes.int32) * E.cast(y, dtypes.int32)
    b.emit(Store(c.buffer, c.indices, E.cast(total, c.buffer.dtype), loc=loc))


def fill(buffer: Any, value: Any) -> None:
    """``T.fill(buf, v)``: set every element of a tile (or a region of one) to ``v``."""
    b = bld.require_kernel("T.fill")
    if fill_reducer(buffer, value, "T.fill"):
        return
    loc = caller_loc()
    r = _region(buffer, "T.fill destination")
    op = Fill(r, E.cast(value, r.buffer.dtype), loc=loc)
    op.check()
    b.emit(op)


def clear(buffer: Any) -> None:
    """``T.clear(buf)``: fill with zeros."""
    b = bld.require_kernel("T.clear")
    if fill_reducer(buffer, 0, "T.clear"):
        return
    loc = caller_loc()
    r = _region(buffer, "T.clear destination")
    op = Fill(r, E.cast(0, r.buffer.dtype), loc=loc)
    op.check()
    b.emit(op)


class GemmWarpPolicy(enum.Enum):
    """How ``T.gemm`` splits the output tile over warps."""

    Square = 0
    FullRow = 1
    FullCol = 2

    @classmethod
    def from_warp_partition(cls, *_: Any) -> GemmWarpPolicy:
        return cls.Square


def _policy(policy: Any, loc: SourceLoc | None) -> str:
    if isinstance(policy, GemmWarpPolicy):
        return policy.name
    if isinstance(policy, str) and policy in GemmWarpPolicy.__members__:
        return policy
    if isinstance(policy, int) and not isinstance(policy, builtins.bool):
        for p in GemmWarpPolicy:
            if p.value == policy:
                return p.name
    raise TileLangSyntaxError(
        f"T.gemm policy={policy!r} is not a GemmWarpPolicy", loc=loc,
        hint="use T.GemmWarpPolicy.Square, T.GemmWarpPolicy.FullRow or T.GemmWarpPolicy.FullCol",
    )


def gemm(A: Any, B: Any, C: Any, transpose_A: bool = False, transpose_B: bool = False,
         policy: Any = GemmWarpPolicy.Square, clear_accum: bool = False, k_pack: int = 1, wg_wait: int = 0,
         mbar: Any = None, annotations: dict[str, Any] | None = None) -> None:
    """``T.gemm(A, B, C)``: ``C += op(A) @ op(B)`` on tiles (``C = ...`` with ``clear_accum``)."""
    b = bld.require_kernel("T.gemm")
    loc = caller_loc()
    ann = dict(annotations or {})
    if "k_pack" in ann:
        k_pack = ann.pop("k_pack")
    if "wg_wait" in ann:
        wg_wait = ann.pop("wg_wait")
    ra, rb, rc = _region(A, "T.gemm A"), _region(B, "T.gemm B"), _region(C, "T.gemm C")
    operand_hint = "copy the tile into a T.alloc_shared or T.alloc_fragment buffer first"
    _check_scope(ra, ("shared", "fragment"), "T.gemm", "operand A", operand_hint, loc)
    _check_scope(rb, ("shared", "fragment"), "T.gemm", "operand B", operand_hint, loc)
    _check_scope(rc, ("fragment", "local"), "T.gemm", "accumulator C",
                 "allocate the accumulator with T.alloc_fragment(shape, T.float32)", loc)
    if not rc.buffer.dtype.is_float and not rc.buffer.dtype.is_int:
        raise TileLangTypeError(f"T.gemm: accumulator `{rc.buffer.name}` has dtype {rc.buffer.dtype}", loc=loc)
    _check_accumulator_kind(ra, rb, rc, loc)
    op = Gemm(ra, rb, rc,
              trans_A=_py_bool(transpose_A, "T.gemm transpose_A", loc),
              trans_B=_py_bool(transpose_B, "T.gemm transpose_B", loc),
              policy=_policy(policy, loc),
              clear_accum=_py_bool(clear_accum, "T.gemm clear_accum", loc),
              k_pack=_py_int(k_pack, "T.gemm k_pack", loc),
              wg_wait=_py_int(wg_wait, "T.gemm wg_wait", loc),
              loc=loc)
    op.check()
    b.emit(op)


def _check_accumulator_kind(ra: Region, rb: Region, rc: Region, loc: SourceLoc | None) -> None:
    """Floating operands summed into an integer accumulator truncate every product."""
    floats = [r.buffer for r in (ra, rb) if r.buffer.dtype.is_float]
    if floats and rc.buffer.dtype.is_int:
        raise TileLangTypeError(
            f"T.gemm: operand `{floats[0].name}` is {floats[0].dtype.name} but the accumulator "
            f"`{rc.buffer.name}` is {rc.buffer.dtype.name}", loc=loc,
            hint="allocate the accumulator as T.float32 (integer accumulators are for int8 operands)")


_TILE_SCOPES = ("shared", "fragment", "local")


def _reduce(kind: str, src: Any, dst: Any, dim: Any, clear: Any, what: str) -> None:
    b = bld.require_kernel(what)
    loc = caller_loc()
    if kind not in REDUCE_KINDS:
        raise TileLangSyntaxError(f"unknown reduction {kind!r}", loc=loc, hint=f"use one of {', '.join(REDUCE_KINDS)}")
    rs, rd = _region(src, f"{what} source"), _region(dst, f"{what} destination")
    hint = "reduce a tile held in T.alloc_fragment / T.alloc_shared; copy global data in first"
    _check_scope(rs, _TILE_SCOPES, what, "source", hint, loc)
    _check_scope(rd, _TILE_SCOPES, what, "destination", hint, loc)
    n = len(rs.extents)
    d = _py_int(dim, f"{what} dim", loc)
    if d < 0:
        d += n
    if not 0 <= d < n:
        raise TileLangSyntaxError(f"{what}: dim={dim} is out of range for the {n}-d source `{rs.buffer.name}`",
                                  loc=loc, hint=f"use a dim in [-{n}, {n - 1}]")
    if kind in BIT_REDUCE_KINDS:
        for r in (rs, rd):
            if not r.buffer.dtype.is_int:
                raise TileLangTypeError(f"{what}: `{r.buffer.name}` is {r.buffer.dtype.name}; bitwise reductions take "
                                        "integer tiles", loc=loc, hint="T.copy the tile into an integer tile first")
    op = Reduce(kind, rs, rd, d, _py_bool(clear, f"{what} clear", loc), loc=loc)
    op.check()
    b.emit(op)


def reduce_sum(buffer: Any, out: Any, dim: int = -1, clear: bool = True, batch: int = 1) -> None:
    """Sum ``buffer`` along ``dim`` into ``out`` (added to ``out`` when ``clear=False``)."""
    _reduce("sum", buffer, out, dim, clear, "T.reduce_sum")


def reduce_max(buffer: Any, out: Any, dim: int = -1, clear: bool = True, batch: int = 1) -> None:
    """Maximum of ``buffer`` along ``dim`` into ``out``."""
    _reduce("max", buffer, out, dim, clear, "T.reduce_max")


def reduce_min(buffer: Any, out: Any, dim: int = -1, clear: bool = True, batch: int = 1) -> None:
    """Minimum of ``buffer`` along ``dim`` into ``out``."""
    _reduce("min", buffer, out, dim, clear, "T.reduce_min")


def reduce_abssum(buffer: Any, out: Any, dim: int = -1, clear: bool = True, batch: int = 1) -> None:
    """Sum of absolute values along ``dim``."""
    _reduce("abssum", buffer, out, dim, clear, "T.reduce_abssum")


def reduce_absmax(buffer: Any, out: Any, dim: int = -1, clear: bool = True, batch: int = 1) -> None:
    """Maximum absolute value along ``dim``."""
    _reduce("absmax", buffer, out, dim, clear, "T.reduce_absmax")


def reduce_bitand(buffer: Any, out: Any, dim: int = -1, clear: bool = True, batch: int = 1) -> None:
    """Bitwise AND of an integer tile along ``dim``."""
    _reduce("bitand", buffer, out, dim, clear, "T.reduce_bitand")


def reduce_bitor(buffer: Any, out: Any, dim: int = -1, clear: bool = True, batch: int = 1) -> None:
    """Bitwise OR of an integer tile along ``dim``."""
    _reduce("bitor", buffer, out, dim, clear, "T.reduce_bitor")


def reduce_bitxor(buffer: Any, out: Any, dim: int = -1, clear: bool = True, batch: int = 1) -> None:
    """Bitwise XOR of an integer tile along ``dim``."""
    _reduce("bitxor", buffer, out, dim, clear, "T.reduce_bitxor")


def reduce(*args: Any, **kwargs: Any) -> None:
    """``T.reduce(buffer, out, reduce_type, dim, clear)`` (TileLang's order) or
    ``T.reduce(kind, buffer, out, dim=-1, clear=True)``."""
    if args and isinstance(args[0], str):
        kind, rest = args[0], args[1:]
        names = ("buffer", "out", "dim", "clear")
    else:
        kind, rest = kwargs.pop("reduce_type", None), args
        names = ("buffer", "out", "reduce_type", "dim", "clear")
    values = dict(zip(names, rest))
    values.update(kwargs)
    if "reduce_type" in values:
        kind = values.pop("reduce_type")
    if kind is None or "buffer" not in values or "out" not in values:
        raise TileLangSyntaxError("T.reduce needs a kind, a source and a destination", loc=caller_loc(),
                                  hint='T.reduce(src, dst, "sum", dim=1, clear=True)')
    _reduce(str(kind), values["buffer"], values["out"], values.get("dim", -1), values.get("clear", True),
            f"T.reduce({kind!r})")


def cumsum(src: Any, dst: Any = None, dim: int = 0, reverse: bool = False) -> None:
    """Inclusive prefix sum of ``src`` along ``dim`` into ``dst`` (in place when ``dst`` is None)."""
    _scan("sum", src, dst, dim, reverse)


def cummax(src: Any, dst: Any = None, dim: int = 0, reverse: bool = False) -> None:
    """Running maximum of ``src`` along ``dim`` into ``dst`` (in place when ``dst`` is None)."""
    _scan("max", src, dst, dim, reverse)


def _scan(kind: str, src: Any, dst: Any, dim: int, reverse: bool) -> None:
    what = f"T.cum{kind}"
    b = bld.require_kernel(what)
    loc = caller_loc()
    rs = _region(src, f"{what} source")
    rd = rs if dst is None else _region(dst, f"{what} destination")
    hint = "scan a tile held in T.alloc_shared / T.alloc_fragment"
    _check_scope(rs, _TILE_SCOPES, what, "source", hint, loc)
    _check_scope(rd, _TILE_SCOPES + ("global",), what, "destination", hint, loc)
    n = len(rs.extents)
    d = _py_int(dim, f"{what} dim", loc)
    if d < 0:
        d += n
    if not 0 <= d < n:
        raise TileLangSyntaxError(f"{what}: dim={dim} is out of range for the {n}-d source `{rs.buffer.name}`",
                                  loc=loc)
    op = CumSum(rs, rd, d, _py_bool(reverse, f"{what} reverse", loc), kind, loc=loc)
    op.check()
    b.emit(op)


#: the memory orders C++ allows for an atomic load and an atomic store
_LOAD_ORDERS = ("relaxed", "consume", "acquire", "seq_cst")
_STORE_ORDERS = ("relaxed", "release", "seq_cst")


def _memory_order(order: Any, allowed: tuple[str, ...], what: str, loc: SourceLoc | None) -> str:
    if order not in allowed:
        bad = "" if order in E.MEMORY_ORDERS else " a memory order"
        raise TileLangSyntaxError(f"{what}: memory_order={order!r} is not{bad} allowed here", loc=loc,
                                  hint=f"use one of {', '.join(repr(o) for o in allowed)}")
    return order


def _atomic(kind: str, dst: Any, value: Any, return_prev: bool, what: str, order: str | None = None) -> E.Expr | None:
    b = bld.require_kernel(what)
    loc = caller_loc()
    d = _operand(dst, f"{what} destination")
    if _py_bool(return_prev, f"{what} return_prev", loc):
        return _atomic_fetch(b, kind, d, value, what, loc)
    tile_value = (type(value) is Buffer and value.scope != "var") or isinstance(value, Region)
    if tile_value:
        rv = _region(value, f"{what} value")
        rd = _from_point(d, rv.extents, what, loc) if isinstance(d, _Point) else d
        op = Atomic(kind, rd, rv, order, loc=loc)
    else:
        rd = _one_element(d) if isinstance(d, _Point) else d
        if any(E.as_int(x) != 1 for x in rd.extents):
            raise ShapeMismatchError(
                f"{what}: a scalar value needs a single destination element, but `{rd.buffer.name}` region is "
                f"[{', '.join(str(x) for x in rd.extents)}]",
                loc=loc, hint=f"index one element, e.g. {what}({rd.buffer.name}[i, j], value), or pass a tile value",
            )
        op = Atomic(kind, rd, E.cast(value, rd.buffer.dtype), order, loc=loc)
    if kind in BIT_ATOMIC_KINDS:
        _check_bitwise(rd, value, what, loc)
    _check_scope(rd, ("global", "shared"), what, "destination",
                 "atomics update global or shared memory; registers need no atomics", loc)
    op.check()
    b.emit(op)
    return None


def _atomic_fetch(b: Any, kind: str, d: Any, value: Any, what: str, loc: SourceLoc | None) -> E.Load:
    """``return_prev=True``: the update of one element, run where the call stands; the result reads
    a hidden variable holding the element's value before it (so the update runs once however often
    the result is used, and assigning it to a ``T.alloc_var`` stores it there)."""
    if kind not in E.FETCH_KINDS:
        raise NotSupportedError(f"{what}(..., return_prev=True) is not supported", loc=loc,
                                hint="only T.atomic_add, T.atomic_max and T.atomic_min return the previous value; "
                                "drop return_prev=True")
    rd = _one_element(d) if isinstance(d, _Point) else d
    tile_value = (type(value) is Buffer and value.scope != "var") or isinstance(value, Region)
    if tile_value or any(E.as_int(x) != 1 for x in rd.extents):
        raise ShapeMismatchError(
            f"{what}(..., return_prev=True) returns the previous value of one element, but the destination "
            f"`{rd.buffer.name}` region is [{', '.join(str(x) for x in rd.extents)}]"
            + (" and the value is a tile" if tile_value else ""),
            loc=loc, hint=f"index one element and pass a scalar value, e.g. old = {what}({rd.buffer.name}[i], 1, "
            "return_prev=True); for a tile drop return_prev=True")
    _check_scope(rd, ("global", "shared"), what, "destination",
                 "atomics update global or shared memory; registers need no atomics", loc)
    dt = rd.buffer.dtype
    prev = b.new_buffer("prev", (1,), dt, "var", loc)
    b.emit(Alloc(prev, E.AtomicFetch(kind, rd.buffer, rd.starts, E.cast(value, dt), loc), loc=loc))
    return E.Load(prev, (E.const(0),), loc)


def _check_bitwise(dst: Region, value: Any, what: str, loc: SourceLoc | None) -> None:
    """The bitwise atomics combine integers: neither the destination nor the value may be a float."""
    if not dst.buffer.dtype.is_int:
        raise TileLangTypeError(f"{what}: destination `{dst.buffer.name}` is {dst.buffer.dtype.name}; bitwise atomics "
                                "take integer buffers", loc=loc,
                                hint="keep bit masks and flags in an integer buffer (e.g. T.int32); for floats use "
                                "T.atomic_add / T.atomic_max / T.atomic_min")
    if isinstance(value, Region):
        vdt = value.buffer.dtype
    else:
        vdt = value.dtype if isinstance(value, (Buffer, E.Expr)) else E.convert(value).dtype
    if not (vdt.is_int or vdt.is_bool):
        raise TileLangTypeError(f"{what}: the value is {vdt.name}; bitwise atomics take integers", loc=loc,
                                hint=f"convert it first, e.g. T.cast(value, T.{dst.buffer.dtype.name})")


def atomic_add(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False,
               use_tma: bool = False) -> E.Expr | None:
    """Atomically add ``value`` (a scalar, or a tile of the destination's shape) to ``dst``; with
    ``return_prev=True`` (one element, a scalar value) the element's value before the addition."""
    return _atomic("add", dst, value, return_prev, "T.atomic_add")


def atomic_max(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False) -> E.Expr | None:
    """Atomic maximum (``return_prev=True``: the element's value before, as ``T.atomic_add``)."""
    return _atomic("max", dst, value, return_prev, "T.atomic_max")


def atomic_min(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False) -> E.Expr | None:
    """Atomic minimum (``return_prev=True``: the element's value before, as ``T.atomic_add``)."""
    return _atomic("min", dst, value, return_prev, "T.atomic_min")


def atomic_or(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False) -> None:
    """Atomic bitwise or of an integer ``value`` (scalar or tile) into ``dst``."""
    _atomic("or", dst, value, return_prev, "T.atomic_or")


def atomic_and(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False) -> None:
    """Atomic bitwise and of an integer ``value`` (scalar or tile) into ``dst``."""
    _atomic("and", dst, value, return_prev, "T.atomic_and")


def atomic_xor(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False) -> None:
    """Atomic bitwise exclusive or of an integer ``value`` (scalar or tile) into ``dst``."""
    _atomic("xor", dst, value, return_prev, "T.atomic_xor")


def atomic_store(dst: Any, value: Any, memory_order: str = "seq_cst") -> None:
    """Atomically replace ``dst`` (one element, or a region given a tile value) by ``value``;
    with ``memory_order="release"`` (or the default ``"seq_cst"``) the block's earlier writes are
    visible to whoever reads the stored value with an acquiring ``T.atomic_load``."""
    what = "T.atomic_store"
    _atomic("store", dst, value, False, what, _memory_order(memory_order, _STORE_ORDERS, what, caller_loc()))


def atomic_load(src: Any, memory_order: str = "seq_cst") -> E.Expr:
    """The value of one element of a global or shared buffer, read atomically: e.g. a flag
    another block sets with ``T.atomic_store``, ``while T.atomic_load(flag[i], "acquire") == 0: pass``."""
    what = "T.atomic_load"
    bld.require_kernel(what)
    loc = caller_loc()
    order = _memory_order(memory_order, _LOAD_ORDERS, what, loc)
    r = _region(src, f"{what} source")
    if any(E.as_int(x) != 1 for x in r.extents):
        raise ShapeMismatchError(f"{what} reads one element, but `{r.buffer.name}` region is "
                                 f"[{', '.join(str(x) for x in r.extents)}]", loc=loc,
                                 hint=f"index one element, e.g. {what}({r.buffer.name}[i])")
    _check_scope(r, ("global", "shared"), what, "source",
                 "atomic loads read global or shared memory; read registers directly", loc)
    return E.AtomicLoad(r.buffer, r.starts, order, loc)


def _next_along_last(load: E.Load, t: int) -> E.Load:
    return load if t == 0 else E.Load(load.buffer, (*load.indices[:-1], load.indices[-1] + t), load.loc)


def _atomic_add_lanes(dst: Any, value: Any, lanes: int, return_prev: bool, what: str) -> None:
    """Atomically add the ``lanes`` elements that start at ``value`` along its last dimension to
    the ``lanes`` that start at ``dst``: one atomic per element (each is atomic on its own, as in
    TileLang's packed form)."""
    if _py_bool(return_prev, f"{what} return_prev", caller_loc()):
        raise NotSupportedError(f"{what}(..., return_prev=True) is not supported", loc=caller_loc(),
                                hint=f"call old = T.atomic_add(dst, value, return_prev=True) once per element "
                                f"instead of {what}")
    for name, x in (("destination", dst), ("value", value)):
        if not isinstance(x, E.Load):
            raise TileLangTypeError(
                f"{what} {name} must be one element of a buffer, where its {lanes} elements start; got "
                f"{type(x).__name__} {x!r}", loc=caller_loc(),
                hint=f"e.g. {what}(B[i, j * {lanes}], A[i, j * {lanes}]), or T.atomic_add with tiles")
    for t in range(lanes):
        _atomic("add", _next_along_last(dst, t), _next_along_last(value, t), return_prev, what)


def atomic_addx2(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False) -> None:
    """Atomically add ``value`` and the element after it (last dimension) to ``dst`` and the one
    after it."""
    _atomic_add_lanes(dst, value, 2, return_prev, "T.atomic_addx2")


def atomic_addx4(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False) -> None:
    """As ``T.atomic_addx2``, for four consecutive elements."""
    _atomic_add_lanes(dst, value, 4, return_prev, "T.atomic_addx4")


# ---- annotations and debugging ------------------------------------------------------------------

def _tensor_params(items: Any, what: str, loc: SourceLoc | None) -> list[Buffer]:
    bufs = list(items)
    for buf in bufs:
        if type(buf) is not Buffer or buf.scope != "global" or buf.base is not None:
            raise TileLangTypeError(f"{what} takes tensor parameters, got {buf!r}", loc=loc,
                                    hint="name the kernel's T.Tensor parameters")
    return bufs


def annotate_restrict_buffers(*buffers: Any) -> None:
    """``T.annotate_restrict_buffers(A, B)``: these tensor parameters may share memory with
    others (an in-place kernel called with the same tensor twice), so the backend does not
    declare them ``__restrict__``."""
    b = bld.require_kernel("T.annotate_restrict_buffers")
    loc = caller_loc()
    b.emit(Annotate("non_restrict", tuple(_tensor_params(buffers, "T.annotate_restrict_buffers", loc)), loc=loc))


def annotate_min_blocks_per_sm(min_blocks: int) -> None:
    """``T.annotate_min_blocks_per_sm(n)``: the backend compiles the kernel so that ``n`` of its
    blocks fit on one SM at once (CUDA: ``__launch_bounds__(threads, n)``, which caps the registers
    per thread)."""
    b = bld.require_kernel("T.annotate_min_blocks_per_sm")
    loc = caller_loc()
    if not isinstance(min_blocks, int) or isinstance(min_blocks, builtins.bool) or min_blocks < 1:
        raise TileLangSyntaxError(f"T.annotate_min_blocks_per_sm({min_blocks!r}): expected a positive Python int",
                                  loc=loc, hint="give the number of blocks per SM as a constant, e.g. "
                                  "T.annotate_min_blocks_per_sm(2)")
    b.emit(Annotate("min_blocks_per_sm", (min_blocks,), loc=loc))


def annotate_l2_hit_ratio(l2_hit_ratio_map: dict[Any, Any]) -> None:
    """``T.annotate_l2_hit_ratio({A: 0.5})``: TileLang's L2 persistence hint. Checked, and ignored:
    no persisting-access window is set."""
    bld.require_kernel("T.annotate_l2_hit_ratio")
    loc = caller_loc()
    if not isinstance(l2_hit_ratio_map, dict):
        raise TileLangSyntaxError("T.annotate_l2_hit_ratio takes a dict {tensor: hit ratio}", loc=loc)
    _tensor_params(l2_hit_ratio_map, "T.annotate_l2_hit_ratio", loc)
    for ratio in l2_hit_ratio_map.values():
        if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not 0 <= ratio <= 1:
            raise TileLangSyntaxError(f"T.annotate_l2_hit_ratio: hit ratio {ratio!r} is not a number in [0, 1]",
                                      loc=loc)


def annotate_safe_value(safe_value_map: dict[Any, Any]) -> None:
    """``T.annotate_safe_value({A: 0})``: the value out-of-range loads of ``A`` read. Every
    backend reads 0 there already, so 0 is accepted; another value is not supported."""
    bld.require_kernel("T.annotate_safe_value")
    loc = caller_loc()
    if not isinstance(safe_value_map, dict):
        raise TileLangSyntaxError("T.annotate_safe_value takes a dict {buffer: value}", loc=loc)
    for buf, value in safe_value_map.items():
        if type(buf) is not Buffer:
            raise TileLangTypeError(f"T.annotate_safe_value key {buf!r} is not a buffer", loc=loc)
        if not (E.is_py_scalar(value) and value == 0) and not (isinstance(value, E.Const) and value.value == 0):
            raise NotSupportedError(
                f"T.annotate_safe_value: out-of-range loads of `{buf.name}` read 0, not {value!r}", loc=loc,
                hint="guard the loads with T.if_then_else(in_range, A[...], value), or pad the tensor")


def annotate_layout(layout_map: dict[Any, Any]) -> None:
    """Pin the layout of buffers: ``T.annotate_layout({A_shared: layout})``."""
    b = bld.require_kernel("T.annotate_layout")
    loc = caller_loc()
    if not isinstance(layout_map, dict):
        raise TileLangSyntaxError("T.annotate_layout takes a dict {buffer: layout}", loc=loc)
    items = []
    for buf, layout in layout_map.items():
        if type(buf) is not Buffer:
            raise TileLangTypeError(f"T.annotate_layout key {buf!r} is not a buffer", loc=loc)
        if not isinstance(layout, MetadataLayout):  # T.gemm_sp metadata keeps its one format
            items.append((buf, layout))
    if items or not layout_map:
        b.emit(Annotate("layout", tuple(items), loc=loc))


def use_swizzle(panel_size: int, order: str = "row", enable: bool = True) -> None:
    """Rasterize thread blocks in panels of ``panel_size`` for L2 locality."""
    b = bld.require_kernel("T.use_swizzle")
    loc = caller_loc()
    size = _py_int(panel_size, "T.use_swizzle panel_size", loc)
    if size <= 0:
        raise TileLangSyntaxError(f"T.use_swizzle panel_size must be positive, got {size}", loc=loc)
    if order not in ("row", "column", "col"):
        raise TileLangSyntaxError(f"T.use_swizzle order={order!r}", loc=loc, hint="use order='row' or 'column'")
    on = _py_bool(enable, "T.use_swizzle enable", loc)
    b.emit(Annotate("swizzle", (size, "column" if order == "col" else order, on), loc=loc))


def print_(obj: Any, msg: str = "", warp_group_id: int | None = None, warp_id: int | None = None) -> None:
    """``T.print(value_or_buffer, msg)``: print from one thread (the interpreter prints directly)."""
    b = bld.require_kernel("T.print")
    loc = caller_loc()
    if type(obj) is Buffer and obj.scope != "var":
        value: Any = obj
    elif isinstance(obj, Region):
        value = _fold_region(obj)
    else:
        value = E.convert(obj)
    b.emit(Print(value, str(msg), loc=loc))


def sync_threads(barrier_id: Any = None, arrive_count: Any = None) -> None:
    """``T.sync_threads()``: every thread of the block waits here (``__syncthreads``).
    ``T.sync_threads(barrier_id, arrive_count)``: a barrier of part of the block, named
    ``barrier_id`` (1..15): the calling threads wait until ``arrive_count`` threads (a multiple of 32;
    default: the block) have arrived at it, with ``T.named_barrier_arrive`` or here."""
    b = bld.require_kernel("T.sync_threads")
    loc = caller_loc()
    if barrier_id is None and arrive_count is None:
        b.emit(Sync("block", loc=loc))
        return
    threads = math.prod(b.kernel_frame.threads)
    bar_id, count = _named_barrier("T.sync_threads", barrier_id, arrive_count, threads, loc)
    whole = isinstance(bar_id, int) and bar_id == 0
    b.emit(Sync("block", loc=loc) if whole else NamedBarrier(E.convert(bar_id), count, loc=loc))


def named_barrier_arrive(barrier_id: Any, arrive_count: Any = None) -> None:
    """``T.named_barrier_arrive(barrier_id, arrive_count)``: the calling threads arrive at named
    barrier ``barrier_id`` (1..15) and go on without waiting; the threads waiting there with
    ``T.sync_threads(barrier_id, arrive_count)`` go on once ``arrive_count`` have arrived."""
    b = bld.require_kernel("T.named_barrier_arrive")
    loc = caller_loc()
    threads = math.prod(b.kernel_frame.threads)
    bar_id, count = _named_barrier("T.named_barrier_arrive", barrier_id, arrive_count, threads, loc)
    if isinstance(bar_id, int) and bar_id == 0:
        raise TileLangSyntaxError("T.named_barrier_arrive(0, ...): barrier 0 is the whole block's (T.sync_threads()), "
                                  "which every thread waits at", loc=loc, hint="name a barrier from 1 to 15")
    b.emit(NamedBarrier(E.convert(bar_id), count, arrive=True, loc=loc))


def _named_barrier(what: str, barrier_id: Any, arrive_count: Any, threads: int,
                   loc: SourceLoc | None) -> tuple[E.Expr | int, int]:
    """The checked (id, thread count) of a named barrier: a constant id is a Python int (0 only
    for the whole block), another an int32 expression (checked where it runs: the interpreter)."""
    bar_id: E.Expr | int | None = E.as_int(barrier_id)
    last = NAMED_BARRIER_IDS[-1]
    symbolic = bar_id is None and (isinstance(barrier_id, E.Expr) or type(barrier_id) is Buffer)
    if symbolic and E.convert(barrier_id).dtype.is_int:
        bar_id = E.cast(E.convert(barrier_id), dtypes.int32)
    elif bar_id is None or isinstance(barrier_id, builtins.bool) or not 0 <= bar_id <= last:
        raise TileLangSyntaxError(f"{what}: barrier_id={barrier_id!r} is not a barrier id: expected an integer "
                                  f"from 1 to {last}", loc=loc, hint="CUDA has 16 named barriers per block; 0 is "
                                  "the whole block's")
    count = threads if arrive_count is None else E.as_int(arrive_count)
    if count is None or isinstance(arrive_count, builtins.bool):
        raise TileLangSyntaxError(f"{what}: arrive_count={arrive_count!r} must be a Python int", loc=loc,
                                  hint="give the number of threads that meet at the barrier, e.g. 64 for two warps")
    if count <= 0 or count % 32 or count > threads:
        raise TileLangSyntaxError(f"{what}: arrive_count={count} must be a positive multiple of 32 (threads arrive "
                                  f"a warp at a time) and at most the block's {threads} threads", loc=loc,
                                  hint="count the threads of the whole warps that meet there")
    if isinstance(bar_id, int) and bar_id == 0 and count != threads:
        raise TileLangSyntaxError(f"{what}: barrier 0 is the whole block's ({threads} threads), not {count}", loc=loc,
                                  hint=f"name a barrier from 1 to {NAMED_BARRIER_IDS[-1]} for part of the block")
    return bar_id, count


def sync_warp(mask: Any = None) -> None:
    """``T.sync_warp()``: the threads of each warp wait for each other (``__syncwarp``)."""
    b = bld.require_kernel("T.sync_warp")
    loc = caller_loc()
    if mask is not None:
        raise TileLangSyntaxError("T.sync_warp(mask) is not supported", loc=loc, hint="call T.sync_warp() for the "
                                  "whole warp")
    b.emit(Sync("warp", loc=loc))


def loop_break() -> None:
    """``T.loop_break()``: leave the innermost ``T.serial`` / ``range`` / ``while`` loop, as
    ``break`` does (also from a ``T.macro`` called in the loop)."""
    bld.require_kernel("T.loop_break").jump("break", caller_loc())


#: Elements ``T.any_of`` / ``T.all_of`` may test: they become one expression with a term each.
TRUTH_TEST_LIMIT = 256


def _truth_test(op: str, x: Any, what: str) -> E.Expr:
    """``region[0] <op> region[1] <op> ...`` over every element of ``x`` (a buffer, region or
    element), each taken as a truth value."""
    loc = caller_loc()
    r = _region(x, what)
    extents = [E.as_int(e) for e in r.extents]
    if any(e is None for e in extents):
        raise TileLangSyntaxError(
            f"{what} of `{r.buffer.name}` needs a region of constant size, got extents "
            f"{', '.join(str(e) for e in r.extents)}", loc=loc,
            hint="slice with Python ints (A[i, 0:8]), or reduce a larger region with T.reduce_bitor / a loop")
    count = math.prod(extents)  # type: ignore[arg-type]
    if count > TRUTH_TEST_LIMIT:
        raise TileLangSyntaxError(
            f"{what} of {count} elements of `{r.buffer.name}`: at most {TRUTH_TEST_LIMIT}", loc=loc,
            hint="reduce the region with T.reduce_bitor / T.reduce_bitand into a fragment, or loop over it")
    result: E.Expr | None = None
    for offsets in itertools.product(*(range(e) for e in extents)):  # type: ignore[arg-type]
        idx = tuple(s if o == 0 else s + o for s, o in zip(r.starts, offsets))
        term = E.cast(E.Load(r.buffer, idx, loc), dtypes.bool_)
        result = term if result is None else E.binary(op, result, term)
    return result if result is not None else E.const(op == "and")


def any_of(buffer: Any) -> E.Expr:
    """``T.any_of(A[i, 0:8])``: whether any element of the buffer or region is true (nonzero)."""
    return _truth_test("or", buffer, "T.any_of")


def all_of(buffer: Any) -> E.Expr:
    """``T.all_of(A[i, 0:8])``: whether every element of the buffer or region is true (nonzero)."""
    return _truth_test("and", buffer, "T.all_of")


def device_assert(cond: Any, msg: str = "") -> None:
    """``T.device_assert(cond, msg)``: stop the kernel, naming this line and ``msg``, where
    ``cond`` is false (every thread or loop iteration that reaches it checks it)."""
    b = bld.require_kernel("T.device_assert")
    loc = caller_loc()
    if isinstance(cond, bool):
        cond = E.const(cond)
    if not isinstance(cond, E.Expr):
        raise TileLangTypeError(f"T.device_assert needs a condition, got {type(cond).__name__} {cond!r}", loc=loc)
    b.emit(Assert(cond, str(msg), loc=loc))


# ---- scalar expressions -----------------------------------------------------------------------

def ceildiv(a: Any, b: Any) -> Any:
    """``(a + b - 1) // b``; a Python int when both are Python ints."""
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, E.Expr):
        if b == 0:
            raise TileLangSyntaxError("T.ceildiv by zero", loc=caller_loc())
        return -(-a // b)
    return E.binary("//", E.binary("+", a, E.binary("-", b, 1)), b)


def floordiv(a: Any, b: Any) -> Any:
    return E.binary("//", a, b)


def floormod(a: Any, b: Any) -> Any:
    return E.binary("%", a, b)


def truncdiv(a: Any, b: Any) -> Any:
    return E.binary("/", a, b)


def truncmod(a: Any, b: Any) -> Any:
    """C ``%``: the remainder of ``T.truncdiv``, with the dividend's sign (``T.fmod`` on floats)."""
    ea, eb = E.convert(a), E.convert(b)
    if ea.dtype.is_float or eb.dtype.is_float:
        return E.call("fmod", a, b)
    return E.binary("-", a, E.binary("*", E.binary("/", a, b), b))


def shift_left(a: Any, b: Any) -> E.Expr:
    """``a << b`` on integers (TVM's name)."""
    return E.binary("<<", a, b)


def shift_right(a: Any, b: Any) -> E.Expr:
    """``a >> b`` on integers (TVM's name): arithmetic for signed, logical for unsigned, as C."""
    return E.binary(">>", a, b)


def bitwise_and(a: Any, b: Any) -> E.Expr:
    """``a & b`` on integers (TVM's name)."""
    return E.binary("&", a, b)


def bitwise_or(a: Any, b: Any) -> E.Expr:
    """``a | b`` on integers (TVM's name)."""
    return E.binary("|", a, b)


def bitwise_xor(a: Any, b: Any) -> E.Expr:
    """``a ^ b`` on integers (TVM's name)."""
    return E.binary("^", a, b)


def bitwise_not(a: Any) -> E.Expr:
    """``~a`` on integers (TVM's name)."""
    return ~E.convert(a)


def _minmax(op: str, args: tuple[Any, ...]) -> Any:
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    if len(args) < 2:
        raise TileLangSyntaxError(f"T.{op} needs at least two values", loc=caller_loc())
    if not any(isinstance(a, E.Expr) or hasattr(a, "as_expr") for a in args):
        for a in args:
            if not isinstance(a, (int, float)) and type(a).__module__ != "numpy":
                raise TileLangTypeError(f"T.{op} of {type(a).__name__} {a!r}: expected numbers or expressions",
                                        loc=caller_loc())
        return builtins.min(args) if op == "min" else builtins.max(args)
    result = args[0]
    for a in args[1:]:
        result = E.binary(op, result, a)
    return result


def min_(*args: Any) -> Any:
    """``T.min(a, b, ...)``."""
    return _minmax("min", args)


def max_(*args: Any) -> Any:
    """``T.max(a, b, ...)``."""
    return _minmax("max", args)


def clamp(x: Any, lo: Any, hi: Any) -> Any:
    return max_(min_(x, hi), lo)


def fma(a: Any, b: Any, c: Any) -> E.Expr:
    """``a * b + c`` (the backend's compiler may fuse it into one instruction)."""
    return E.binary("+", E.binary("*", a, b), c)


def likely(cond: Any) -> Any:
    """``cond``: TileLang's hint that a condition usually holds, which the backends do without."""
    return cond if isinstance(cond, builtins.bool) else E.convert(cond)


def assume(cond: Any) -> None:
    """TileLang's promise that ``cond`` holds, for its simplifier; checked to be an expression and
    otherwise ignored (a false promise changes nothing here)."""
    if not isinstance(cond, builtins.bool):
        E.convert(cond)


def if_then_else(cond: Any, then: Any, otherwise: Any) -> E.Expr:
    """``then`` where ``cond`` holds, else ``otherwise`` (both evaluated)."""
    return E.select(cond, then, otherwise)


def infinity(dtype: Any) -> E.Const:
    """Positive infinity of a float dtype (``-T.infinity(dt)`` for negative)."""
    dt = dtype_of(dtype)
    if not dt.is_float:
        raise TileLangTypeError(f"T.infinity({dt}): only float dtypes have an infinity", loc=caller_loc(),
                                hint="use the dtype's largest value for integers")
    return E.Const(math.inf, dt)


def cast(value: Any, dtype: Any) -> E.Expr:
    """``value`` converted to ``dtype``."""
    if isinstance(value, dtypes.DType) and (isinstance(dtype, E.Expr) or hasattr(dtype, "as_expr")):
        raise TileLangTypeError("T.cast takes the value first: T.cast(value, dtype)", loc=caller_loc(),
                                hint="or write TVM's T.Cast(dtype, value)")
    return E.cast(value, dtype_of(dtype))


def tvm_cast(dtype: Any, value: Any) -> E.Expr:
    """``T.Cast(dtype, value)``: TVM's spelling of ``T.cast(value, dtype)``."""
    if isinstance(dtype, E.Expr) or hasattr(dtype, "as_expr"):
        raise TileLangTypeError("T.Cast takes the dtype first: T.Cast(dtype, value)", loc=caller_loc(),
                                hint="or write T.cast(value, dtype)")
    return E.cast(value, dtype_of(dtype))


_FLOAT_MAX = {
    "float16": 65504.0, "bfloat16": float.fromhex("0x1.fep127"), "float32": float.fromhex("0x1.fffffep127"),
    "float64": float.fromhex("0x1.fffffffffffffp1023"), "float8_e4m3": 448.0, "float8_e5m2": 57344.0,
}


def _limit(dtype: Any, largest: bool, what: str) -> E.Const:
    dt = dtype_of(dtype)
    if dt.is_float:
        top = _FLOAT_MAX[dt.name]
        return E.Const(top if largest else -top, dt)
    if dt.is_bool:
        raise TileLangTypeError(f"{what}({dt}): bool has no range", loc=caller_loc())
    from ..core_ir.arith import dtype_range  # imports numpy: not at import time

    lo, hi = dtype_range(dt)
    return E.Const(hi if largest else lo, dt)


def max_value(dtype: Any) -> E.Const:
    """The largest finite value of ``dtype``, as a constant of that dtype."""
    return _limit(dtype, True, "T.max_value")


def min_value(dtype: Any) -> E.Const:
    """The lowest finite value of ``dtype`` (``-T.max_value`` for floats), as a constant."""
    return _limit(dtype, False, "T.min_value")


def popcount(x: Any) -> E.Expr:
    """The number of one bits of an integer (in its dtype's width)."""
    return E.int_call("popcount", x)


def clz(x: Any) -> E.Expr:
    """The number of leading zero bits of an integer in its dtype's width (the width for 0); int32."""
    return E.int_call("clz", x)


def reinterpret(dtype: Any, value: Any) -> E.Expr | packed.Packed:
    """The bits of ``value`` read as ``dtype``, of the same width (TVM's argument order)."""
    if isinstance(dtype, (E.Expr, packed.Packed)) or hasattr(dtype, "as_expr"):
        raise TileLangTypeError("T.reinterpret takes the dtype first: T.reinterpret(dtype, value)",
                                loc=caller_loc())
    if isinstance(value, packed.Packed) or (isinstance(dtype, str) and dtype in packed.PACKED_DTYPES):
        return packed.reinterpret(dtype, value)
    return E.reinterpret(dtype_of(dtype), value)


def fast_rcp(x: Any) -> E.Expr:
    """``1 / x`` in float32, approximate on the device (within 1 ulp; subnormals flush to zero)."""
    return E.fast_rcp(x)


def ieee_add(x: Any, y: Any, rounding_mode: str = "rn") -> E.Expr:
    """``x + y`` rounded in ``rounding_mode`` (``rn`` nearest even, ``rz``, ``ru``, ``rd``)."""
    return E.ieee_call("ieee_add", (x, y), rounding_mode)


def ieee_sub(x: Any, y: Any, rounding_mode: str = "rn") -> E.Expr:
    """``x - y`` rounded in ``rounding_mode``."""
    return E.ieee_call("ieee_sub", (x, y), rounding_mode)


def ieee_mul(x: Any, y: Any, rounding_mode: str = "rn") -> E.Expr:
    """``x * y`` rounded in ``rounding_mode``."""
    return E.ieee_call("ieee_mul", (x, y), rounding_mode)


def ieee_fmaf(x: Any, y: Any, z: Any, rounding_mode: str = "rn") -> E.Expr:
    """``x * y + z`` rounded once, in ``rounding_mode``."""
    return E.ieee_call("ieee_fmaf", (x, y, z), rounding_mode)


def ieee_frcp(x: Any, rounding_mode: str = "rn") -> E.Expr:
    """``1 / x`` rounded in ``rounding_mode``."""
    return E.ieee_call("ieee_frcp", (x,), rounding_mode)


def ieee_fsqrt(x: Any, rounding_mode: str = "rn") -> E.Expr:
    """``sqrt(x)`` rounded in ``rounding_mode``."""
    return E.ieee_call("ieee_fsqrt", (x,), rounding_mode)


def ieee_frsqrt(x: Any) -> E.Expr:
    """``1 / sqrt(x)`` rounded to nearest (float32 only, as CUDA's ``__frsqrt_rn``)."""
    return E.ieee_call("ieee_frsqrt", (x,), "rn")


def ieee_fdiv(x: Any, y: Any, rounding_mode: str = "rn") -> E.Expr:
    """``x / y`` rounded in ``rounding_mode``."""
    return E.ieee_call("ieee_fdiv", (x, y), rounding_mode)


def _math(name: str) -> Any:
    arity = E.MATH_FUNCS[name]
    if arity == 1:
        def fn1(x: Any) -> E.Expr:
            return E.call(name, x)

        fn = fn1
    else:
        def fn2(x: Any, y: Any) -> E.Expr:
            return E.call(name, x, y)

        fn = fn2
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``T.{name}``: the math intrinsic, element by element."
    if name in E.FAST_MATH:
        fn.__doc__ = f"``T.{name}``: ``T.{E.FAST_MATH[name]}`` by the backend's fast approximation where it has one."
    return fn


MATH = {name: _math(name) for name in E.MATH_FUNCS}
