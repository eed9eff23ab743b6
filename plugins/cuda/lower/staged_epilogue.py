"""Staged epilogue for wgmma accumulators (sm_90a): fragment → global fp16/bf16 copies go through
shared memory so that global stores are 16-byte and coalesced.

Each warp owns 16 rows of its warpgroup's accumulator (per 64-row block ``mi``) and all the
warpgroup's columns. It walks them in chunks of 16 rows × ``C`` columns (``C`` = 64, 32 or 16):

1. ``stmatrix.x4`` of the converted pairs into the warp's own ``16 × C`` staging slot: matrix
   ``i`` of one x4 is the 8×8 block (``h = i & 1``, column block ``2s + (i >> 1)``); register ``i``
   of lane ``l`` holds row ``l/4``, columns ``2(l%4)``, ``+1`` — exactly the accumulator pair of
   slot (``h``, ``ni``) of that lane (backends.md A2, A6). Rows are XOR-swizzled by 16-byte chunk
   (``chunk ^ f(row)``, the PanelLayout formula), so both the stmatrix rows and the read-back are
   free of bank conflicts.
2. ``__syncwarp()``; every lane loads 16 bytes (8 columns of one row) and stores them to global
   with one 16-byte store, guarded by ``row < M`` and ``col < N`` (``col`` and the row length are
   multiples of 8, so a vector is wholly in or out of range).
3. ``__syncwarp()`` before the next chunk overwrites the slot.

Steps 2 and 3 become one TMA store per chunk, issued by lane 0 (``lower/tma_store.py``), when the
destination qualifies; each warp then has two slots when shared memory allows.

The staging buffer is a dedicated workspace (warps × 16 × C elements, 16 KB for 8 warps and
C = 64; twice that with two slots), so it overlaps no live data, and only the owning warp touches
its slot: no block or named barrier is needed (warp-specialized producers and the other
warpgroup's wgmma are not involved), and sync insertion is told so (``LowerCtx.warp_private``:
in a persistent kernel it would otherwise see one tile's epilogue write the slots the previous
tile's read, and put a barrier of all consumers before every epilogue). In a persistent kernel
the epilogue runs once per tile; with TMA stores, each tile's stores stay in flight while the next
tile computes, and its first chunk waits for them (``wait_group.read 0``) before writing a slot
(``tlx.defer_store_drain``). Taken only for the exact wgmma accumulator layout, no replication,
sm_90a, and when the workspace fits the shared memory limit. Switch: pass config
``tlx.staged_epilogue`` (default on)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.stmt import If, Seq, Stmt
from ....core_ir.tileops import Copy
from ..analysis import all_of, divisor, range_checks
from ..hopper.layout import wgmma_c_fragment
from ..layout import Fragment, local_map, slot_expr
from ..lir import THREAD, U32, Block, Evaluate, Intrin, PtrTo, SmemAddr
from ..nests import region_index, squeezed
from .epilogue import vector_store_plan
from .tma_store import TmaStore, drain, issue, reuse_wait, store_map, tile_wait, tma_store_plan

CVT = {dtypes.float16.name: "tlx_cvt_h2", dtypes.bfloat16.name: "tlx_cvt_b2"}


def wgmma_shape(lay: Fragment, m: int, n: int) -> tuple[int, int] | None:
    """(wgm, wgn) when ``lay`` is exactly the wgmma accumulator of an m × n tile."""
    if lay.rep or lay.threads % 128:
        return None
    wgs = lay.threads // 128
    for wgm in range(1, wgs + 1):
        if wgs % wgm:
            continue
        wgn = wgs // wgm
        if m % (64 * wgm) or n % (8 * wgn) or (n // wgn) % 16:
            continue
        ref = wgmma_c_fragment(m, n, wgm, wgn)
        if ref.dims == lay.dims and ref.threads == lay.threads:
            return wgm, wgn
    return None


def staged_plan(op: Copy, lc: Any) -> tuple[Fragment, int, int, int, TmaStore | None] | None:
    """(loop layout, wgm, wgn, chunk columns C, TMA store) for ``op``, or ``None`` (use the other
    paths)."""
    if not lc.staged_epilogue:
        return None
    dst = op.dst
    if dst.buffer.scope != "global" or dst.buffer.dtype.name not in CVT:
        return None
    if dst.buffer.ndim < 2 or op.src.buffer.ndim != 2:
        return None
    acc = wgmma_accumulator(op, lc)
    if acc is None:
        return None
    lay, wgm, wgn = acc
    if divisor(dst.starts[-1]) % 8 or divisor(dst.buffer.shape[-1]) % 8:
        return None
    m, n = (E.as_int(e) for e in squeezed(op.src))
    assert m is not None and n is not None
    nn = n // wgn
    chunk = next(c for c in (64, 32, 16) if nn % c == 0)
    warps, spare = lay.threads // 32, lc.smem_spare - lc.workspace_bytes()
    tma = tma_store_plan(op, chunk, m // (64 * wgm) * (nn // chunk), warps, spare, lc)
    if tma is None and warps * 16 * chunk * 2 + 16 > spare:
        return None
    return lay, wgm, wgn, chunk, tma


def wgmma_accumulator(op: Copy, lc: Any) -> tuple[Fragment, int, int] | None:
    """(loop layout, wgm, wgn) when fragment → global copy ``op`` (or an add of the same elements)
    reads exactly a wgmma accumulator of the block's threads, else ``None``."""
    plan = vector_store_plan(op, lc)
    if plan is None:
        return None
    lay = plan[0]
    m, n = (E.as_int(e) for e in squeezed(op.src))
    assert m is not None and n is not None
    shape = wgmma_shape(lay, m, n)
    if shape is None or lay.threads != lc.threads:
        return None
    return lay, *shape


