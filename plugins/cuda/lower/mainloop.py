"""A gemm-only pipelined loop with register double buffering across k-tiles
(``tlx.prefetch_fragments``).

``pipelining.py`` marks a loop whose body is ``wait(W); sync; copies -> stage (i+S-1)%S; commit;
gemm(stage i%S)``. Lowered as one loop, every k-tile would end with MMAs that overlap no loads,
then a barrier and the next tile's first fragment loads with nothing to hide their latency. Here
the gemm's fragments get two register sets and step kk loads step kk+1 while it computes step kk;
the last step loads the NEXT tile's first fragments, after the barrier that waits for that tile:

    wait(W); sync; frags(tile 0, kk 0) -> set 0
    for i in [0, n):
        for kk in [0, K):              # unrolled; K (k-steps per tile) even, >= 2
            if kk == K-1: wait(W); sync
            frags(kk == K-1 ? (tile i+1, kk 0) : (tile i, kk+1)) -> set (kk+1) % 2
            if kk == 0: copies(tile i+S-1) -> stage (i+S-1) % S; commit
            mma(set kk % 2)

Correctness: (1) the wait in iteration i follows i+S commits (S-1 in the prologue), so wait(S-2)
completes tiles 0..i+1, and the sync makes tile i+1 visible before it is read; (2) the copies of
iteration i overwrite stage (i-1) % S, whose last reads (steps 1..K-1 of tile i-1, loaded during
steps 0..K-2 of iteration i-1) precede the sync of iteration i-1; (3) set (kk+1) % 2 is written
while only set kk % 2 is read (K even, so tile i+1's step 0 lands in set 0). The last iteration
loads fragments of stage n % S that nothing uses (in-bounds shared memory).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.stmt import Alloc, For, Seq, Stmt
from ....core_ir.tileops import Copy, Gemm
from ....core_ir.visit import substitute
from ..lir import U32, AsyncCommit, AsyncWait, Barrier, Block
from .gemm import load_a, load_b, mma_tile, mmas


def lower_mainloop(loop: For, lc: Any, lower: Callable[[Stmt], Stmt]) -> Stmt | None:
    """The double-buffered form of a loop ``pipelining.py`` marked, or ``None`` (lower it as usual)."""
    stmts = loop.body.stmts if isinstance(loop.body, Seq) else ()
    if len(stmts) < 5 or not isinstance(stmts[0], AsyncWait) or not isinstance(stmts[1], Barrier) \
            or not isinstance(stmts[-2], AsyncCommit) or not isinstance(stmts[-1], Gemm) \
            or not all(isinstance(c, Copy) for c in stmts[2:-2]):
        return None
    gemm = stmts[-1]
    plan = lc.gemm.get(id(gemm))
    if plan is None or plan.kind != "mma" or gemm.clear_accum or id(gemm) in lc.hoisted \
            or gemm.A.buffer.scope != "shared" or gemm.B.buffer.scope != "shared":
        return None
    t = mma_tile(gemm, plan)
    if t.ki_n < 2 or t.ki_n % 2:
        return None
    wait = stmts[0].n
    it = loop.var
    first = loop.start if loop.start is not None else E.const(0)
    c_loc = lc.local_of(gemm.C.buffer)
    af = Buffer(lc.fresh("a_frag"), (2 * t.a_regs,), U32, "local")
    bf = Buffer(lc.fresh("b_frag"), (2 * t.b_regs,), U32, "local")

    def frags(kk: int, regs: int, tile: E.Expr) -> Stmt:
        s = Seq((load_a(t, lc, af, E.const(kk), regs * t.a_regs), load_b(t, lc, bf, E.const(kk), regs * t.b_regs)))
        return Block(substitute(s, {it: tile}), "gemm")

    issue = [lower(c) for c in stmts[2:-2]] + [stmts[-2]]
    body: list[Stmt] = []
    for kk in range(t.ki_n):
        last = kk == t.ki_n - 1
        if last:
            body += [AsyncWait(wait), Barrier()]
        body.append(frags(0 if last else kk + 1, (kk + 1) % 2, it + 1 if last else it))
        if kk == 0:
            body += issue
        step = mmas(t, lc, c_loc, af, bf, (kk % 2) * t.a_regs, (kk % 2) * t.b_regs)
        body.append(Block(step, "gemm"))
    main = For(it, loop.extent, "serial", Seq(tuple(body)), loop.start, loop.annotations, loop.loc)
    pre = (Alloc(af), Alloc(bf), AsyncWait(wait), Barrier(), frags(0, 0, first))
    return Seq((*pre, main))
