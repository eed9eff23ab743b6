"""The FlashAttention-3 rotation of a warp-specialized compute loop (sm_90a; pass_configs key
``tlx.softmax_rotation``, default on). A loop of the shape

    for k: pre(k) -> S; S += A @ B_k (G1); soft(k); after(k); C += P @ V_k (G2)

(``pre`` writes only the score fragment S, ``soft`` touches neither C nor P, ``after`` starts at
the first statement that does) runs, in its consumer warpgroups, as

    prologue: pre(0); G1(0); wait 0; soft(0); after(0)
    for it in 1..n-1: pre(it); issue G1(it); issue G2(it-1); wait_group 1 (G1 done);
                      soft(it); wait_group 0 (G2 done); after(it)
    epilogue: G2(n-1); wait 0

so the tensor cores compute P·V of block it-1 (and the other warpgroup's gemms, pingpong.py,
which takes both issues as one turn, and the prologue's and epilogue's issues as turns of their
own) while this warpgroup runs the softmax of block it.
Registers: S, P and C live at once (FlashAttention D128, 64 rows per warpgroup: 64 + 32 + 64).
A ``pre`` that initialises S with +0 and -inf only (the causal mask) becomes zero stores, and the
-inf moves after G1, into ``soft`` (``_deferred``).
The copies split into two barrier groups: the tiles ``pre``/G1 read (K) are released once G1
of their iteration has completed, those G2 reads (V) once G2 has, an iteration later.

ptxas schedules a ``wgmma.wait_group`` as early as its register dependences allow, which would
put ``wait_group 0`` before the softmax and serialize the two; the softmax's results are fenced
and the fragment its last statement writes (the row sums, which depend on every score) feeds
stores behind a branch no thread takes (``tlx_sched_pin``), which ptxas does not move the wait
above.

Rotation is legal when G2 of iteration it-1 commutes with pre(it), G1(it) and soft(it) (they do
not touch C, P or what G2 reads; G2 does not touch S) and G2 is the loop's last statement.
Measured on the H200 (2026-11-30, bench/variants.py): FlashAttention D128 +4-7 % non-causal,
0-3 % causal over the ping-pong loop without it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Buffer, Region
from ....core_ir.stmt import Alloc, For, If, Seq, Stmt, Store
from ....core_ir.tileops import Copy, CumSum, Fill, Gemm, Reduce, TileOp
from ....core_ir.visit import buffers_used, walk
from ..analysis import bounds
from ..lir import Barrier, Evaluate, Intrin, PtrTo
from ..pipelining import is_positive_zero
from ..unswitch_mask import parallel_nest
from .pingpong import CONSUMER_LOOP, ROTATED


def _mentions(s: Stmt) -> set[Buffer]:
    return set(buffers_used(s))


def _writes(s: Stmt) -> set[Buffer] | None:
    """Buffers ``s`` writes; ``None`` for statements this module does not know."""
    out: set[Buffer] = set()
    for n in walk(s):
        if isinstance(n, Store):
            out.add(n.buffer)
        elif isinstance(n, Gemm):
            out.add(n.C.buffer)
        elif isinstance(n, (Copy, Fill, Reduce, CumSum)):
            out.add(n.dst.buffer)
        elif isinstance(n, (TileOp, Alloc)):
            return None
    return out


@dataclasses.dataclass(frozen=True)
class Plan:
    pre: list[Stmt]
    g1: Gemm
    soft: list[Stmt]
    after: list[Stmt]
    g2: Gemm
    first: Any  # pipeline._Group of the tiles pre / G1 read
    second: Any  # pipeline._Group of the tiles G2 reads
    masks: list[Stmt] | None = None  # pre as masks applied after a G1 that starts from zero


def match(body: list[Stmt], groups: list[Any]) -> Plan | None:
    """``body``: the loop's statements without the loads; ``groups``: their barrier groups split
    by first and last use (pipeline._groups)."""
    gemms = [i for i, s in enumerate(body) if isinstance(s, Gemm)]
    if len(gemms) != 2 or gemms[1] != len(body) - 1 or \
            sum(isinstance(n, Gemm) for s in body for n in walk(s)) != 2:
        return None
    i1 = gemms[0]
    g1, g2 = body[i1], body[-1]
    assert isinstance(g1, Gemm) and isinstance(g2, Gemm)
    s_buf, c_buf, p_buf = g1.C.buffer, g2.C.buffer, g2.A.buffer
    if s_buf.scope != "fragment" or c_buf.scope != "fragment" or p_buf.scope != "fragment" \
            or g1.A.buffer.scope != "shared" or g1.B.buffer.scope != "shared" \
            or g1.wg_wait != 0 or g2.wg_wait != 0 or s_buf in (c_buf, p_buf) or s_buf in _mentions(g2):
        return None
    pre, mid = body[:i1], body[i1 + 1:-1]
    for s in pre:
        if _writes(s) != {s_buf}:
            return None
    if any({c_buf, p_buf} & _mentions(s) for s in pre + [g1]):
        return None
    split = next((i for i, s in enumerate(mid) if {c_buf, p_buf} & _mentions(s)), len(mid))
    soft, after = mid[:split], mid[split:]
    g2_reads = _mentions(g2) - {c_buf}
    for s in soft + after:
        w = _writes(s)
        if w is None or w & g2_reads - {p_buf} or w & _mentions(g1) - {s_buf}:
            return None
    if len(groups) != 2 or groups[0].last > i1 or groups[1].first != len(body) - 1:
        return None
    deferred = [_deferred(x, s_buf) for x in pre]
    masks = [d for d in deferred if d is not None] if pre and all(d is not None for d in deferred) else None
    return Plan(pre, g1, soft, after, g2, groups[0], groups[1], masks)


# ---- score initialisation as a mask after the gemm -----------------------------------------------
# ``S = init; S += Q @ K^T`` with every init element +0 or -inf (T.clear, FlashAttention's causal
# mask) equals ``S = 0; S += Q @ K^T`` followed by ``S = -inf`` where the init was -inf: x + 0 == x
# and x + -inf == -inf for every finite score. The zero stores fold into the first wgmma; a select
# between two initial values before it costs register moves inside the ping-pong turn.
def _is_const(e: E.Expr, value: float) -> bool:
    if not isinstance(e, E.Const) or e.dtype.is_int:
        return False
    return is_positive_zero(e) if value == 0 else float(e.value) == value


def _deferred(s: Stmt, buf: Buffer) -> Stmt | None:
    """What ``s`` (an initialisation of all of ``buf`` with +0 and -inf) leaves to do after a gemm
    into ``buf`` that starts from zero, or ``None`` when ``s`` is not such an initialisation."""
    if isinstance(s, Fill):
        return Seq(()) if s.dst.buffer is buf and s.dst.is_full() and _is_const(s.value, 0.0) else None
    if isinstance(s, If) and s.otherwise is not None:
        then, other = _deferred(s.then, buf), _deferred(s.otherwise, buf)
        return None if then is None or other is None else If(s.cond, then, other, s.loc)
    if isinstance(s, Seq) and len(s.stmts) == 1:
        return _deferred(s.stmts[0], buf)
    nest = parallel_nest(s)
    if nest is None:
        return None
    loops, inner = nest
    if isinstance(inner, Seq) and len(inner.stmts) == 1:
        inner = inner.stmts[0]
    if any(f.start is not None for f in loops) or not isinstance(inner, Store) or inner.buffer is not buf \
            or len(loops) != len(buf.shape) \
            or any(i is not f.var for i, f in zip(inner.indices, loops)) \
            or any(E.as_int(f.extent) != E.as_int(d) or E.as_int(d) is None for f, d in zip(loops, buf.shape)):
        return None
    v = inner.value
    if _is_const(v, 0.0):
        return Seq(())
    if isinstance(v, E.Select) and _is_const(v.t, 0.0) and _is_const(v.f, -math.inf):
        masked: Stmt = Store(buf, inner.indices, E.select(v.cond, E.Load(buf, inner.indices), v.f), inner.loc)
        for f in reversed(loops):
            masked = dataclasses.replace(f, body=masked)
        return masked
    return None


def _frag_call(fn: str, buf: Buffer) -> Evaluate:
    """``fn`` on all of ``buf``'s registers (the CUDA lowering passes their pointer and count)."""
    return Evaluate(Intrin(fn, (PtrTo(buf, (E.const(0),) * len(buf.shape), "rw"),)))


