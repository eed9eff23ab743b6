"""The kernel's own asynchronous copies: TMA copies and transaction counts (``T.tma_copy``,
``T.mbarrier_expect_tx``, ``T.mbarrier_arrive_expect_tx``, ``T.fence_proxy_async``) and cp.async
groups (``T.async_copy``, ``T.ptx_commit_group``, ``T.ptx_wait_group``), in a kernel that manages
its barriers (warp_specialize.py).

``T.tma_copy`` on sm_90a (TMA on): thread 0 of the first warpgroup running it issues
``mbarrier.expect_tx`` of the tile's bytes (``arrive.expect_tx`` with ``emit_arrive``) and one
``cp.async.bulk.tensor`` load per panel of the shared tile (hopper/tma.py), completing on the
barrier; with ``cluster_mask`` the mask's lowest rank issues them ``.multicast::cluster`` to the
blocks of the mask, the mask's other ranks none, a rank outside it its own (every block expects
the bytes on its own barrier, where the leader's land); for sync insertion the issue writes the
tile, so the threads' earlier ordinary reads of it are behind a barrier of theirs first. The
shared tile gets the layout a TMA load writes (``preset_user_tma``, before layout inference): the
wgmma panels where it has them, so ``T.gemm`` reads it as it reads the pipeline's TMA tiles. A
copy TMA cannot make there is a ``NotSupportedError`` naming its line.

Without TMA (sm_80, sm_90, TMA off, the runtime's no-TMA rebuild) it is an ordinary copy by the
threads running it (a multicast one too: of the tile the block names, the one the mask's blocks
share in a correct kernel; in clusters of several blocks on a target without them, an error,
cluster_sync.py): its bytes are expected and delivered at once, so they leave nothing to
balance; with ``emit_arrive`` one thread arrives once the threads have copied. A transaction count
the kernel expects itself needs sm_90 (``NotSupportedError`` on sm_80). ``T.fence_proxy_async`` is
``fence.proxy.async.shared::cta`` on sm_90 and later, nothing before.

``T.async_copy`` is the copy's cp.async form (``lower/copy.py`` with the ``async`` annotation, as
the cp.async pipeline issues it) behind a barrier of the threads running it (sync insertion does
not track cp.async writes, so none would order it after their reads of the tile) and followed by a
commit; ``T.ptx_wait_group(n)`` is ``cp.async.wait_group n`` and their barrier, so that every
thread sees the others' copies; ``T.ptx_commit_group()`` a commit. Barriers need the threads
together: none of them in code where threads may part (``NotSupportedError``).
"""

from __future__ import annotations

import math
from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Region
from ....core_ir.errors import NotSupportedError
from ....core_ir.stmt import BarrierExpectTx, BulkGroup, CpAsyncGroup, FenceProxyAsync, If, PrimFunc, Seq, Stmt
from ....core_ir.tileops import AsyncCopy, Copy, TmaCopy
from ....core_ir.visit import rewrite, walk
from ..hopper.layout import TMA_ALIGN, PanelLayout, tma_layout
from ..hopper.tma import McSlice, TmaSpec, int32_coords, tensor_map, tma_tensor
from ..hopper.tma import TmaCopy as TmaPlan
from ..lir import THREAD, AsyncCommit, AsyncWait, Barrier, Block, Evaluate, Intrin, SmemAddr
from ..warp_specialize import WG, barrier_addr

__all__ = ["arrive_after", "async_copy_parts", "fence", "lower_bulk_group", "lower_expect", "lower_group",
           "lower_tma_copy", "plain_copy", "preset_user_tma"]


def preset_user_tma(func: PrimFunc, ctx: Any) -> PrimFunc:
    """Give the shared tiles the kernel's ``T.tma_copy`` loads the layout TMA writes them in
    (``cuda.preset_layouts``; unswizzled ones aligned for TMA: ``cuda.smem_align``)."""
    from ..hopper.config import hopper_config

    if not hopper_config(ctx).tma:
        return func
    preset = dict(ctx.data.get("cuda.preset_layouts", {}))
    align = dict(ctx.data.get("cuda.smem_align", {}))
    for op in walk(func.body):
        if not isinstance(op, TmaCopy):
            continue
        buf = _shared_side(op).buffer
        shape = buf.static_shape()
        lay = tma_layout(tuple(shape), buf.dtype.bytes) if shape and buf.base is None else None
        if lay is None or buf in preset:
            continue
        preset[buf] = lay
        if lay.swizzle == "none":
            align[buf] = TMA_ALIGN
    ctx.data["cuda.preset_layouts"] = preset
    if align:
        ctx.data["cuda.smem_align"] = align
    return func


def _once(body: list[Stmt], g: int, loc: Any) -> Stmt:
    """``body`` issued by thread 0 of warpgroup ``g``."""
    leader = E.binary("and", E.binary("==", WG, g), E.binary("==", THREAD, 0))
    return If(leader, Seq(tuple(body), loc) if len(body) > 1 else body[0], None, loc)


