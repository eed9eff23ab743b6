"""A persistent GEMM's staged epilogue stored during the next tile's first k-steps (sm_90a, after
lowering; pass config ``tlx.overlap_epilogue``; by default on when the k-loop has at most
``SHORT_K_LOOP`` iterations).

In the persistent kernel the consumers write a tile's accumulators out (per-warp stmatrix slots,
one TMA store per chunk) while the tensor cores wait: the producer has the next tile's stages
loaded, but the warps that issue its wgmma are busy storing (Nsight Compute, session 5: ~3 % of
the consumer warps' samples in the epilogue at 4096³). Here the tile's stmatrix operands (the
converted accumulator pairs) are computed into registers right after its last k-step, and chunk
``c`` of the stores runs in iteration ``c`` of the next tile's k-loop (its first iterations peeled
off and unrolled), after that iteration's wgmma is issued, at the previous tile's coordinates; the
block's last tile is stored after the tile loop. The registers cost one 32-bit value per pair (64
for a 64×256 warpgroup tile), on top of the accumulators the next tile's wgmma is filling.

Taken only when the shapes are the ones the staged epilogue emits: the tile loop's body ends with
the k-loop, the final wait (and register-only work such as a ReLU) and one lowered epilogue block
made of chunks (a lane-0 wait for the slot, stmatrix stores, a fence and the lane-0 TMA store of
the slot) whose stored values read nothing but registers, and the k-loop has at least as many
iterations as there are chunks.

H200 (2026-12-01, ``bench/variants.py gemm --config 128x256x64x4x256``, ratio to cuBLAS, two builds
of each variant): 4096³ (64 k-steps) 1.022 / 1.020 on vs 1.006 / 1.002 off, and 0.994 vs 0.987 back
to back; 8192×28672×4096 (64 k-steps) level; 8192³ (128 k-steps) 1.013 / 1.015 vs 1.023 / 1.028,
and 1.010 vs 1.023 back to back. Why the longer loop loses was not found, so an unset switch takes
the form only where it was measured to win.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.stmt import Alloc, For, If, Seq, Stmt, Store
from ....core_ir.visit import flat_seq, rewrite, substitute, walk
from ..lir import ROLLED, Block, Decl, Evaluate, Intrin, is_call
from ..perf_options import pass_configs
from .header import WGMMA_FORMS

KEY = "tlx.overlap_epilogue"
#: with ``tlx.rolled_k_loop`` off, keep the peeled steps rolled (``#pragma unroll 1``) and the
#: steady-state loop unrolled: the 4-stage GEMM's NVRTC time goes from 0.76 s to about 0.5 s here;
#: H200 (session 18, bench/variants.py, 8 rounds): 4096³ 1.017 of cuBLAS vs 1.020 / 1.022 unrolled
ROLLED_HEAD = "tlx.rolled_epilogue_steps"
_STSM = "tlx_stsm_x"
SHORT_K_LOOP = 64


def _chunks(epilogue: Stmt) -> list[list[Stmt]] | None:
    """The epilogue's statements cut before each lane-0 wait for a slot, or ``None`` when it is not
    the staged form (each chunk: the wait, stmatrix stores, one TMA store)."""
    stmts = flat_seq(epilogue)
    chunks: list[list[Stmt]] = []
    for s in stmts:
        if isinstance(s, If) and any(is_call(x, "tlx_tma_store_wait_read0") for x in flat_seq(s.then)):
            chunks.append([])
        if not chunks:
            return None
        chunks[-1].append(s)
    for c in chunks:
        stores = [x for s in c for x in walk(s) if isinstance(x, Intrin) and x.fn.startswith("tlx_tma_store_")
                  and x.fn not in ("tlx_tma_store_wait_read0", "tlx_tma_store_commit")]
        if len(stores) != 1 or not any(is_call(s, "tlx_fence_proxy_async") for s in c):
            return None
    return chunks if chunks else None


def _operands(chunks: list[list[Stmt]]) -> list[Any] | None:
    """Every value the chunks' stmatrix stores write, in order; ``None`` when another statement
    computes anything (only waits, warp syncs, fences and the lane-0 store are allowed)."""
    values = []
    for c in chunks:
        for s in c:
            if is_call(s, "__syncwarp") or is_call(s, "tlx_fence_proxy_async") or isinstance(s, If):
                continue
            if not (isinstance(s, Evaluate) and isinstance(s.value, Intrin) and s.value.fn.startswith(_STSM)):
                return None
            values.extend(s.value.args[1:])
    # a value read from memory could change before the next tile stores it; registers do not
    if any(isinstance(n, E.Load) and n.buffer.scope not in ("local", "fragment") for v in values for n in walk(v)):
        return None
    return values


_KEPT_CALLS = ("tlx_wgmma_drain", "tlx_wgmma_wait0", "tlx_fence_regs")


def _registers_only(s: Stmt) -> bool:
    """Whether ``s`` (between the k-loop and the epilogue: the final wait, an elementwise epilogue
    such as a ReLU on the accumulators) touches nothing but registers."""
    for n in walk(s):
        if isinstance(getattr(n, "buffer", None), Buffer) and n.buffer.scope not in ("local", "fragment"):
            return False
        if isinstance(n, Intrin) and n.fn.startswith("tlx_") and n.fn not in _KEPT_CALLS:
            return False
    return True


def _tile_loop(body: Stmt, tile_var: E.Var) -> For | None:
    """The consumers' tile loop (the producer's walks the same tiles with the same variable)."""
    return next((n for n in walk(body) if isinstance(n, For) and n.var is tile_var
                 and any(isinstance(m, Intrin) and m.fn.startswith(_STSM) for m in walk(n))), None)


def overlap_epilogue(body: Stmt, ctx: Any) -> Stmt:
    """``body`` with the persistent tile loop's epilogue moved into the next tile (module docstring)."""
    pers = ctx.data.get("cuda.persistent")
    switch = pass_configs(ctx).get(KEY)
    if pers is None or getattr(pers, "stream_k", None) or (switch is not None and not switch):
        return body
    tiles = _tile_loop(body, pers.j)
    if tiles is None:
        return body
    stmts = flat_seq(tiles.body)
    loops = [i for i, s in enumerate(stmts) if isinstance(s, For)]
    if not loops or not isinstance(stmts[-1], Block):
        return body
    k = loops[-1]
    kloop = stmts[k]
    assert isinstance(kloop, For)
    chunks = _chunks(stmts[-1].body)
    values = _operands(chunks) if chunks else None
    trips = E.as_int(kloop.extent)
    if chunks is None or values is None or trips is None or trips < len(chunks) or \
            not all(_registers_only(s) for s in stmts[k + 1:-1]):
        return body
    if switch is None and trips > SHORT_K_LOOP:
        return body
    coords = [s.var for s in stmts[:k] if isinstance(s, Decl)]
    regs = Buffer("tlx_epi_regs", (len(values),), values[0].dtype, "local")
    saved = Buffer("tlx_epi_tile", (max(len(coords), 1),), dtypes.int32, "local")
    keep = [Store(regs, (E.const(i),), v) for i, v in enumerate(values)]
    keep += [Store(saved, (E.const(i),), v) for i, v in enumerate(coords)]
    slots = iter(range(len(values)))
    earlier = {v: E.Load(saved, (E.const(i),)) for i, v in enumerate(coords)}

    def from_regs(n: Any) -> Any:
        if isinstance(n, Evaluate) and isinstance(n.value, Intrin) and n.value.fn.startswith(_STSM):
            args = n.value.args
            loads = tuple(E.Load(regs, (E.const(next(slots)),)) for _ in args[1:])
            return Evaluate(Intrin(n.value.fn, (args[0], *loads), n.value.dtype), n.loc)
        return None

    moved = [substitute(rewrite(Seq(tuple(c)), from_regs), earlier) for c in chunks]
    first = E.binary(">", pers.j, 0)
    kbody = flat_seq(kloop.body)
    issue = next((i for i, s in enumerate(kbody) if any(isinstance(n, Intrin) and n.fn in WGMMA_FORMS
                                                           for n in walk(s))), None)
    if issue is None:
        return body
    # the first iterations, which store the chunks, are peeled off: the steady-state loop stays the
    # one without them (both rolled when the pipeline keeps the k-loop rolled, tlx.rolled_k_loop;
    # the peeled steps alone with tlx.rolled_epilogue_steps)
    start = kloop.start if kloop.start is not None else E.const(0)
    n = len(moved)
    stores = [If(E.binary("&&", first, E.binary("==", kloop.var, start + c)), m, None) for c, m in enumerate(moved)]
    rolled = kloop.ann().get(ROLLED) or pass_configs(ctx).get(ROLLED_HEAD, False)
    head = dataclasses.replace(kloop, kind="serial" if rolled else "unroll", extent=E.const(n),
                               annotations=(*kloop.annotations, (ROLLED, True)) if rolled else kloop.annotations,
                               body=Seq((*kbody[:issue + 1], *stores, *kbody[issue + 1:])))
    rest = [dataclasses.replace(kloop, start=start + n, extent=E.const(trips - n))] if trips > n else []
    new_tiles = dataclasses.replace(tiles, body=Seq((*stmts[:k], head, *rest, *stmts[k + 1:-1], *keep)))
    flush = If(E.binary(">", tiles.extent, 0), Seq(tuple(moved)), None)
    return rewrite(body, lambda n: Seq((Alloc(regs), Alloc(saved), new_tiles, flush)) if n is tiles else None)
