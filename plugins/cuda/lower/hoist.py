"""Loop-invariant A fragments (``tlx.hoist_fragments``): a T.gemm inside a loop whose A tile is a
shared buffer that the loop uses only as gemm A operands at constant offsets (so the loop never
writes it; e.g. FlashAttention's Q tile) has all its k-steps' A fragments loaded into registers
once, before the loop; ``gemm.py`` then reads them instead of issuing ldmatrix every iteration.
The loads form one lowered block before the loop, so ``sync_insertion`` puts a barrier between
them and the writes of the tile that precede the loop."""

from __future__ import annotations

from typing import Any

from ....core_ir import expr as E
from ....core_ir.buffer import Buffer, Region
from ....core_ir.stmt import Alloc, For, Seq, Stmt
from ....core_ir.tileops import Gemm
from ....core_ir.visit import walk
from ..lir import U32, Block
from .gemm import load_a, mma_tile

#: 32-bit registers a loop may keep for hoisted fragments
BUDGET = 32


def hoist_fragments(loop: For, lc: Any) -> list[Stmt]:
    """Registers the hoisted gemms of ``loop`` in ``lc.hoisted``; the statements to put before it."""
    stmts = loop.body.stmts if isinstance(loop.body, Seq) else (loop.body,)
    gemms = [g for g in stmts if isinstance(g, Gemm)]
    if not gemms:
        return []
    a_uses: set[int] = set()
    for n in walk(loop.body):
        if isinstance(n, Gemm):
            a_uses.add(id(n.A))
    out: list[Stmt] = []
    used = 0
    for g in gemms:
        plan = lc.gemm.get(id(g))
        buf = g.A.buffer
        if plan is None or plan.kind != "mma" or buf.scope != "shared" or id(g) in lc.hoisted:
            continue
        if not all(E.as_int(x) is not None for x in g.A.starts):
            continue
        if not _only_gemm_a(loop, buf, a_uses):
            continue
        t = mma_tile(g, plan)
        regs = t.a_regs * t.ki_n
        if used + regs > BUDGET:
            continue
        used += regs
        hb = Buffer(lc.fresh("a_hoist"), (regs,), U32, "local")
        kk = E.Var(lc.fresh("kk"))
        lc.hoisted[id(g)] = hb
        out += [Alloc(hb), Block(For(kk, E.const(t.ki_n), "unroll", load_a(t, lc, hb, kk, kk * t.a_regs)), "gemm")]
    return out


def _only_gemm_a(loop: For, buf: Buffer, a_uses: set[int]) -> bool:
    """Every reference to ``buf`` (or a view of it) inside the loop is a T.gemm's A operand."""
    for n in walk(loop.body):
        ref = getattr(n, "buffer", None)
        if isinstance(ref, Buffer) and ref.storage is buf and not (isinstance(n, Region) and id(n) in a_uses):
            return False
    return True
