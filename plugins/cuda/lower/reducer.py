"""``T.alloc_reducer`` on CUDA. Every thread holds a private copy of the whole reducer (a local
array of at most ``MAX_ELEMENTS`` elements, which the compiler keeps in registers when the updates
index it by constants):

- opening a reduction fills thread 0's copy with the initial value and every other copy with the
  identity of the op, so the initial value is combined exactly once;
- an update inside ``T.Parallel`` combines the contribution into the copy of the thread that runs
  the iteration (an iteration that several threads run, under a replicated layout, counts once:
  it is guarded like a store to global memory, ``parallel.guard_effects``);
- finalizing combines the copies of all the block's threads, element by element: butterfly
  shuffles inside each warp (so every lane holds its warp's total), then one total per warp
  through shared memory, after which every thread's copy holds the result. With a destination,
  the result is then copied there like ``T.copy``.
"""

from __future__ import annotations

import math
from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.errors import BackendNotImplementedError
from ....core_ir.source import SourceLoc
from ....core_ir.stmt import Alloc, For, If, Seq, Stmt, Store
from ....core_ir.tileops import FinalizeReducer, ReducerInit, ReducerUpdate, identity
from ....core_ir.visit import rewrite
from ..lir import THREAD, Barrier, Block, Intrin
from .reduce import combine, shfl_fn

#: the largest reducer (elements) a thread keeps a copy of
MAX_ELEMENTS = 256


def _elements(buf: Buffer, loc: SourceLoc | None) -> int:
    shape = buf.static_shape()
    if shape is None or math.prod(shape) > MAX_ELEMENTS:
        size = "a symbolic shape" if shape is None else f"{math.prod(shape)} elements"
        raise BackendNotImplementedError(
            f"reducer `{buf.name}` has {size}: on CUDA every thread holds a copy of the whole reducer, which must "
            f"have a constant shape of at most {MAX_ELEMENTS} elements", loc=loc,
            hint="reduce a smaller tile per block (split the reduction over more blocks or loop iterations), or "
            "write the partial results into a fragment and use T.reduce_sum / T.reduce_max")
    return math.prod(shape)


def _index(buf: Buffer, u: E.Expr) -> tuple[E.Expr, ...]:
    """The indices of element ``u`` of ``buf`` in row-major order."""
    shape = buf.static_shape()
    assert shape is not None
    out: list[E.Expr] = []
    rest = u
    for k in reversed(range(len(shape))):
        out.append(rest % shape[k] if k else rest)
        rest = rest // shape[k]
    return tuple(reversed(out))


def _each(n: int, lc: Any, body: Any) -> For:
    """``for u in unroll(n): body(u)``."""
    u = E.Var(lc.fresh("u"))
    return For(u, E.const(n), "unroll", body(u))


def lower_reducer_init(op: ReducerInit, lc: Any) -> Stmt:
    buf = op.dst.buffer
    n = _elements(buf, op.loc)
    zero = identity(op.kind, buf.dtype)
    value = op.value if op.value.same_as(zero) else E.select(E.binary("==", THREAD, 0), op.value, zero)
    return Block(_each(n, lc, lambda u: Store(buf, _index(buf, u), value)), "reducer_init", op.loc)


def update_stores(body: Stmt) -> Stmt:
    """The ``ReducerUpdate``s of a lowered ``T.Parallel`` body as stores into the thread's copy."""

    def fn(n: Any) -> Any:
        if isinstance(n, ReducerUpdate):
            buf, idx = n.dst.buffer, n.dst.starts
            return Store(buf, idx, E.cast(combine(n.kind, E.Load(buf, idx), n.value), buf.dtype), n.loc)
        return None

    return rewrite(body, fn)


def lower_finalize(op: FinalizeReducer, lc: Any) -> Stmt:
    buf = op.src.buffer
    n = _elements(buf, op.loc)
    threads = lc.threads
    lanes = min(threads, 32)
    if lanes & (lanes - 1) or threads % lanes:
        raise BackendNotImplementedError(
            f"T.finalize_reducer({buf.name}) on CUDA needs a block of a power of two threads up to 32, or a "
            f"multiple of 32, not {threads}", loc=op.loc, hint="change threads= of T.Kernel")
    acc_t = dtypes.float32 if buf.dtype.is_float and buf.dtype.bits < 32 else buf.dtype
    red = Buffer(lc.fresh("red"), (n,), acc_t, "local")
    out: list[Stmt] = [Alloc(red), _each(n, lc, lambda u: Store(red, (u,), E.cast(E.Load(buf, _index(buf, u)),
                                                                                            acc_t)))]
    for s in range(int(math.log2(lanes))):
        def butterfly(u: E.Expr, off: int = 1 << s) -> Stmt:
            mine = E.Load(red, (u,))
            return Store(red, (u,), combine(op.kind, mine, Intrin(shfl_fn(acc_t), (mine, E.const(off)), acc_t)))

        out.append(_each(n, lc, butterfly))
    if threads > 32:
        out += _across_warps(op.kind, red, n, threads // 32, lc, acc_t)
    out.append(_each(n, lc, lambda u: Store(buf, _index(buf, u), E.cast(E.Load(red, (u,)), buf.dtype))))
    if op.dst is not None:
        from .parallel import lower_nest

        entry = lc.loops[id(op)]
        out.append(lower_nest(entry[1], entry[0], lc))
    return Block(Seq(tuple(out)), "finalize_reducer", op.loc)


def _across_warps(kind: str, red: Buffer, n: int, warps: int, lc: Any, dt: dtypes.DType) -> list[Stmt]:
    """Every warp's lane 0 publishes the warp's totals; every thread combines the ``warps`` totals."""
    ws = lc.workspace("rdc_ws", n * warps, dt)
    k = E.Var(lc.fresh("k"))

    def total(u: E.Expr) -> Stmt:
        return Seq((Store(red, (u,), identity(kind, dt)),
                    For(k, E.const(warps), "unroll",
                        Store(red, (u,), combine(kind, E.Load(red, (u,)), E.Load(ws, (u * warps + k,)))))))

    publish = _each(n, lc, lambda u: Store(ws, (u * warps + THREAD // 32,), E.Load(red, (u,))))
    return [Barrier(), If(E.binary("==", THREAD % 32, 0), publish), Barrier(), _each(n, lc, total)]
