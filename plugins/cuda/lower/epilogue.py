"""Vector stores for fragment → global copies (the GEMM epilogue ``T.copy(C_local, C[...])``), and
for fragment → shared copies of a 16-bit fragment of the tile's own type whose groups sit in
consecutive registers (a tile computed in registers and stored for a gemm, such as dequantized
weights: one 16-byte store per 8 values instead of 8 element stores). Values of the destination's
16-bit type held in consecutive registers are packed as they are, without a float round trip.

When the copy's loop layout keeps ``w`` adjacent columns of a row in consecutive register slots
(the innermost digit of the last dim is a local digit of stride 1 whose extent ``w`` divides — the
accumulators of mma.sync and wgmma hold pairs), each thread converts the ``w`` values and writes
them with one ``w``·elem-byte store (``tlx_st2/4/8``) instead of ``w`` element stores.

Safety, by construction: the first column of a group is a multiple of ``w`` (its low digit is 0
and every other digit's place value is a multiple of the digit extent), the region's column start,
and the row length are multiples of ``w`` (proven from known divisors; otherwise this path is not
taken), so the vector is aligned (global base pointers are 16-byte aligned, as for every vector
access of the backend) and lies wholly inside or wholly outside the row: one ``col < N`` check
covers it. A shared layout moves whole 16-byte chunks (its swizzles XOR chunk indices, its panels
are whole chunks wide) and a vector is at most 16 bytes, so it stays contiguous and aligned there.
Rows are checked as in the element-wise copy. Switch: pass config ``tlx.vector_epilogue`` (default
on)."""

from __future__ import annotations

import math
from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.stmt import For, If, Stmt
from ....core_ir.tileops import Copy
from ..analysis import all_of, divisor, range_checks
from ..layout import Digit, Fragment, local_map, slot_expr
from ..lir import THREAD, Block, Evaluate, Intrin, PtrTo
from ..nests import region_index, squeezed

#: element types with ``tlx_st<w>`` overloads in tlx_cuda.h, and the widths they have
_WIDTHS = {dtypes.float16.name: (8, 4, 2), dtypes.bfloat16.name: (8, 4, 2), dtypes.float32.name: (4, 2),
           dtypes.int32.name: (4, 2)}


def vector_store_plan(op: Copy, lc: Any) -> tuple[Fragment, int] | None:
    """The loop layout and the vector width for ``op``, or ``None`` (element-wise copy)."""
    src, dst = op.src, op.dst
    if src.buffer.scope != "fragment" or dst.buffer.scope not in ("global", "shared") or dst.buffer.strides is not None:
        return None
    widths = _WIDTHS.get(dst.buffer.dtype.name)
    if widths is None or not src.is_full():
        return None
    s_ext, d_ext = [E.as_int(e) for e in squeezed(src)], [E.as_int(e) for e in squeezed(dst)]
    if len(s_ext) != src.buffer.ndim or s_ext != d_ext or any(e is None for e in s_ext):
        return None
    if E.as_int(dst.extents[-1]) == 1:  # the tile's columns must run along the buffer's rows
        return None
    found = column_runs(op, src.buffer, len(s_ext), lc)
    if found is None:
        return None
    lay, inner = found
    for w in widths:
        if inner.extent % w or divisor(dst.starts[-1]) % w:
            continue
        if dst.buffer.ndim > 1 and divisor(dst.buffer.shape[-1]) % w:
            continue
        if dst.buffer.scope == "shared" and _register_run(op, lay, w, lc) is None:
            continue
        return lay, w
    return None


def column_runs(op: Copy, frag: Buffer, ndim: int, lc: Any) -> tuple[Fragment, Digit] | None:
    """The loop layout of ``op`` (that of ``frag`` when it has none of its own), its slots renumbered
    by ``adjacent_slots_first``, and the innermost digit of its last dim when that is a local digit of
    stride 1 whose extent divides every other local digit's stride (the run of adjacent columns a
    thread holds: slot bits below its extent belong to it alone); else ``None``."""
    entry = lc.loops.get(id(op))
    lay = entry[0] if entry is not None and entry[0] is not None else lc.layouts.get(frag)
    if not isinstance(lay, Fragment) or len(lay.dims) != ndim or not lay.dims[-1]:
        return None
    lay = adjacent_slots_first(lay)
    inner = lay.dims[-1][-1]
    if inner.kind != "L" or inner.stride != 1:
        return None
    if any(d.stride % inner.extent for dim in lay.dims for d in dim if d.kind == "L" and d is not inner):
        return None
    return lay, inner