@dataclass(frozen=True)
class WarpChunk:
    """One 16-row chunk a warp stages: its place in the walk, its slot's first element in the
    workspace, its 64-row block and column chunk, and its first row and column in the tile."""

    index: int
    base: E.Expr
    mb: int
    cc: int
    row0: E.Expr
    col0: E.Expr


def warp_chunks(m: int, n: int, wgm: int, wgn: int, chunk: int, slots: int) -> list[WarpChunk]:
    """The ``16 × chunk`` chunks each warp of an ``m × n`` wgmma accumulator (``wgm × wgn``
    warpgroups) stages in turn through its ``slots`` slots."""
    mi, nn = m // (64 * wgm), n // wgn
    wg_m = (THREAD // (128 * wgn)) % wgm if wgm > 1 else E.const(0)
    wg_n = (THREAD // 128) % wgn if wgn > 1 else E.const(0)
    warp, slot = THREAD // 32, 16 * chunk
    out = []
    for j, (mb, cc) in enumerate((mb, cc) for mb in range(mi) for cc in range(nn // chunk)):
        base = warp * (slots * slot)
        if j % slots:
            base = base + (j % slots) * slot
        row0 = ((wg_m * mi + mb) * 4 + warp % 4) * 16
        out.append(WarpChunk(j, base, mb, cc, row0, wg_n * nn + cc * chunk))
    return out


def accumulator_reads(op: Copy, lay: Fragment, lc: Any) -> Callable[[int], E.Expr]:
    """Register ``v`` of the wgmma accumulator ``op`` reads (the staged order), as float32."""
    return register_reads(op.src.buffer, lay, lc, op.loc)


def register_reads(acc: Buffer, lay: Fragment, lc: Any, loc: Any) -> Callable[[int], E.Expr]:
    """Register ``v`` of fragment ``acc`` in loop layout ``lay``'s order, as float32."""
    terms = local_map(lay, [0, 1], lc.frag(acc))
    assert terms is not None, "the loop layout holds the fragment (layout inference checked it)"
    local = lc.local_of(acc)

    def reg(v: int) -> E.Expr:
        value: E.Expr = E.Load(local, (slot_expr(terms, E.const(v)),), loc)
        return value if acc.dtype == dtypes.float32 else E.cast(value, dtypes.float32)

    return reg


def stmatrix_regs(reg: Callable[[int], E.Expr], cvt: str, c: WarpChunk, nn: int, chunk: int,
                  s: int) -> list[E.Expr]:
    """The four 16-bit pairs one ``stmatrix.x4`` stores of chunk ``c``'s 16-column step ``s``:
    matrix ``i`` is the 8×8 block of rows ``8 (i & 1)``, column block ``2 s + (i >> 1)``."""
    out: list[E.Expr] = []
    for i in range(4):
        ni = c.cc * (chunk // 8) + 2 * s + (i >> 1)
        v = c.mb * (nn // 2) + ni * 4 + (i & 1) * 2
        out.append(Intrin(cvt, (reg(v), reg(v + 1)), U32))
    return out


def _swz(r: E.Expr, k: E.Expr, chunk: int) -> E.Expr:
    """Element offset of row ``r``, 16-byte chunk ``k`` in a 16 × ``chunk`` slot."""
    nk = chunk // 8
    f = r % 8 if nk == 8 else (r // (8 // nk)) % nk
    return r * chunk + E.binary("^", k, f) * 8


def lower_staged_store(op: Copy, lay: Fragment, wgm: int, wgn: int, chunk: int, tma: TmaStore | None,
                       lc: Any) -> Stmt:
    src, dst = op.src, op.dst
    m, n = (E.as_int(e) for e in squeezed(src))
    assert m is not None and n is not None
    nn = n // wgn
    reg = accumulator_reads(op, lay, lc)
    warps = lay.threads // 32
    slots = tma.slots if tma is not None else 1
    ws = lc.workspace("epi_stage", warps * slots * 16 * chunk, dst.buffer.dtype, tma.align if tma else 16,
                      warp_private=True)
    spec = store_map(tma, op, lc) if tma is not None else None
    lane = THREAD % 32
    cvt = CVT[dst.buffer.dtype.name]

    # stmatrix lane address: matrix i = lane / 8, its row lane % 8
    mat = lane // 8
    w_row = (mat % 2) * 8 + lane % 8
    stmts: list[Stmt] = []
    for c in warp_chunks(m, n, wgm, wgn, chunk, slots):
        j = c.index
        if j >= slots:
            stmts.extend(reuse_wait(tma.slots) if tma is not None else [Evaluate(Intrin("__syncwarp", ()), op.loc)])
        elif j == 0 and tma is not None and lc.defer_store_drain:
            stmts.extend(tile_wait())  # the previous tile's stores, left in flight, have read the slots
        elif j == 0:  # run again (a loop, a persistent kernel's next tile): the last use of the slots is done
            stmts.append(Evaluate(Intrin("__syncwarp", ()), op.loc))
        for s in range(chunk // 16):
            k = mat // 2 + 2 * s
            addr = SmemAddr(ws, (c.base + _swz(w_row, k, chunk),), "w")
            stmts.append(Evaluate(Intrin("tlx_stsm_x4", (addr, *stmatrix_regs(reg, cvt, c, nn, chunk, s))), op.loc))
        if spec is not None:
            stmts.extend(issue(spec, ws, c.base, _dst_index(op, c.row0, c.col0)))
        else:
            stmts.extend(_lane_stores(op, ws, c.base, c.row0, c.col0, chunk, lc))
    if spec is not None and not lc.defer_store_drain:
        stmts.append(drain())
    return Block(Seq(tuple(stmts), op.loc), "parallel", op.loc)


def _lane_stores(op: Copy, ws: Buffer, base: E.Expr, row0: E.Expr, col0: E.Expr, chunk: int,
                 lc: Any) -> list[Stmt]:
    """Step 2 of a chunk staged at ``base``: ``__syncwarp``, then every lane stores 16 bytes of a row."""
    lane = THREAD % 32
    per_row = chunk // 8  # 16-byte chunks per slot row
    rows_per_it = 32 // per_row
    r_row_l, r_k = lane // per_row, lane % per_row
    out: list[Stmt] = [Evaluate(Intrin("__syncwarp", ()), op.loc)]
    for it in range(chunk // 16):
        r = r_row_l + it * rows_per_it if it else r_row_l
        idx = _dst_index(op, row0 + r, col0 + r_k * 8)
        shared = PtrTo(ws, (base + _swz(r, r_k, chunk),), "r")
        body: Stmt = Evaluate(Intrin("tlx_copy16", (PtrTo(op.dst.buffer, idx, "w"), shared, E.const(True))), op.loc)
        cond = bounds_guard(idx, op.dst.buffer.shape, lc)
        out.append(body if cond is None else If(cond, body, None, op.loc))
    return out


def _dst_index(op: Copy, row: E.Expr, col: E.Expr) -> tuple[E.Expr, ...]:
    return region_index(op.dst, (row, col))


def bounds_guard(idx: tuple[E.Expr, ...], shape: tuple[E.Expr, ...], lc: Any) -> E.Expr | None:
    return all_of(range_checks(idx, shape, lc.ranges))
