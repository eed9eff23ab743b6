"""T.reduce_sum/max/min/abssum/absmax/bitand/bitor/bitxor over one dim of a fragment: in-thread over the register
slots that hold the dim, then warp shuffles (xor) over the dim's thread digits inside a warp,
then a shared-memory round for digits across warps (or of odd extent)."""

from __future__ import annotations

import math
from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.errors import LayoutError
from ....core_ir.stmt import Alloc, For, Seq, Stmt, Store
from ....core_ir.tileops import Reduce, identity
from ..layout import local_map, reduce_dims, slot_expr
from ..lir import THREAD, Barrier, Intrin

_BIT_OPS = {"bitand": "&", "bitor": "|", "bitxor": "^"}


def combine(kind: str, a: E.Expr, b: E.Expr) -> E.Expr:
    if kind in ("sum", "abssum"):
        return a + b
    if kind in _BIT_OPS:
        return E.binary(_BIT_OPS[kind], a, b)
    if kind in ("max", "absmax"):
        return E.binary("max", a, b)
    return E.binary("min", a, b)


def shfl_fn(dt: dtypes.DType) -> str:
    if dt == dtypes.float32:
        return "tlx_shfl_xor"
    if dt == dtypes.float64:
        return "tlx_shfl_xor_d"
    if dt.bits == 64:
        return "tlx_shfl_xor_l"
    return "tlx_shfl_xor_i"


def lower_reduce(op: Reduce, lc: Any) -> Stmt:
    src, dst = op.src.buffer, op.dst.buffer
    if src.scope != "fragment" or dst.scope != "fragment":
        raise LayoutError(f"T.reduce_{op.kind} on CUDA needs fragment source and destination "
                          f"(got {src.scope} `{src.name}` -> {dst.scope} `{dst.name}`)", loc=op.loc,
                          hint="T.copy the shared tile into a fragment first")
    ls, ld = lc.frag(src), lc.frag(dst)
    keep = reduce_dims(ls.shape, op.dim, ld.shape)
    terms = None if keep is None else local_map(ls, keep, ld)
    if terms is None:
        raise LayoutError(f"T.reduce_{op.kind}: `{dst.name}` ({ld.describe()}) is not laid out as the rows of "
                          f"`{src.name}` ({ls.describe()})", loc=op.loc)
    s_loc, d_loc = lc.local_of(src), lc.local_of(dst)
    acc_t = dtypes.float32 if dst.dtype.is_float and dst.dtype.bits < 32 else dst.dtype
    red = Buffer(lc.fresh("red"), (ld.num_local,), acc_t, "local")
    u = E.Var(lc.fresh("u"))
    v = E.Var(lc.fresh("v"))
    out: list[Stmt] = [Alloc(red), For(u, E.const(ld.num_local), "unroll", Store(red, (u,), identity(op.kind, acc_t)))]
    x: E.Expr = E.cast(E.Load(s_loc, (v,)), acc_t)
    if op.kind in ("abssum", "absmax"):
        x = E.call("abs", x)
    slot = slot_expr(terms, v)
    out.append(For(v, E.const(ls.num_local), "unroll",
                   Store(red, (slot,), combine(op.kind, E.Load(red, (slot,)), x))))
    ru = E.Load(red, (u,))
    for d in sorted(ls.dims[op.dim], key=lambda d: d.stride):
        if d.kind != "T" or d.extent == 1:
            continue
        pow2 = d.extent & (d.extent - 1) == 0
        if d.stride * d.extent <= 32 and pow2:
            for s in range(int(math.log2(d.extent))):
                off = d.stride << s
                other = Intrin(shfl_fn(acc_t), (ru, E.const(off)), acc_t)
                out.append(For(u, E.const(ld.num_local), "unroll", Store(red, (u,), combine(op.kind, ru, other))))
        else:
            out.extend(_through_smem(op.kind, red, ld.num_local, d.extent, d.stride, lc, acc_t))
    final = ru if op.clear else combine(op.kind, E.cast(E.Load(d_loc, (u,)), acc_t), ru)
    out.append(For(u, E.const(ld.num_local), "unroll", Store(d_loc, (u,), E.cast(final, dst.dtype))))
    return Seq(tuple(out))


def _through_smem(kind: str, red: Buffer, n: int, extent: int, stride: int, lc: Any, dt: dtypes.DType) -> list[Stmt]:
    t = lc.threads
    ws = lc.shared_workspace("red_ws", n * t, dt)  # reused: the barrier below orders the last use's reads
    u = E.Var(lc.fresh("u"))
    k = E.Var(lc.fresh("k"))
    acc = Buffer(lc.fresh("acc"), (1,), dt, "local")
    base = THREAD - ((THREAD // stride) % extent) * stride
    zero = E.const(0)
    return [
        Barrier(),
        For(u, E.const(n), "unroll", Store(ws, (u * t + THREAD,), E.Load(red, (u,)))),
        Barrier(),
        For(u, E.const(n), "unroll", Seq((
            Alloc(acc, None),
            Store(acc, (zero,), identity(kind, dt)),
            For(k, E.const(extent), "unroll",
                Store(acc, (zero,), combine(kind, E.Load(acc, (zero,)), E.Load(ws, (u * t + base + k * stride,))))),
            Store(red, (u,), E.Load(acc, (zero,))),
        ))),
    ]
