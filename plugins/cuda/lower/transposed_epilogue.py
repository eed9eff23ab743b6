"""Staged epilogue of a transposed accumulator store (sm_90a):

    for i, j in T.Parallel(R, C):
        Out[..., y0 + j, x0 + i] = acc[i, j]        # optionally under `if cond(j):`

with ``acc`` a wgmma accumulator (the W @ A^T tile of a dequantizing GEMM whose weights are the
MMA's register operand). Element by element, each thread stores 2-byte values whose neighbours in
``Out`` belong to other lanes (``R * C / threads`` stores a thread, half a sector each). Here each
warp stages its 16 accumulator rows in chunks of 16 × ``chunk`` columns, as the staged epilogue
does, but with ``stmatrix.trans``: the slot holds the chunk as ``Out`` has it (``chunk`` rows of
16 elements, the 16-byte halves of a row XOR-swizzled by row bit 2, so that neither the stmatrix
rows nor the read-back conflict on banks), and every lane stores 16 bytes: two lanes fill one
32-byte sector of a row. ``cond`` (which must not depend on ``i``) and the bounds of ``Out`` guard
each 16-byte store. Taken with the staged epilogue's conditions (``tlx.staged_epilogue``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.simplify import simplify
from ....core_ir.stmt import For, If, Seq, Stmt, Store
from ....core_ir.visit import substitute, walk
from ..analysis import divisor
from ..layout import Fragment
from ..lir import THREAD, Block, Evaluate, Intrin, PtrTo, SmemAddr
from ..nests import loop_starts, nest_info
from .staged_epilogue import CVT, bounds_guard, register_reads, stmatrix_regs, warp_chunks, wgmma_shape


@dataclass(frozen=True)
class TransposedStore:
    acc: Buffer
    lay: Fragment
    out: Buffer
    lead: tuple[E.Expr, ...]  # Out's indices before its last two
    y0: E.Expr
    x0: E.Expr
    j: E.Var
    cond: E.Expr | None
    shape: tuple[int, int, int, int]  # R, C, wgm, wgn
    chunk: int


def transposed_plan(nest: For, lc: Any) -> TransposedStore | None:
    """The plan for ``nest`` when it is a transposed store of a wgmma accumulator, else ``None``."""
    if not lc.staged_epilogue:
        return None
    vars_, exts, body = nest_info(nest)
    if len(vars_) != 2 or any(s is not None for s in loop_starts(nest)):
        return None
    i, j = vars_
    r, c = E.as_int(exts[0]), E.as_int(exts[1])
    cond, st = (body.cond, body.then) if isinstance(body, If) and body.otherwise is None else (None, body)
    if r is None or c is None or not isinstance(st, Store) or (cond is not None and _uses(cond, i)):
        return None
    out, value = st.buffer, st.value
    if isinstance(value, E.Cast) and value.dtype == out.dtype:
        value = value.a
    if out.scope != "global" or out.dtype.name not in CVT or out.strides is not None or out.ndim < 2 \
            or not (isinstance(value, E.Load) and value.buffer.scope == "fragment" and value.dtype.is_float):
        return None
    if len(value.indices) != 2 or value.indices[0] is not i or value.indices[1] is not j:
        return None
    lay = lc.frag(value.buffer)
    shape = wgmma_shape(lay, r, c)
    if shape is None or lay.threads != lc.threads:
        return None
    *lead, row, col = st.indices
    y0, x0 = simplify(row - j), simplify(col - i)
    if any(_uses(e, i) or _uses(e, j) for e in (*lead, y0, x0)):
        return None
    if divisor(x0) % 8 or divisor(out.shape[-1]) % 8:
        return None
    nn = c // shape[1]
    chunk = next((k for k in (64, 32, 16) if nn % k == 0), None)
    if chunk is None or (lay.threads // 32) * 16 * chunk * out.dtype.bytes + 16 > lc.smem_spare - lc.workspace_bytes():
        return None
    return TransposedStore(value.buffer, lay, out, tuple(lead), y0, x0, j, cond, (r, c, *shape), chunk)


def _uses(e: E.Expr, v: E.Var) -> bool:
    return any(n is v for n in walk(e))


def _slot(row: E.Expr, half: E.Expr) -> E.Expr:
    """Element offset of a slot row's 16-byte half (rows of 16 elements; halves swapped in rows 4-7
    of every 8)."""
    return row * 16 + E.binary("^", half, (row // 4) % 2) * 8


def lower_transposed_store(p: TransposedStore, loc: Any, lc: Any) -> Stmt:
    r, c, wgm, wgn = p.shape
    nn, chunk = c // wgn, p.chunk
    reg = register_reads(p.acc, p.lay, lc, loc)
    ws = lc.workspace("epi_stage_t", (p.lay.threads // 32) * 16 * chunk, p.out.dtype, warp_private=True)
    cvt = CVT[p.out.dtype.name]
    lane = THREAD % 32
    mat = lane // 8
    stmts: list[Stmt] = []
    for ch in warp_chunks(r, c, wgm, wgn, chunk, 1):
        stmts.append(Evaluate(Intrin("__syncwarp", ()), loc))  # the slot's previous chunk is stored
        for s in range(chunk // 16):
            row = (2 * s + mat // 2) * 8 + lane % 8  # matrix m's row k: accumulator column 8 * block + k
            addr = SmemAddr(ws, (ch.base + _slot(row, mat % 2),), "w")
            stmts.append(Evaluate(Intrin("tlx_stsm_x4_t", (addr, *stmatrix_regs(reg, cvt, ch, nn, chunk, s))), loc))
        stmts.append(Evaluate(Intrin("__syncwarp", ()), loc))
        for it in range(chunk // 16):
            row, half = lane // 2 + it * 16, lane % 2
            idx = (*p.lead, p.y0 + ch.col0 + row, p.x0 + ch.row0 + half * 8)
            copy = Evaluate(Intrin("tlx_copy16", (PtrTo(p.out, idx, "w"), PtrTo(ws, (ch.base + _slot(row, half),), "r"),
                                                  E.const(True))), loc)
            conds = [c for c in (bounds_guard(idx, p.out.shape, lc), p.cond) if c is not None]
            cond = _all(simplify(substitute(c, {p.j: ch.col0 + row}), lc.ranges) for c in conds)
            stmts.append(copy if cond is None else If(cond, copy, None, loc))
    return Block(Seq(tuple(stmts), loc), "parallel", loc)


def _all(conds: Any) -> E.Expr | None:
    """The conjunction of ``conds``, each once."""
    out: dict[Any, E.Expr] = {}
    for c in conds:
        out.setdefault(c.structural_key(), c)
    terms = list(out.values())
    if not terms:
        return None
    cond = terms[0]
    for c in terms[1:]:
        cond = E.binary("and", cond, c)
    return cond