def lower_expect(s: BarrierExpectTx, lc: Any, g: int) -> Stmt:
    if not lc.async_proxy:
        raise NotSupportedError(f"{s.call}: mbarrier transaction counts need sm_90 or later", loc=s.loc,
                                hint="on sm_80 a T.tma_copy is an ordinary copy; arrive with T.barrier_arrive")
    fn = "tlx_ws_arrive_expect_tx" if s.arrive else "tlx_ws_expect_tx"
    return _once([Evaluate(Intrin(fn, (barrier_addr(s.buffer, s.index, lc), E.cast(s.nbytes, dtypes.uint32))), s.loc)],
                 g, s.loc)


def fence(s: FenceProxyAsync) -> Stmt:
    return Evaluate(Intrin("tlx_ws_fence_proxy_async", ()), s.loc)


def plain_copy(s: TmaCopy) -> Copy:
    """The ordinary copy a ``T.tma_copy`` is without TMA."""
    return Copy(s.src, s.dst, s.annotations, s.loc)


def arrive_after(s: TmaCopy, lc: Any, g: int) -> list[Stmt]:
    """Without TMA, ``emit_arrive``'s arrival: once the threads have copied."""
    if not s.arrive or s.barrier is None:
        return []
    arrive = Evaluate(Intrin("tlx_ws_arrive", (barrier_addr(s.barrier, s.index, lc),)), s.loc)
    return [Barrier(s.loc), _once([arrive], g, s.loc)]


def _tile(r: Region) -> tuple[int, ...] | None:
    """The shared tile region ``r`` covers (its buffer's trailing one or two dims, whole; leading
    dims: one index), or ``None``."""
    shape = r.buffer.static_shape()
    if not shape:
        return None
    tile = tuple(shape[-2:])
    lead = len(shape) - len(tile)
    for d, (st, ext) in enumerate(zip(r.starts, r.extents)):
        whole = d >= lead and E.as_int(st) == 0 and E.as_int(ext) == shape[d]
        if not whole and not (d < lead and E.as_int(ext) == 1):
            return None
    return tile


def _shared_side(s: TmaCopy) -> Region:
    return s.src if s.is_store else s.dst


def _plan(s: TmaCopy, lc: Any) -> tuple[PanelLayout, TmaSpec, int, E.Expr | None]:
    """The tile layout, tensor map and rows dim of the TMA copy ``s`` and the stage index of its
    shared tile (``None`` for a 1- or 2-d tile), or ``NotSupportedError`` saying why there is none."""
    shared, tensor = _shared_side(s), s.src if not s.is_store else s.dst
    buf = shared.buffer

    def refuse(why: str) -> NotSupportedError:
        return NotSupportedError(f"T.tma_copy {'from' if s.is_store else 'into'} `{buf.name}`: {why}", loc=s.loc,
                                 hint="T.copy makes the same copy with ordinary loads and stores"
                                 + ("" if s.is_store else " (and arrive with T.barrier_arrive)"))

    tile = _tile(shared)
    if tile is None:
        raise refuse("TMA moves whole tiles: the last two dims of the shared buffer (earlier dims one index)")
    lay = lc.layouts.get(buf)
    want = tma_layout(tuple(buf.static_shape()), buf.dtype.bytes)
    if not isinstance(lay, PanelLayout) or lay != want:
        why = "a viewed tile or another layout than TMA writes" if want is not None else \
            "its rows are not a multiple of 16 bytes (and of 8 rows, or 128 bytes in all) as a TMA box needs"
        raise refuse(why)
    found = tma_tensor(tensor, lc.tma_params, one_row=True)
    if found is None:
        raise refuse(f"`{tensor.buffer.name}` is not a tensor parameter with rows of a multiple of 16 bytes whose "
                     "tile spans its last dim")
    arg, dims = found
    rows = tile[0] if len(tile) == 2 else 1
    if tuple(E.as_int(tensor.extents[d]) for d in dims) != (rows, tile[-1]) or rows > 256:
        raise refuse(f"the global tile is not the shared tile's {rows} x {tile[-1]} (at most 256 rows)")
    lead = len(buf.static_shape()) - len(tile)
    if lead > 1:
        raise refuse("a ring of tiles has one leading dim, (stages, rows, cols)")
    tile_lay = PanelLayout(tile, lay.elem_bytes, lay.swizzle, lay.panel)
    spec = tensor_map(lc.tmaps, tensor, arg, dims, lay.panel, rows, lay.tma_swizzle)
    return tile_lay, spec, dims[0], shared.starts[0] if lead else None


def lower_tma_copy(s: TmaCopy, lc: Any, g: int) -> Stmt:
    """The TMA form of ``s`` (sm_90a, TMA on)."""
    if s.is_store:
        return _lower_store(s, lc, g)
    assert s.barrier is not None
    lay, spec, rows_dim, stage = _plan(s, lc)
    bar = barrier_addr(s.barrier, s.index, lc)
    fn = "tlx_ws_arrive_expect_tx" if s.arrive else "tlx_ws_expect_tx"
    nbytes = E.const(math.prod(lay.shape) * lay.elem_bytes, dtypes.uint32)
    dst = s.dst.buffer
    plan = TmaPlan(s, rows_dim, lay, spec)
    # a mask of one block: every block loads its own tile
    issue = _multicast(plan, s, stage, bar) if s.mask & (s.mask - 1) else plan.issue(stage, dst, bar)
    # the tile counts as written here for sync insertion: a barrier of the threads running the copy
    # orders their earlier ordinary reads of it before the load is issued
    loads = [rewrite(ld, lambda n: SmemAddr(dst, n.indices, "w") if isinstance(n, SmemAddr) and n.buffer is dst
                     else None) for ld in issue]
    return Block(_once([Evaluate(Intrin(fn, (bar, nbytes)), s.loc), *loads], g, s.loc), "tma_copy", s.loc)