def adjacent_slots_first(lay: Fragment) -> Fragment:
    """``lay`` with its register slots renumbered (a loop layout of the copy is free to number them)
    so that the local digits ending its last dim, the adjacent columns a thread holds, take the
    lowest slots as one digit: a swapped gemm's accumulator holds four adjacent columns in slots 0,
    2, 64 and 66 (``hopper/layout.swapped_c_fragment``). ``lay`` itself when the innermost digit is
    a thread digit or already of slot stride 1."""
    last = lay.dims[-1]
    run = 0
    while run < len(last) and last[-1 - run].kind == "L":
        run += 1
    if not run or last[-1].stride == 1:
        return lay
    tail = last[-run:]
    width = math.prod(d.extent for d in tail)
    others = sorted(((i, j) for i, dim in enumerate(lay.dims) for j, d in enumerate(dim)
                     if d.kind == "L" and not (i == len(lay.dims) - 1 and j >= len(last) - run)),
                    key=lambda ij: lay.dims[ij[0]][ij[1]].stride)
    stride = {}
    place = width
    for i, j in others:
        stride[i, j] = place
        place *= lay.dims[i][j].extent
    dims = [tuple(Digit(d.extent, "L", stride[i, j]) if (i, j) in stride else d for j, d in enumerate(dim))
            for i, dim in enumerate(lay.dims)]
    dims[-1] = dims[-1][:len(last) - run] + (Digit(width, "L", 1),)
    return Fragment(tuple(dims), lay.rep, lay.threads, lay.origin)


def _register_run(op: Copy, lay: Fragment, w: int, lc: Any) -> list[tuple[int, int, int, int]] | None:
    """The fragment's slot terms (``local_map``) when it is of the destination's 16-bit type and holds
    each group of ``w`` values the copy stores in ``w`` consecutive registers, else ``None``."""
    src, dst = op.src.buffer, op.dst.buffer
    if src.dtype != dst.dtype or src.dtype.bits != 16:
        return None
    terms = local_map(lay, list(range(len(lay.dims))), lc.frag(src))
    if terms is None or not any(ls == 1 and os_ == 1 and ext % w == 0 for ls, ext, os_, _ in terms):
        return None
    return terms


def lower_vector_store(op: Copy, lay: Fragment, w: int, lc: Any, fn: str = "tlx_st") -> Stmt:
    """The copy as one ``fn<w>`` call per run of ``w`` columns a thread holds (``tlx_st<w>``: a
    vector store; ``tlx_red_add<w>``: a vector atomic add, lower/atomic.py)."""
    dst = op.dst
    groups = lay.num_local // w
    g = E.Var(lc.fresh("vg"))
    v: E.Expr = g * w if groups > 1 else E.const(0)
    idx = region_index(dst, lay.coords(THREAD, v))
    ranges = dict(lc.ranges)
    ranges[g] = (0, max(groups - 1, 0))
    values = _vector_values(op, lay, v, w, lc)
    body: Stmt = Evaluate(Intrin(f"{fn}{w}", (PtrTo(dst.buffer, idx, "w"), *values)), op.loc)
    cond = all_of(range_checks(idx, dst.buffer.shape, ranges))  # the group's first column decides for all w
    guard = lay.replica_guard(THREAD)
    if guard is not None:
        cond = guard if cond is None else E.binary("and", guard, cond)
    if cond is not None:
        body = If(cond, body, None, op.loc)
    if groups > 1:
        body = For(g, E.const(groups), "unroll", body, None, (), op.loc)
    return Block(body, "parallel", op.loc)


def _vector_values(op: Copy, lay: Fragment, v: E.Expr, w: int, lc: Any) -> list[E.Expr]:
    """The store helper's value arguments for the ``w`` slots from ``v``: for a 16-bit fragment of the
    destination's type holding them in consecutive registers, a pointer to the first (moved as they
    are, without a float round trip of each), else fp32 values, which the helper rounds once to the
    destination type (as an element store does); int32 values for an int32 destination."""
    local = lc.local_of(op.src.buffer)
    run = _register_run(op, lay, w, lc)
    if run is not None:
        return [PtrTo(local, (slot_expr(run, v),), "r")]
    terms = local_map(lay, list(range(len(lay.dims))), lc.frag(op.src.buffer))
    assert terms is not None, "the copy's loop layout holds the fragment (layout inference checked it)"
    values: list[E.Expr] = []
    kind = dtypes.int32 if op.dst.buffer.dtype == dtypes.int32 else dtypes.float32  # the helper's value type
    for j in range(w):
        value: E.Expr = E.Load(local, (slot_expr(terms, v + j if j else v),), op.loc)
        values.append(value if op.src.buffer.dtype == kind else E.cast(value, kind))
    return values
