"""Vector stores for fragment → global copies (the GEMM epilogue ``T.copy(C_local, C[...])``).

When the copy's loop layout keeps ``w`` adjacent columns of a row in consecutive register slots
(the innermost digit of the last dim is a local digit of stride 1 whose extent ``w`` divides — the
accumulators of mma.sync and wgmma hold pairs), each thread converts the ``w`` values and writes
them with one ``w``·elem-byte store (``tlx_st2/4/8``) instead of ``w`` element stores.

Safety, by construction: the first column of a group is a multiple of ``w`` (its low digit is 0
and every other digit's place value is a multiple of the digit extent), the region's column start,
and the row length are multiples of ``w`` (proven from known divisors; otherwise this path is not
taken), so the vector is aligned (global base pointers are 16-byte aligned, as for every vector
access of the backend) and lies wholly inside or wholly outside the row: one ``col < N`` check
covers it. Rows are checked as in the element-wise copy. Switch: pass config
``tlx.vector_epilogue`` (default on)."""

from __future__ import annotations

from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.stmt import For, If, Stmt
from ....core_ir.tileops import Copy
from ..analysis import divisor, prove_lt
from ..layout import Fragment, local_map, slot_expr
from ..lir import THREAD, Block, Evaluate, Intrin, PtrTo
from ..nests import region_index, squeezed

#: element types with ``tlx_st<w>`` overloads in tlx_cuda.h, and the widths they have
_WIDTHS = {dtypes.float16.name: (8, 4, 2), dtypes.bfloat16.name: (8, 4, 2), dtypes.float32.name: (4, 2)}


def vector_store_plan(op: Copy, lc: Any) -> tuple[Fragment, int] | None:
    """The loop layout and the vector width for ``op``, or ``None`` (element-wise copy)."""
    src, dst = op.src, op.dst
    if src.buffer.scope != "fragment" or dst.buffer.scope != "global" or dst.buffer.strides is not None:
        return None
    widths = _WIDTHS.get(dst.buffer.dtype.name)
    if widths is None or not src.is_full():
        return None
    s_ext, d_ext = [E.as_int(e) for e in squeezed(src)], [E.as_int(e) for e in squeezed(dst)]
    if len(s_ext) != src.buffer.ndim or s_ext != d_ext or any(e is None for e in s_ext):
        return None
    if E.as_int(dst.extents[-1]) == 1:  # the tile's columns must run along the buffer's rows
        return None
    entry = lc.loops.get(id(op))
    lay = entry[0] if entry is not None and entry[0] is not None else lc.layouts.get(src.buffer)
    if not isinstance(lay, Fragment) or len(lay.dims) != len(s_ext) or not lay.dims[-1]:
        return None
    inner = lay.dims[-1][-1]
    if inner.kind != "L" or inner.stride != 1:
        return None
    others = [d for dim in lay.dims for d in dim if d.kind == "L" and d is not inner]
    if any(d.stride % inner.extent for d in others):  # slot bits below `extent` belong to `inner` alone
        return None
    for w in widths:
        if inner.extent % w or divisor(dst.starts[-1]) % w:
            continue
        if dst.buffer.ndim > 1 and divisor(dst.buffer.shape[-1]) % w:
            continue
        return lay, w
    return None


def lower_vector_store(op: Copy, lay: Fragment, w: int, lc: Any) -> Stmt:
    src, dst = op.src, op.dst
    n = len(lay.dims)
    terms = local_map(lay, list(range(n)), lc.frag(src.buffer))
    assert terms is not None, "the copy's loop layout holds the fragment (layout inference checked it)"
    groups = lay.num_local // w
    g = E.Var(lc.fresh("vg"))
    v: E.Expr = g * w if groups > 1 else E.const(0)
    idx = region_index(dst, lay.coords(THREAD, v))
    ranges = dict(lc.ranges)
    ranges[g] = (0, max(groups - 1, 0))
    local = lc.local_of(src.buffer)
    values = []
    for j in range(w):
        slot = slot_expr(terms, v + j if j else v)
        value: E.Expr = E.Load(local, (slot,), op.loc)
        # fp32 in: the helper rounds once to the destination type (as an element store does)
        values.append(value if src.buffer.dtype == dtypes.float32 else E.cast(value, dtypes.float32))
    body: Stmt = Evaluate(Intrin(f"tlx_st{w}", (PtrTo(dst.buffer, idx, "w"), *values)), op.loc)
    cond: E.Expr | None = None
    for i, dim in zip(idx, dst.buffer.shape):  # the group's first column decides for all w (see above)
        if not prove_lt(i, dim, ranges):
            c = E.binary("<", i, dim)
            cond = c if cond is None else E.binary("and", cond, c)
    guard = lay.replica_guard(THREAD)
    if guard is not None:
        cond = guard if cond is None else E.binary("and", guard, cond)
    if cond is not None:
        body = If(cond, body, None, op.loc)
    if groups > 1:
        body = For(g, E.const(groups), "unroll", body, None, (), op.loc)
    return Block(body, "parallel", op.loc)