def _multicast(plan: TmaPlan, s: TmaCopy, stage: E.Expr | None, bar: E.Expr) -> list[Stmt]:
    """A load with ``cluster_mask``: the mask's lowest rank loads the tile into every block of the
    mask (``.multicast::cluster``, each one's barrier at ``bar``'s offset receiving the bytes), the
    other ranks of the mask issue nothing, a rank outside it loads its own tile."""
    rank = E.ClusterRank(loc=s.loc)
    leader = (s.mask & -s.mask).bit_length() - 1
    mc = McSlice(plan.spec, E.const(0), E.const(s.mask, dtypes.uint32))
    dst = s.dst.buffer
    outside = E.binary("==", E.binary("&", E.binary(">>", E.const(s.mask, dtypes.uint32), rank), 1), 0)
    own = If(outside, Seq(tuple(plan.issue(stage, dst, bar)), s.loc), None, s.loc)
    return [If(E.binary("==", rank, leader), Seq(tuple(plan.issue(stage, dst, bar, mc)), s.loc), own, s.loc)]


def _lower_store(s: TmaCopy, lc: Any, g: int) -> Stmt:
    """Every thread's proxy fence (their writes of the tile before the async proxy reads it; sync
    insertion puts their barrier after it, before the store reads the tile), then one thread's
    stores, one per panel, committed as a bulk group."""
    lay, spec, _, stage = _plan(s, lc)
    src, w = s.src.buffer, lay.panel
    last = len(s.dst.starts) - 1
    stores: list[Stmt] = []
    for p in range(lay.shape[-1] // w):
        idx: tuple[E.Expr, ...] = (E.const(0),) * (len(lay.shape) - 1) + (E.const(p * w),)
        addr = SmemAddr(src, idx if stage is None else (stage, *idx), "r")
        coords = int32_coords([st + p * w if d == last and p else st for d, st in enumerate(s.dst.starts)])
        stores.append(Evaluate(Intrin(f"tlx_tma_store_{len(coords)}d", (spec.var, addr, *reversed(coords))), s.loc))
    lc.user_tma_stores = True
    commit = Evaluate(Intrin("tlx_tma_store_commit", ()), s.loc)
    fence = Evaluate(Intrin("tlx_ws_fence_proxy_async", ()), s.loc)
    return Seq((fence, Block(_once([*stores, commit], g, s.loc), "tma_store", s.loc)), s.loc)


def lower_bulk_group(s: BulkGroup, lc: Any, g: int, divergent: bool) -> Stmt:
    """``T.tma_store_arrive`` / ``T.tma_store_wait`` of the thread that issues the stores (with
    TMA), the wait followed by the barrier of the threads running it; nothing without TMA, where
    the stores were ordinary ones."""
    if not lc.user_tma:
        return Seq(())
    if s.kind == "commit":
        return _once([Evaluate(Intrin("tlx_tma_store_commit", ()), s.loc)], g, s.loc)
    if divergent:
        raise NotSupportedError(f"{s.call} under a condition or loop bound its threads may not share: its barrier "
                                "needs them together", loc=s.loc, hint="wait outside code that depends on the thread")
    wait = Intrin(f"tlx_ws_bulk_wait<{s.n}, {'true' if s.read else 'false'}>", ())
    return Seq((_once([Evaluate(wait, s.loc)], g, s.loc), Barrier(s.loc)), s.loc)


def _together(s: AsyncCopy | CpAsyncGroup, divergent: bool) -> None:
    if divergent:
        what = "T.async_copy" if isinstance(s, AsyncCopy) else s.call
        raise NotSupportedError(f"{what} under a condition or loop bound its threads may not share: its barrier "
                                "needs them together", loc=s.loc,
                                hint="issue and wait outside code that depends on the thread (or the atomic values "
                                "it read)")


def async_copy_parts(s: AsyncCopy, divergent: bool) -> tuple[Stmt, Copy, Stmt]:
    """The barrier before ``T.async_copy``, its cp.async copy (for the walker to lower) and the
    commit after it."""
    _together(s, divergent)
    copy = Copy(s.src, s.dst, (*s.annotations, ("async", True)), s.loc)
    return Barrier(s.loc), copy, AsyncCommit(s.loc)


def lower_group(s: CpAsyncGroup, divergent: bool) -> Stmt:
    if s.kind == "commit":
        return AsyncCommit(s.loc)
    _together(s, divergent)
    return Seq((AsyncWait(s.n, s.loc), Barrier(s.loc)), s.loc)
