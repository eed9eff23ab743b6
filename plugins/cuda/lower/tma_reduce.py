"""A float32 wgmma accumulator added into a global tensor by TMA (sm_90a, pass config
``tlx.tma_reduce``, default on): FlashAttention backward's ``T.atomic_add(dQ[b, h, rows, :], dq)``
in every iteration of its loop.

Each warp stages its 16 rows of the accumulator, 32 columns (128 bytes) at a time, in a slot of its
own (8-byte stores, rows swizzled as TMA's 128B swizzle lays them out), and its lane 0 adds the
16 × 32 box to the tensor with one ``cp.reduce.async.bulk.tensor ... .add`` instead of every lane
issuing ``red.global.add`` of 8 bytes. Per chunk: the stores, ``fence.proxy.async`` in every lane,
``__syncwarp``, then lane 0 issues and commits its bulk group. A slot is written again only after
lane 0's ``wait_group.read`` (two slots per warp when shared memory allows); the op starts by
waiting until the previous call's reductions have read their slots, so they stay in flight while
the loop computes, and the kernel ends with ``wait_group.read 0`` (``drain_at_exit``). The async
proxy's additions are not ordered against the kernel's other accesses of the tensor, so only a
tensor the kernel touches through such adds alone takes this form (``reduce_only_params``); the
copy engine clips out-of-range rows and columns. Else: ``red.global.add.v2/.v4.f32``
(lower/atomic.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Region
from ....core_ir.stmt import PrimFunc, Seq, Stmt
from ....core_ir.tileops import Atomic, Copy
from ....core_ir.visit import walk
from ..hopper.layout import TMA_SWIZZLE
from ..hopper.tma import tensor_map, tma_tensor
from ..layout import Fragment
from ..lir import THREAD, Block, Evaluate, Intrin, PtrTo
from ..nests import region_index, squeezed
from .staged_epilogue import accumulator_reads, warp_chunks, wgmma_accumulator
from .tma_store import ROWS, drain, issue, params_only_at, reuse_wait, slots_that_fit, tile_wait

KEY = "tlx.tma_reduce"
CHUNK = 32  # float32 columns of a slot row: 128 bytes, one 128B swizzle row
ATOM = 8 * CHUNK * 4  # bytes of one swizzle atom (8 rows): the workspace alignment


@dataclass(frozen=True)
class TmaReduce:
    lay: Fragment
    wgm: int
    wgn: int
    slots: int
    arg: int
    dims: tuple[int, ...]


def reduce_only_params(func: PrimFunc) -> frozenset[int]:
    """Ids of the buffer parameters ``func`` touches only by adds of fragment tiles, as tile atomics
    or as the ``T.Parallel`` nests of element atomics that are one (``atomic.tile_atomic``), not
    through views."""
    from ....core_ir.stmt import For
    from .atomic import tile_atomic

    adds: list[Atomic] = [n for n in walk(func.body) if isinstance(n, Atomic) and n.kind == "add"
                          and isinstance(n.value, Region) and n.value.buffer.scope == "fragment"]
    for n in walk(func.body):
        if isinstance(n, For) and n.kind == "parallel" and tile_atomic(n) is not None:
            adds += [a for a in walk(n.body) if isinstance(a, Atomic)]
    return params_only_at(func, [a.dst for a in adds])


def tma_reduce_plan(op: Atomic, lc: Any) -> TmaReduce | None:
    value = op.value
    if not (lc.tma_reduce and isinstance(value, Region) and op.kind == "add" and op.order in (None, "relaxed")):
        return None
    dst = op.dst
    if value.buffer.scope != "fragment" or value.buffer.dtype != dtypes.float32 or dst.buffer.dtype != dtypes.float32 \
            or id(dst.buffer) not in lc.tma_reduce_dsts or value.buffer.ndim != 2:
        return None
    acc = wgmma_accumulator(Copy(value, dst, loc=op.loc), lc)
    if acc is None:
        return None
    lay, wgm, wgn = acc
    m, n = (E.as_int(e) for e in squeezed(value))
    assert m is not None and n is not None
    found = tma_tensor(dst, lc.tma_params)
    if (n // wgn) % CHUNK or found is None:
        return None
    chunks = m // (64 * wgm) * (n // wgn // CHUNK)
    slot_bytes = lay.threads // 32 * ROWS * CHUNK * 4
    slots = slots_that_fit(chunks, slot_bytes, ATOM, lc.smem_spare - lc.workspace_bytes())
    return TmaReduce(lay, wgm, wgn, slots, found[0], tuple(found[1])) if slots else None


def lower_tma_reduce(op: Atomic, plan: TmaReduce, lc: Any) -> Stmt:
    value = op.value
    assert isinstance(value, Region)
    m, n = (E.as_int(e) for e in squeezed(value))
    assert m is not None and n is not None
    nn = n // plan.wgn
    reg = accumulator_reads(Copy(value, op.dst, loc=op.loc), plan.lay, lc)
    warps = plan.lay.threads // 32
    ws = lc.workspace("red_stage", warps * plan.slots * ROWS * CHUNK, dtypes.float32, ATOM, warp_private=True)
    spec = tensor_map(lc.tmaps, op.dst, plan.arg, list(plan.dims), CHUNK, ROWS, TMA_SWIZZLE[CHUNK * 4])
    lane = THREAD % 32
    stmts: list[Stmt] = list(tile_wait())  # the previous call's reductions have read the slots
    for c in warp_chunks(m, n, plan.wgm, plan.wgn, CHUNK, plan.slots):
        if c.index >= plan.slots:
            stmts.extend(reuse_wait(plan.slots))
        for t in range(CHUNK // 8):  # the chunk's 8-column accumulator tiles: rows lane / 4 and + 8
            for h in range(2):
                v = c.mb * (nn // 2) + (c.cc * (CHUNK // 8) + t) * 4 + h * 2
                row, col = lane // 4 + h * 8, t * 8 + lane % 4 * 2
                swizzled = E.binary("^", col // 4, row % 8)  # 16-byte unit of a 128-byte row
                addr = PtrTo(ws, (c.base + row * CHUNK + swizzled * 4 + col % 4,), "w")
                stmts.append(Evaluate(Intrin("tlx_st2", (addr, reg(v), reg(v + 1))), op.loc))
        stmts.extend(issue(spec, ws, c.base, region_index(op.dst, (c.row0, c.col0)), "reduce_add"))
    return Block(Seq(tuple(stmts), op.loc), "atomic", op.loc)


def drain_at_exit(body: Stmt) -> Stmt:
    """``body`` ending with every warp's reductions done reading their slots (when it has any)."""
    if not any(isinstance(n, Intrin) and n.fn.startswith("tlx_tma_reduce_add_") for n in walk(body)):
        return body
    return Seq((body, drain()))
