"""Accumulators staged through a shared tile by the kernel itself, stored directly (sm_90a; pass
config ``tlx.direct_store``, default on). TileLang kernels often end with

    T.copy(acc, O_shared)          # fragment -> shared, converting to fp16
    T.copy(O_shared, Out[...])     # shared -> global

which on the wgmma path stores the accumulator rows with 8-way bank conflicts (a warp's lanes hold
8 rows of 256 bytes: the same banks) and holds the tile in shared memory for the whole kernel.
When the shared tile is used by nothing else, the two copies become ``T.copy(acc, Out[...])``,
which the staged epilogue (lower/staged_epilogue.py) stores through swizzled per-warp slots and
TMA; the tile's allocation goes away. The values are the same: both forms round the fp32 values
once to the tile's type, which must be the output's. H200 (2026-11-30, bench/variants.py):
FlashAttention D128 +0.4-1.6 % non-causal, +1-2 % causal; the GPU suite passes with it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ....core_ir import expr as E
from ....core_ir.buffer import Buffer, Region
from ....core_ir.stmt import Alloc, Annotate, PrimFunc, Seq, Stmt, Store
from ....core_ir.tileops import Copy, Gemm
from ....core_ir.visit import rewrite, walk
from ..perf_options import pass_configs
from .config import hopper_config

KEY = "tlx.direct_store"
FREED = "cuda.direct_store_freed"  # bytes of the tiles taken away (pipeline.py's one-block-per-SM rule)


def _uses(body: Stmt) -> dict[Buffer, int]:
    """How many nodes of ``body`` name each buffer (its allocation included; not its layout
    annotation, which goes with the tile)."""
    out: dict[Buffer, int] = {}
    for n in walk(body):
        for b in [] if isinstance(n, Annotate) else _named(n):
            out[b] = out.get(b, 0) + 1
    return out


def _named(n: Any) -> list[Buffer]:
    """The buffers ``n`` names (a view counts as its base: a use of the same memory)."""
    if isinstance(n, (Region, E.Load, Alloc, Store)):
        return [n.buffer.storage]
    if isinstance(n, Annotate):
        return [b.storage for b, _ in n.data] if n.kind == "layout" else []
    return []


def _pair(c1: Stmt, c2: Stmt, accumulators: set[int], uses: dict[Buffer, int]) -> Copy | None:
    """``T.copy(c1.src, c2.dst)`` when ``c1``, ``c2`` stage a whole accumulator through a shared
    tile nothing else touches."""
    if not (isinstance(c1, Copy) and isinstance(c2, Copy)):
        return None
    tile = c1.dst.buffer
    if tile.scope != "shared" or c2.src.buffer is not tile or c2.dst.buffer.scope != "global" \
            or id(c1.src.buffer) not in accumulators \
            or not (c1.src.is_full() and c1.dst.is_full() and c2.src.is_full()) \
            or tile.dtype != c2.dst.buffer.dtype or uses.get(tile) != 3:  # its Alloc and the two copies
        return None
    return Copy(c1.src, c2.dst, c2.annotations, c2.loc)


def _touches(s: Stmt, c1: Copy) -> bool:
    """Whether ``s`` names the accumulator or the shared tile ``c1`` copies, or any global tensor
    (the second copy's destination: moving that store across ``s`` must not reorder them)."""
    mine = {id(c1.src.buffer.storage), id(c1.dst.buffer.storage)}
    return any(id(b) in mine or b.scope == "global" for n in walk(s) for b in _named(n))


def _without(n: Any, dropped: set[int]) -> Stmt | None:
    """``n`` with the dropped tiles' allocations and layout annotations gone (``None``: unchanged)."""
    if isinstance(n, Alloc) and id(n.buffer) in dropped:
        return Seq(())
    if isinstance(n, Annotate) and n.kind == "layout" and any(id(b) in dropped for b, _ in n.data):
        return dataclasses.replace(n, data=tuple((b, lay) for b, lay in n.data if id(b) not in dropped))
    return None


def direct_store_stage(func: PrimFunc, ctx: Any) -> PrimFunc:
    if not pass_configs(ctx).get(KEY, True) or not hopper_config(ctx).wgmma:
        return func
    accumulators = {id(n.C.buffer) for n in walk(func.body) if isinstance(n, Gemm) and n.C.buffer.scope == "fragment"}
    uses = _uses(func.body)
    dropped: set[int] = set()

    def fn(n: Any) -> Any:
        if not isinstance(n, Seq):
            return None
        stmts: list[Stmt | None] = list(n.stmts)
        for i, c1 in enumerate(stmts):
            if not isinstance(c1, Copy):  # None: the second copy of an earlier pair, gone
                continue
            for j in range(i + 1, len(stmts)):
                c2 = stmts[j]
                if c2 is None:
                    continue
                direct = _pair(c1, c2, accumulators, uses)
                if direct is not None:
                    dropped.add(id(c1.dst.buffer))
                    stmts[i], stmts[j] = direct, None
                    break
                # the pair may sit apart (dV's copies, then dK's) if nothing between names its buffers
                if _touches(c2, c1):
                    break
        out = [s for s in stmts if s is not None]
        return Seq(tuple(out), n.loc) if len(out) != len(n.stmts) else None

    body = rewrite(func.body, fn)
    if not dropped:
        return func
    ctx.data[FREED] = sum(math.prod(n.buffer.static_shape() or (0,)) * n.buffer.dtype.bytes
                          for n in walk(body) if isinstance(n, Alloc) and id(n.buffer) in dropped)
    body = rewrite(body, lambda x: _without(x, dropped))
    return dataclasses.replace(func, body=body)