def _float_fragments(stmts: list[Stmt]) -> list[Buffer]:
    out: list[Buffer] = []
    for s in stmts:
        for b in sorted(_writes(s) or (), key=lambda b: b.name):
            if b.scope == "fragment" and b.dtype == dtypes.float32 and b not in out:
                out.append(b)
    return out


def rotated(plan: Plan, loop: For, at: Any, wait: Any, release: Any,
            ranges: dict[E.Var, tuple[int, int]], shared_written_before: bool = True) -> list[Stmt]:
    """The consumers' statements for ``loop``: ``at(stmt, j)`` is a body statement for iteration
    ``j``, ``wait(group, j)`` / ``release(group, j)`` the barrier calls of iteration ``j``;
    ``ranges``: the block indices' ranges (to prove the loop runs at least once);
    ``shared_written_before``: whether the consumers write shared memory before the loop."""
    n = loop.extent
    it = E.Var(loop.var.name + "_i", loop.var.dtype)
    g1 = dataclasses.replace(plan.g1, wg_wait=-1)
    g2 = dataclasses.replace(plan.g2, wg_wait=-1)
    s_buf, c_buf = g1.C.buffer, g2.C.buffer
    k_grp, v_grp = plan.first, plan.second

    def wait0() -> Stmt:
        return Evaluate(Intrin("tlx_wgmma_wait0", ()))
    fences = _float_fragments(plan.soft)
    # the last statement's results depend on the whole softmax (FlashAttention: the row sums)
    pins = next((f for f in (_float_fragments([s]) for s in reversed(plan.soft)) if f), [])

    # with masks, G1 starts from zero stores, which ptxas folds into the first wgmma (a gemm that
    # clears its accumulators leaves them undefined before it, and ptxas moves registers into them)
    clear = Fill(Region.full(s_buf), E.const(0.0, s_buf.dtype), plan.g1.loc)
    pre, masks = (plan.pre, []) if plan.masks is None else ([clear], plan.masks)

    def head(j: E.Expr) -> list[Stmt]:
        return [*(at(s, j) for s in pre), wait(k_grp, j), at(g1, j)]

    def soft(j: E.Expr) -> list[Stmt]:
        return [at(s, j) for s in masks + plan.soft]

    def after(j: E.Expr) -> list[Stmt]:
        return [at(s, j) for s in plan.after]

    def last_pv(j: E.Expr) -> list[Stmt]:
        return [wait(v_grp, j), at(g2, j), wait0(), _frag_call("tlx_fence_regs", c_buf), release(v_grp, j)]

    zero = E.const(0)
    prologue = [*head(zero), wait0(), _frag_call("tlx_fence_regs", s_buf), release(k_grp, zero), *soft(zero),
                *after(zero)]
    prev = it - 1
    body = [*head(it), wait(v_grp, prev), at(g2, prev),
            Evaluate(Intrin("TLX_WGMMA_WAIT", (E.const(1),))), _frag_call("tlx_fence_regs", s_buf),
            release(k_grp, it), *soft(it),
            *(_frag_call("tlx_fence_regs", b) for b in fences), *(_frag_call("tlx_sched_pin", b) for b in pins),
            wait0(), _frag_call("tlx_fence_regs", c_buf), release(v_grp, prev), *after(it)]
    ann = tuple(loop.annotations) + ((CONSUMER_LOOP, True), (ROTATED, True))
    main = For(it, n - 1, "serial", Seq(tuple(body)), E.const(1), ann, loop.loc)
    # the barrier orders the shared tiles the consumers wrote before the loop (Q, when not loaded by
    # the producer) for the prologue and the loop at once: sync insertion would otherwise put one in
    # the (conditional) prologue and another between it and the loop, which pingpong.py needs adjacent
    out: list[Stmt] = [Barrier() if shared_written_before else Seq(()), Seq(tuple(prologue)), main,
                       Seq(tuple(last_pv(n - 1)))]
    lo = bounds(n, ranges)
    if lo is None or lo[0] < 1:  # (the guards cost registers: ptxas rematerializes in the loop)
        some = E.binary("<", zero, n)
        out[1], out[3] = If(some, out[1], None, loop.loc), If(some, out[3], None, loop.loc)
    return out
