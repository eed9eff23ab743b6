"""Vector loads for global → fragment copies (``T.copy(X[rows, cols], frag)``) and global → global
ones (a cast: ``T.copy(dQ_f32[...], dQ_f16[...])``), pass config ``tlx.vector_loads`` (default on;
both paths).

The element-wise copy loads each register on its own: TileLang's FlashAttention backward
preprocess (``T.copy(O[b, h, rows, cols], o)`` of fp16 tiles) issued 64 two-byte ``LDG.E.U16`` per
thread and ran at 1.6 TB/s on the H200. When the fragment's layout gives a thread ``w`` adjacent
columns of a row (the innermost digit of the copy's last dim a local digit of stride 1 whose extent
``w`` divides), the thread loads them with one ``w``·elem-byte load (``tlx_ldv``, up to 16 bytes)
into their registers, converting each to the fragment's type as the element copy does (16-bit
floats to float32, or none). A global → global copy over a loop layout of that shape moves the
``w`` elements with one load and one store (``tlx_cpv<w>``), converting between float32 and the
16-bit floats (TileLang's FlashAttention backward postprocess: 2.8 TB/s with element accesses).

Safety is the vector epilogue's (epilogue.py): the group's first column is a multiple of ``w``, and
so are the region's column start and the row length (proven from known divisors, else the
element-wise path), so the vector is aligned and lies wholly inside or wholly outside the row; one
check of the group's first element decides, and a vector outside reads as zeros, as the element
copy's out-of-range elements do."""

from __future__ import annotations

from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.stmt import For, If, Stmt
from ....core_ir.tileops import Copy
from ..analysis import all_of, divisor, range_checks
from ..layout import Fragment, local_map, slot_expr
from ..lir import THREAD, Block, Evaluate, Intrin, PtrTo
from ..nests import region_index, squeezed
from .epilogue import column_runs

#: tensor types ``tlx_ldv`` / ``tlx_cpv`` read, with the types they convert each element to
_CONVERTS = {dtypes.float16.name: (dtypes.float16, dtypes.float32),
             dtypes.bfloat16.name: (dtypes.bfloat16, dtypes.float32),
             dtypes.float32.name: (dtypes.float32, dtypes.float16, dtypes.bfloat16), dtypes.int32.name: (dtypes.int32,)}
_MAX_BYTES = 16


def vector_load_plan(op: Copy, lc: Any) -> tuple[Fragment, int] | None:
    """The loop layout and the vector width for ``op``, or ``None`` (element-wise copy)."""
    src, dst = op.src, op.dst
    to_fragment = dst.buffer.scope == "fragment"
    if src.buffer.scope != "global" or not (to_fragment or dst.buffer.scope == "global"):
        return None
    if src.buffer.strides is not None or dst.buffer.strides is not None:
        return None
    if dst.buffer.dtype not in _CONVERTS.get(src.buffer.dtype.name, ()) or (to_fragment and not dst.is_full()):
        return None
    s_ext, d_ext = [E.as_int(e) for e in squeezed(src)], [E.as_int(e) for e in squeezed(dst)]
    if s_ext != d_ext or any(e is None for e in d_ext) or (to_fragment and len(d_ext) != dst.buffer.ndim):
        return None
    # the tile's columns must run along both tensors' rows
    if E.as_int(src.extents[-1]) == 1 or E.as_int(dst.extents[-1]) == 1:
        return None
    found = column_runs(op, dst.buffer, len(d_ext), lc)
    if found is None:
        return None
    lay, inner = found
    if to_fragment and local_map(lay, list(range(len(lay.dims))), lc.frag(dst.buffer)) is None:
        return None
    tensors = (src,) if to_fragment else (src, dst)
    w = _MAX_BYTES // max(r.buffer.dtype.bytes for r in tensors)
    while w >= 2:
        if not (inner.extent % w or any(divisor(r.starts[-1]) % w
                                        or (r.buffer.ndim > 1 and divisor(r.buffer.shape[-1]) % w) for r in tensors)):
            return lay, w
        w //= 2
    return None


def lower_vector_load(op: Copy, lay: Fragment, w: int, lc: Any) -> Stmt:
    """The copy as one ``tlx_ldv`` (or ``tlx_cpv<w>``) per run of ``w`` columns a thread holds."""
    src, dst = op.src, op.dst
    groups = lay.num_local // w
    g = E.Var(lc.fresh("vg"))
    v: E.Expr = g * w if groups > 1 else E.const(0)
    coords = lay.coords(THREAD, v)
    idx = region_index(src, coords)
    ranges = dict(lc.ranges)
    ranges[g] = (0, max(groups - 1, 0))
    # a vector is wholly in or out of range: its first element decides
    checks = all_of(range_checks(idx, src.buffer.shape, ranges))
    pred = E.const(True) if checks is None else checks
    body: Stmt
    if dst.buffer.scope == "fragment":
        terms = local_map(lay, list(range(len(lay.dims))), lc.frag(dst.buffer))
        assert terms is not None, "vector_load_plan checked the layouts agree"
        local = lc.local_of(dst.buffer)
        outs = [PtrTo(local, (slot_expr(terms, v + j if j else v),), "w") for j in range(w)]
        body = Evaluate(Intrin("tlx_ldv", (PtrTo(src.buffer, idx, "r"), pred, *outs)), op.loc)
    else:
        didx = region_index(dst, coords)
        body = Evaluate(Intrin(f"tlx_cpv<{w}>", (PtrTo(dst.buffer, didx, "w"), PtrTo(src.buffer, idx, "r"), pred)),
                        op.loc)
        inside = all_of(range_checks(didx, dst.buffer.shape, ranges))
        if inside is not None:
            body = If(inside, body, None, op.loc)
        guard = lay.replica_guard(THREAD)
        if guard is not None:
            body = If(guard, body, None, op.loc)
    if groups > 1:
        body = For(g, E.const(groups), "unroll", body, None, (), op.loc)
    return Block(body, "parallel", op.loc)
