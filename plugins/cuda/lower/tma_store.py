"""TMA stores for the staged epilogue (sm_90a, ``lower/staged_epilogue.py``): each warp's staged
16 × ``C`` chunk goes to global memory as one ``cp.async.bulk.tensor`` store issued by its lane 0,
instead of 16-byte stores of every lane.

The slot's XOR swizzle is TMA's 128B/64B/32B swizzle for ``C`` = 64/32/16 two-byte columns
(backends.md A5) once the slot starts on a swizzle atom (8 rows: 1024/512/256 bytes), so the
workspace is aligned to the atom and every slot (16 rows) starts on one. Per chunk: the stmatrix
writes, ``fence.proxy.async`` in every lane (the async proxy reads them next, A7), ``__syncwarp``,
then lane 0 issues the store and commits its bulk group. A slot is written again only after lane
0's ``wait_group.read`` (all but the newest ``slots - 1`` groups have read their slot) and a
``__syncwarp``; the epilogue ends with ``wait_group.read 0`` so the block never exits while a store
still reads shared memory (a later reuse of the workspace, in a loop, is behind the barrier that
sync insertion puts between the epilogue's shared writes and reads). A persistent kernel's epilogue
instead starts with that wait, and the block waits once after its tile loop
(``lower/__init__._drain_after_tiles``), so one tile's stores overlap the next tile's main loop. Two slots per warp
(ping-pong) when shared memory allows, else one. Out-of-range rows and columns are clipped by the
copy engine: no guards.

Taken when the destination qualifies for a tensor map like a TMA load's source (``tma_tensor``)
and the kernel only ever writes it by fragment copies (async-proxy writes are not ordered against
the kernel's other accesses). The map is a ``TmaSpec`` added to ``cuda.tmaps``; tensors it cannot
describe at launch take the runtime's no-TMA rebuild. Switch: pass config ``tlx.tma_store``
(default on; off with TMA, e.g. ``tl.disable_tma_lower``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ....core_ir import expr as E
from ....core_ir.buffer import Buffer, Region
from ....core_ir.stmt import If, PrimFunc, Seq, Stmt
from ....core_ir.tileops import Copy
from ....core_ir.visit import walk
from ..hopper.layout import TMA_SWIZZLE
from ..hopper.tma import TmaSpec, int32_coords, tensor_map, tma_tensor
from ..lir import THREAD, Evaluate, Intrin, SmemAddr

ROWS = 16  # rows of a staged chunk (one warp's share of a wgmma m64 block)


@dataclass(frozen=True)
class TmaStore:
    """How a staged copy stores: the tensor's argument index and tile dims, slots per warp."""

    arg: int
    dims: tuple[int, ...]
    slots: int
    chunk: int

    @property
    def align(self) -> int:
        """Bytes of one swizzle atom (8 slot rows): the workspace alignment."""
        return atom_bytes(self.chunk)


def atom_bytes(chunk: int) -> int:
    """Bytes of one swizzle atom of 16-bit slots ``chunk`` columns wide (8 rows)."""
    return 8 * chunk * 2


def store_only_params(func: PrimFunc) -> frozenset[int]:
    """Ids of the buffer parameters ``func`` uses only as destinations of fragment copies (not
    through views)."""
    return params_only_at(func, [n.dst for n in walk(func.body) if isinstance(n, Copy)
                                 and n.src.buffer.scope == "fragment"])


def params_only_at(func: PrimFunc, regions: list[Region]) -> frozenset[int]:
    """Ids of the buffer parameters ``func`` names nowhere but in ``regions`` (not views)."""
    mine = {id(r) for r in regions if r.buffer.base is None}
    other = {id(n.buffer.storage) for n in walk(func.body)
             if isinstance(getattr(n, "buffer", None), Buffer) and id(n) not in mine}
    return frozenset(id(p) for p in func.params if isinstance(p, Buffer) and id(p) not in other)


def tma_store_plan(op: Copy, chunk: int, chunks: int, warps: int, spare: int, lc: Any) -> TmaStore | None:
    """The TMA store of staged copy ``op`` (``chunks`` per warp; ``spare``: shared bytes left for
    its workspace)."""
    if id(op.dst.buffer) not in lc.tma_store_dsts:
        return None
    found = tma_tensor(op.dst, lc.tma_params)
    if found is None:
        return None
    slots = slots_that_fit(chunks, warps * ROWS * chunk * 2, atom_bytes(chunk), spare)
    return TmaStore(found[0], tuple(found[1]), slots, chunk) if slots else None


def slots_that_fit(chunks: int, slot_bytes: int, align: int, spare: int) -> int:
    """Slots per warp (2, else 1; 0 when none fits) for ``chunks`` chunks a warp stages, one slot
    of every warp taking ``slot_bytes`` of the ``spare`` shared bytes (``align``: the workspace's)."""
    return next((k for k in range(min(chunks, 2), 0, -1) if k * slot_bytes + align <= spare), 0)


def store_map(plan: TmaStore, op: Copy, lc: Any) -> TmaSpec:
    return tensor_map(lc.tmaps, op.dst, plan.arg, list(plan.dims), plan.chunk, ROWS, TMA_SWIZZLE[plan.chunk * 2])


def _lane0(*calls: Intrin) -> Stmt:
    body = tuple(Evaluate(c) for c in calls)
    return If(E.binary("==", THREAD % 32, 0), body[0] if len(body) == 1 else Seq(body), None)


def reuse_wait(slots: int) -> list[Stmt]:
    """Before a slot of a warp's ``slots`` is written again: its store has read it."""
    return [_lane0(Intrin(f"tlx_tma_store_wait_read{slots - 1}", ())), Evaluate(Intrin("__syncwarp", ()))]


def issue(spec: TmaSpec, ws: Buffer, base: E.Expr, idx: tuple[E.Expr, ...], kind: str = "store") -> list[Stmt]:
    """After a chunk's writes into the slot at ``base``: the store of its box at ``idx`` (``kind``
    ``reduce_add``: its addition, lower/tma_reduce.py)."""
    coords = int32_coords(list(reversed(idx)))
    store = Intrin(f"tlx_tma_{kind}_{len(coords)}d", (spec.var, SmemAddr(ws, (base,), "r"), *coords))
    return [Evaluate(Intrin("tlx_fence_proxy_async", ())), Evaluate(Intrin("__syncwarp", ())),
            _lane0(store, Intrin("tlx_tma_store_commit", ()))]


def drain() -> Stmt:
    return _lane0(Intrin("tlx_tma_store_wait_read0", ()))


def tile_wait() -> list[Stmt]:
    """Before a persistent kernel's epilogue writes its first slot: every store has read its slot."""
    return [drain(), Evaluate(Intrin("__syncwarp", ()))]
