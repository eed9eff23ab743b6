"""T.cumsum (inclusive prefix sum along one dim) and T.cummax (running maximum, a NaN carrying on
as in the interpreter). Shared tiles: one thread per line, scanning serially; fragments go
through a shared staging tile (fragment -> shared, scan, shared -> fragment)."""

from __future__ import annotations

from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Buffer, Region
from ....core_ir.errors import LayoutError
from ....core_ir.stmt import Alloc, For, If, Seq, Stmt, Store
from ....core_ir.tileops import Copy, CumSum
from ..lir import THREAD, Barrier, Block
from .reduce import identity


def lower_cumsum(op: CumSum, lc: Any) -> Stmt:
    src, dst = op.src, op.dst
    if not src.is_full() or not dst.is_full():
        raise LayoutError(f"T.cum{op.kind} on CUDA needs whole buffers as source and destination", loc=op.loc)
    shape = src.buffer.static_shape()
    if shape is None:
        raise LayoutError(f"T.cum{op.kind} needs a constant tile shape on CUDA", loc=op.loc)
    if src.buffer.scope == "shared" and dst.buffer.scope == "shared":
        return _scan(src.buffer, dst.buffer, shape, op, lc)
    if src.buffer.scope in ("shared", "fragment") and dst.buffer.scope in ("shared", "fragment"):
        from .copy import lower_copy

        stage = lc.workspace("scan", 1, src.buffer.dtype)
        stage = Buffer(stage.name, tuple(shape), src.buffer.dtype, "shared")
        lc.workspaces[-1] = stage
        lc.layouts[stage] = _linear(shape, src.buffer.dtype)
        parts: list[Stmt] = []
        if src.buffer.scope == "fragment":
            parts += [Block(lower_copy(Copy(src, Region.full(stage), (), op.loc), lc), "copy"), Barrier()]
            scan_src = stage
        else:
            scan_src = src.buffer
        scan_dst = stage if dst.buffer.scope == "fragment" else dst.buffer
        parts.append(_scan(scan_src, scan_dst, shape, op, lc))
        if dst.buffer.scope == "fragment":
            parts += [Barrier(), Block(lower_copy(Copy(Region.full(stage), dst, (), op.loc), lc), "copy")]
        return Seq(tuple(parts))
    raise LayoutError(f"T.cum{op.kind} from {src.buffer.scope} to {dst.buffer.scope} is not supported on CUDA",
                      loc=op.loc)


def _linear(shape: list[int] | tuple[int, ...], dt: dtypes.DType) -> Any:
    from ..layout import SharedLayout

    return SharedLayout(tuple(shape), dt.bytes, "none")


def _scan(src: Buffer, dst: Buffer, shape: tuple[int, ...] | list[int], op: CumSum, lc: Any) -> Stmt:
    dim = op.dim
    others = [d for d in range(len(shape)) if d != dim]
    lines = 1
    for d in others:
        lines *= shape[d]
    length = shape[dim]
    t = lc.threads
    it = E.Var(lc.fresh("line"))
    j = E.Var(lc.fresh("j"))
    line = it * t + THREAD
    idx: list[E.Expr] = [E.const(0)] * len(shape)
    rest = line
    for n, d in enumerate(reversed(others)):
        idx[d] = rest % shape[d] if n < len(others) - 1 else rest
        rest = rest // shape[d]
    pos = (length - 1 - j) if op.reverse else j
    idx[dim] = pos
    acc_t = dtypes.float32 if src.dtype.is_float and src.dtype.bits < 32 else src.dtype
    acc = Buffer(lc.fresh("run"), (1,), acc_t, "local")
    zero = E.const(0)
    run, x = E.Load(acc, (zero,)), E.cast(E.Load(src, tuple(idx)), acc_t)
    if op.kind == "sum":
        start, combined = E.cast(zero, acc_t), run + x
    else:  # x replaces the running maximum when larger, or NaN (x != x)
        start = identity("max", acc_t)
        larger = E.binary(">", x, run)
        combined = E.select(E.binary("or", larger, E.binary("!=", x, x)) if acc_t.is_float else larger, x, run)
    step = Seq((Store(acc, (zero,), combined), Store(dst, tuple(idx), E.cast(run, dst.dtype))))
    body = Seq((Alloc(acc), Store(acc, (zero,), start), For(j, E.const(length), "serial", step)))
    iters = (lines + t - 1) // t
    return For(it, E.const(iters), "serial", If(E.binary("<", line, lines), body))
