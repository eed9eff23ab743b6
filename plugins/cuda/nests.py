"""Element-wise tile ops (copy, fill, atomic over a region) as ``T.Parallel`` nests.

Layout inference and lowering both see these ops as the loop nest they stand for, so one set of
rules (thread mapping from the fragments involved) serves parallel loops and tile ops alike.
Out-of-range global elements read as zero and are not written (the interpreter's semantics).
"""

from __future__ import annotations

from collections.abc import Iterable

from ...core_ir import expr as E
from ...core_ir.buffer import Buffer, Region
from ...core_ir.stmt import For, If, Seq, Stmt, Store
from ...core_ir.tileops import Atomic, Copy, Fill
from .analysis import index_nonneg
from .lir import AtomicStore


def nest_info(loop: For) -> tuple[list[E.Var], list[E.Expr], Stmt]:
    """The variables, extents and innermost body of a perfect nest of parallel loops."""
    vars_, exts = [], []
    s: Stmt = loop
    while isinstance(s, For) and s.kind == "parallel":
        vars_.append(s.var)
        exts.append(s.extent if s.start is None else s.extent)
        s = s.body
        if isinstance(s, Seq) and len(s.stmts) == 1 and isinstance(s.stmts[0], For):
            s = s.stmts[0]
    return vars_, exts, s


def loop_starts(loop: For) -> list[E.Expr | None]:
    out = []
    s: Stmt = loop
    while isinstance(s, For) and s.kind == "parallel":
        out.append(s.start)
        s = s.body
        if isinstance(s, Seq) and len(s.stmts) == 1 and isinstance(s.stmts[0], For):
            s = s.stmts[0]
    return out


def region_index(r: Region, coords: Iterable[E.Expr]) -> tuple[E.Expr, ...]:
    """Indices into ``r``'s buffer of the element at ``coords`` of its squeezed shape (one
    coordinate per dimension of extent other than 1; unit dimensions take their start)."""
    out = []
    it = iter(coords)
    for start, ext in zip(r.starts, r.extents):
        if E.as_int(ext) == 1:
            out.append(start)
        else:
            c = next(it)
            out.append(c if E.as_int(start) == 0 else start + c)
    return tuple(out)


def in_bounds(buf: Buffer, idx: tuple[E.Expr, ...], r: Region, loop_vars: list[E.Var]) -> E.Expr | None:
    """The bounds condition for a global access (``None`` when none is needed symbolically;
    the lowering drops conditions it can prove)."""
    if buf.scope != "global":
        return None
    cond: E.Expr | None = None
    for i, start, dim in zip(idx, r.starts, buf.shape):
        if E.as_int(start) == 0 and i in loop_vars and E.as_int(dim) is not None:
            continue  # the region starts at 0 and the loop extent equals the tile; checked in check
        # a start read from memory may lie before the tensor (the lowering drops what it proves)
        checks = [E.binary("<", i, dim)] if index_nonneg(i, {}) else [E.binary("<=", E.const(0, i.dtype), i),
                                                                     E.binary("<", i, dim)]
        for c in checks:
            cond = c if cond is None else E.binary("and", cond, c)
    return cond


def squeezed(r: Region) -> list[E.Expr]:
    return [e for e in r.extents if E.as_int(e) != 1]


def _mk_nest(vars_: list[E.Var], exts: list[E.Expr], body: Stmt, loc: object) -> For:
    s = body
    for v, e in reversed(list(zip(vars_, exts))):
        s = For(v, e, "parallel", s, None, (), loc)  # type: ignore[arg-type]
    return s  # type: ignore[return-value]


def copy_nest(op: Copy) -> For:
    shape = squeezed(op.dst) or squeezed(op.src) or [E.const(1)]
    vars_ = [E.Var(f"i{n}") for n in range(len(shape))]
    src_vars = vars_ if squeezed(op.src) else []
    dst_vars = vars_ if squeezed(op.dst) else []
    si = region_index(op.src, src_vars)
    di = region_index(op.dst, dst_vars)
    value: E.Expr = E.cast(E.Load(op.src.buffer, si, op.loc), op.dst.buffer.dtype)
    sc = in_bounds(op.src.buffer, si, op.src, [])
    if sc is not None:
        value = E.select(sc, value, E.cast(E.const(0), op.dst.buffer.dtype))
    body: Stmt = Store(op.dst.buffer, di, value, op.loc)
    dc = in_bounds(op.dst.buffer, di, op.dst, [])
    if dc is not None:
        body = If(dc, body, None, op.loc)
    return _mk_nest(vars_, shape, body, op.loc)


def fill_nest(op: Fill) -> For:
    shape = squeezed(op.dst) or [E.const(1)]
    vars_ = [E.Var(f"i{n}") for n in range(len(shape))]
    di = region_index(op.dst, vars_ if squeezed(op.dst) else [])
    body: Stmt = Store(op.dst.buffer, di, E.cast(op.value, op.dst.buffer.dtype), op.loc)
    dc = in_bounds(op.dst.buffer, di, op.dst, [])
    if dc is not None:
        body = If(dc, body, None, op.loc)
    return _mk_nest(vars_, shape, body, op.loc)


def element_atomic(op: Atomic, indices: tuple[E.Expr, ...], value: E.Expr) -> AtomicStore:
    """``op`` on the one element ``indices`` of its destination."""
    return AtomicStore(op.kind, op.dst.buffer, indices, E.cast(value, op.dst.buffer.dtype), op.order, op.loc)


def atomic_nest(op: Atomic) -> For | None:
    """Region form only (``value`` a region); the scalar form is a single ``AtomicStore``."""
    if not isinstance(op.value, Region):
        return None
    shape = squeezed(op.dst) or [E.const(1)]
    vars_ = [E.Var(f"i{n}") for n in range(len(shape))]
    di = region_index(op.dst, vars_ if squeezed(op.dst) else [])
    vi = region_index(op.value, vars_ if squeezed(op.value) else [])
    body: Stmt = element_atomic(op, di, E.Load(op.value.buffer, vi, op.loc))
    dc = in_bounds(op.dst.buffer, di, op.dst, [])
    if dc is not None:
        body = If(dc, body, None, op.loc)
    return _mk_nest(vars_, shape, body, op.loc)
