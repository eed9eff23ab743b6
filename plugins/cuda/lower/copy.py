"""T.copy. Global → shared (and shared → shared) copies move 16/8/4-byte vectors per thread,
asynchronously with cp.async inside a pipeline (zero-fill for out-of-range rows), with plain
vector loads otherwise; alignment is proven from known divisors, bounds checks are kept only
where they cannot be proven. Global → fragment copies load a thread's adjacent columns as vectors
(vector_load.py), fragment → global ones store them so (epilogue.py). Every other copy is an
element-wise nest over the fragment's layout (``nests.copy_nest``)."""

from __future__ import annotations

from typing import Any

from ....core_ir import expr as E
from ....core_ir.buffer import Region
from ....core_ir.stmt import For, If, Stmt
from ....core_ir.tileops import Copy
from ..analysis import divisor, prove_lt, range_checks
from ..layout_inference import uses_copy_nest
from ..lir import THREAD, Evaluate, Intrin, PtrTo, SmemAddr
from ..nests import copy_nest, region_index
from .epilogue import lower_vector_store, vector_store_plan
from .parallel import lower_nest
from .staged_epilogue import lower_staged_store, staged_plan
from .vector_load import lower_vector_load, vector_load_plan


def lower_copy(op: Copy, lc: Any) -> Stmt:
    from .private import lower_private, writes_private

    if writes_private(op):  # every thread fills its own copy of a local buffer
        return lower_private(op, lc)
    if not uses_copy_nest(op):
        vec = _vector_plan(op, lc)
        if vec is not None:
            return _vector_copy(op, vec, lc)
    if lc.vector_loads:
        loads = vector_load_plan(op, lc)
        if loads is not None:
            return lower_vector_load(op, *loads, lc)
    staged = staged_plan(op, lc)
    if staged is not None:
        return lower_staged_store(op, *staged, lc)
    if lc.vector_epilogue:
        plan = vector_store_plan(op, lc)
        if plan is not None:
            return lower_vector_store(op, plan[0], plan[1], lc)
    entry = lc.loops.get(id(op))
    if entry is not None:
        return lower_nest(entry[1], entry[0], lc)
    lay = None
    for r in (op.dst, op.src):
        if r.buffer.scope == "fragment" and r.is_full():
            lay = lc.frag(r.buffer)
            break
    return lower_nest(copy_nest(op), lay, lc)


def _tile_dims(r: Region) -> list[int]:
    return [d for d, e in enumerate(r.extents) if E.as_int(e) != 1]


def _vector_plan(op: Copy, lc: Any) -> int | None:
    """Elements per vector access (16, 8 or 4 bytes), or ``None`` for the element-wise path."""
    src, dst = op.src, op.dst
    if src.buffer.dtype != dst.buffer.dtype or src.buffer.strides is not None or dst.buffer.strides is not None:
        return None
    sd, dd = _tile_dims(src), _tile_dims(dst)
    if not sd or len(sd) != len(dd) or sd[-1] != src.buffer.ndim - 1 or dd[-1] != dst.buffer.ndim - 1:
        return None
    eb = src.buffer.dtype.bytes
    inner = E.as_int(src.extents[-1])
    if inner is None:
        return None
    for nbytes in (16, 8, 4):
        vec = nbytes // eb
        if vec < 1 or nbytes % eb or inner % vec:
            continue
        if divisor(src.starts[-1]) % vec or divisor(dst.starts[-1]) % vec:
            continue
        if src.buffer.ndim > 1 and divisor(src.buffer.shape[-1]) % vec:
            continue
        if dst.buffer.ndim > 1 and divisor(dst.buffer.shape[-1]) % vec:
            continue
        # a vector must be wholly in or out of range along the last dim
        if any(r.buffer.scope == "global" and divisor(r.buffer.shape[-1]) % vec
               and not prove_lt(r.starts[-1] + (inner - 1), r.buffer.shape[-1], lc.ranges) for r in (src, dst)):
            continue
        return vec
    return None


def _vector_copy(op: Copy, vec: int, lc: Any) -> Stmt:
    src, dst = op.src, op.dst
    shape = [E.as_int(src.extents[d]) for d in _tile_dims(src)]
    if any(s is None for s in shape):
        return lower_nest(copy_nest(op), None, lc)
    shape[-1] //= vec  # type: ignore[operator]
    total = 1
    for s in shape:
        total *= s  # type: ignore[operator]
    threads = lc.threads
    iters = (total + threads - 1) // threads
    it = E.Var(lc.fresh("c"))
    flat = it * threads + THREAD if iters > 1 else THREAD
    coords = _split_flat(it, iters, threads, shape)  # type: ignore[arg-type]
    coords[-1] = coords[-1] * vec
    sidx = region_index(src, coords)
    didx = region_index(dst, coords)
    ranges = dict(lc.ranges)
    ranges[it] = (0, iters - 1)
    # a vector is wholly in or out of range: its first element decides (the start is a multiple of
    # the vector, see `_vector_plan`); out-of-range source vectors read as zero, destination ones
    # are not written
    pred: E.Expr = E.const(True)
    if src.buffer.scope == "global":
        for c in range_checks(sidx, src.buffer.shape, ranges):
            pred = E.binary("and", pred, c)
    store_pred: E.Expr = E.const(True)
    if dst.buffer.scope == "global":
        for c in range_checks(didx, dst.buffer.shape, ranges):
            store_pred = E.binary("and", store_pred, c)
    is_async = dict(op.annotations).get("async", False) and src.buffer.scope == "global"
    nbytes = vec * src.buffer.dtype.bytes
    if is_async:
        dst_addr = SmemAddr(dst.buffer, didx, "async")
        call = Intrin(f"tlx_cp_async{nbytes}", (dst_addr, PtrTo(src.buffer, sidx, "r"), pred))
    else:
        call = Intrin(f"tlx_copy{nbytes}", (PtrTo(dst.buffer, didx, "w"), PtrTo(src.buffer, sidx, "r"), pred))
    body: Stmt = Evaluate(call, op.loc)
    if not (isinstance(store_pred, E.Const) and store_pred.value):
        body = If(store_pred, body, None, op.loc)
    if total % threads:
        body = If(E.binary("<", flat, total), body, None, op.loc)
    if iters == 1:
        return body
    return For(it, E.const(iters), "unroll", body, None, (), op.loc)


def _split_flat(it: E.Var, iters: int, threads: int, shape: list[int]) -> list[E.Expr]:
    """Tile coordinates of vector ``it * threads + tx`` (row-major ``shape``). While ``threads``
    is a multiple of the inner extents, those digits come from ``tx`` alone, so the per-iteration
    part of each coordinate is a constant offset (no division inside the unrolled copy)."""
    rev: list[E.Expr] = []
    tx_part: E.Expr = THREAD
    scale = threads  # flat = it * scale + tx_part, 0 <= tx_part < scale
    n = 0
    while iters > 1 and n < len(shape) - 1 and scale % shape[-1 - n] == 0:
        s = shape[-1 - n]
        rev.append(tx_part % s)
        tx_part = tx_part // s
        scale //= s
        n += 1
    if iters <= 1:
        rest: E.Expr = THREAD
    elif scale == 1:
        rest = it  # tx_part is 0 here
    else:
        rest = it * scale + tx_part
    for m in range(n, len(shape)):
        s = shape[-1 - m]
        rev.append(rest % s if m < len(shape) - 1 else rest)
        rest = rest // s
    return list(reversed(rev))


__all__ = ["lower_copy", "For"]
