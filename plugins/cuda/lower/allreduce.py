"""``ThreadAllreduce`` (TVM's ``T.tvm_thread_allreduce``) as thread-level code, combining in the
order ``core_ir.allreduce`` fixes:

- ``butterfly`` (threadIdx.x, a power of two <= 32): ``__shfl_xor_sync`` with width = extent;
  the mask is the lanes the block has in the caller's warp;
- ``warps`` (threadIdx.x, a power of two > 32): the butterfly over each warp, lane 0 of each
  warp puts its result in a shared workspace, then every thread combines its group's warps;
- ``serial`` (threadIdx.y / z, or an extent that is not a power of two): every thread puts its
  value in a shared workspace, then combines its group's values in thread order.

The shared rounds start with a barrier (the workspace may be shared with an earlier use, see
``LowerCtx.shared_workspace``) and put one between the writes and the reads.
"""

from __future__ import annotations

import math
from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.allreduce import KIND_OPS, WARP, ThreadAllreduce, accumulator_dtype
from ....core_ir.buffer import Buffer
from ....core_ir.errors import BackendNotImplementedError
from ....core_ir.stmt import Alloc, For, If, Seq, Stmt, Store
from ..lir import THREAD, Barrier, Block, Intrin

_FULL = 0xFFFFFFFF


def lower_allreduce(s: ThreadAllreduce, lc: Any, block: tuple[int, ...]) -> Stmt:
    """The lowered form of ``s`` in a block of ``block`` threads (x, y, z), a ``Block``, which sync
    insertion leaves whole."""
    if lc.manual:
        raise BackendNotImplementedError("T.tvm_thread_allreduce in a kernel with T.ws regions or explicit barriers "
                                         "is not supported on CUDA", loc=s.loc)
    acc = accumulator_dtype(s.value.dtype)
    red = Buffer(lc.fresh("allreduce"), (1,), acc, "local", s.loc)
    zero = E.const(0)
    r = E.Load(red, (zero,))
    value = s.value if _always(s.cond) else E.select(s.cond, s.value, s.identity)
    out: list[Stmt] = [Alloc(red, None, s.loc), Store(red, (zero,), E.cast(value, acc), s.loc)]
    order = s.order
    if order == "butterfly":
        out += _butterfly(red, s.kind, s.extent, _lane_mask(lc.threads), s.loc)
    elif order == "warps":
        out += _butterfly(red, s.kind, WARP, E.const(_FULL, dtypes.uint32), s.loc)
        ws = lc.shared_workspace("allreduce_ws", lc.threads // WARP, acc)
        warps = s.extent // WARP
        lane0 = E.binary("==", THREAD % WARP, 0)
        out += [Barrier(s.loc), If(lane0, Store(ws, (THREAD // WARP,), r, s.loc), None, s.loc), Barrier(s.loc)]
        out += _serial(red, s.kind, ws, THREAD // s.extent * warps, 1, warps, lc, s.loc)
    else:
        stride = math.prod(block[:s.dim])
        ws = lc.shared_workspace("allreduce_ws", lc.threads, acc)
        base = THREAD - THREAD // stride % s.extent * stride
        out += [Barrier(s.loc), Store(ws, (THREAD,), r, s.loc), Barrier(s.loc)]
        out += _serial(red, s.kind, ws, base, stride, s.extent, lc, s.loc)
    out.append(Store(s.out, s.index, E.cast(r, s.out.dtype), s.loc))
    return Block(Seq(tuple(out), s.loc), "allreduce", s.loc)


def _always(cond: E.Expr) -> bool:
    return isinstance(cond, E.Const) and bool(cond.value)


def _combine(kind: str, a: E.Expr, b: E.Expr) -> E.Expr:
    return E.binary(KIND_OPS[kind], a, b)


def _lane_mask(threads: int) -> E.Expr:
    """The lanes of the caller's warp that the block has (all but in a last, partial warp)."""
    full = E.const(_FULL, dtypes.uint32)
    if threads % WARP == 0:
        return full
    part = E.const((1 << threads % WARP) - 1, dtypes.uint32)
    if threads < WARP:
        return part
    return E.select(E.binary("==", THREAD // WARP, threads // WARP), part, full)


def _butterfly(red: Buffer, kind: str, width: int, mask: E.Expr, loc: Any) -> list[Stmt]:
    """``red[0] = red[0] op shfl_xor(red[0], m, width)`` for m = width / 2, ..., 1."""
    zero = E.const(0)
    r = E.Load(red, (zero,))
    out: list[Stmt] = []
    m = width // 2
    while m:
        other = Intrin("__shfl_xor_sync", (mask, r, E.const(m), E.const(width)), red.dtype)
        out.append(Store(red, (zero,), _combine(kind, r, other), loc))
        m //= 2
    return out


def _serial(red: Buffer, kind: str, ws: Buffer, base: E.Expr, stride: int, count: int, lc: Any,
            loc: Any) -> list[Stmt]:
    """``red[0] = ws[base]``, then ``red[0] = red[0] op ws[base + i * stride]`` for i = 1 .. count - 1."""
    zero = E.const(0)
    r = E.Load(red, (zero,))
    i = E.Var(lc.fresh("i"))
    step = Store(red, (zero,), _combine(kind, r, E.Load(ws, (base + (i + 1) * stride,))), loc)
    out: list[Stmt] = [Store(red, (zero,), E.Load(ws, (base,)), loc)]
    if count > 1:
        out.append(For(i, E.const(count - 1), "unroll", step, None, (), loc))
    return out
