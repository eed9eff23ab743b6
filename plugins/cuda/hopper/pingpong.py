"""Ping-pong scheduling of two consumer warpgroups (sm_90a, warp-specialized compute loops such as
FlashAttention's): the warpgroups take turns issuing their wgmma groups, so that while one
warpgroup's gemm runs on the tensor cores the other one computes (softmax) instead of both
issuing at once and then both waiting on the ALUs.

Each wgmma issue sequence inside the consumer loop (``tlx_wgmma_arrive`` … ``tlx_wgmma_commit``)
is preceded by ``tlx_pp_wait(wg)`` (``bar.sync 2 + wg``) and followed by ``tlx_pp_pass(wg)``
(``bar.arrive`` on the other warpgroup's barrier), before the wait for the group's completion.
A commit followed by another issue sequence before any wait for a group (hopper/rotate.py's QKᵀ of
block k and P·V of block k-1) shares one turn with it; a rotated loop's prologue and epilogue (its
neighbours) take turns too, when the prologue's block barriers all come before its first issue.
Warpgroup 1 hands the first turn to warpgroup 0 before the loop (or its prologue); after the loop
(or its epilogue) warpgroup 0 takes the one hand-over that is left, so both barriers end balanced.

Taken only when the block has exactly two consumer warpgroups and the consumer loop contains no
block barrier (which would put the warpgroups back in lockstep); every gemm in the loop is
block-collective, so both warpgroups pass the same turns. Switch: ``tlx.pingpong`` (default on;
measured in hopper/config.py)."""

from __future__ import annotations

from typing import Any

from ....core_ir import expr as E
from ....core_ir.stmt import For, If, Seq, Stmt, While
from ....core_ir.visit import rewrite, walk
from ..lir import THREAD, Barrier, Block, Evaluate, Intrin, is_call

CONSUMER_LOOP = "ws_compute_loop"
#: a consumer loop rotated by rotate.py: its neighbours are its prologue and epilogue, whose wgmma
#: issues take turns too
ROTATED = "rotated_loop"


def _call(fn: str, *args: E.Expr) -> Evaluate:
    return Evaluate(Intrin(fn, args))


_WAITS = ("tlx_wgmma_wait0", "TLX_WGMMA_WAIT", "tlx_wgmma_drain")


def _leaves(s: Stmt) -> list[Stmt]:
    if isinstance(s, Seq):
        return [x for c in s.stmts for x in _leaves(c)]
    if isinstance(s, Block):
        return _leaves(s.body)
    return [s]


def _joined(loop: Stmt) -> set[int]:
    """The commits and arrives inside a turn: a commit followed by an issue sequence before any
    wait for a group (or a branch or loop, which end a turn)."""
    out: set[int] = set()
    pending: Stmt | None = None
    for s in _leaves(loop.body if isinstance(loop, For) else loop):
        if is_call(s, "tlx_wgmma_commit"):
            pending = s
        elif is_call(s, "tlx_wgmma_arrive") and pending is not None:
            out |= {id(pending), id(s)}
            pending = None
        elif isinstance(s, (For, If, While)) or any(is_call(s, w) for w in _WAITS):
            pending = None
    return out


def _turns(loop: Stmt, wg: E.Expr) -> Stmt:
    joined = _joined(loop)

    def fn(n: Any) -> Any:
        if isinstance(n, Seq) and any(is_call(s, "tlx_wgmma_arrive") for s in n.stmts):
            out: list[Stmt] = []
            for s in n.stmts:
                if is_call(s, "tlx_wgmma_arrive") and id(s) not in joined:
                    out.append(_call("tlx_pp_wait", wg))
                out.append(s)
                if is_call(s, "tlx_wgmma_commit") and id(s) not in joined:
                    out.append(_call("tlx_pp_pass", wg))
            return Seq(tuple(out), n.loc)
        return None

    return rewrite(loop, fn)


def takes(loop: For, consumers: int) -> bool:
    """Whether ping-pong scheduling takes ``loop`` (a consumer loop of ``consumers`` threads)."""
    nodes = list(walk(loop.body))
    return consumers == 256 and bool(loop.ann().get(CONSUMER_LOOP)) and \
        not any(isinstance(n, Barrier) for n in nodes) and \
        any(isinstance(n, Intrin) and n.fn == "tlx_wgmma_arrive" for n in nodes)


def _barriers_first(s: Stmt) -> bool:
    """Whether every block barrier of ``s`` comes before its first wgmma issue (so that neither
    warpgroup waits for its turn while the other waits at the barrier)."""
    issued = False
    for n in walk(s):
        issued = issued or is_call(n, "tlx_wgmma_arrive")
        if issued and isinstance(n, Barrier):
            return False
    return True


def pingpong(body: Stmt, consumers: int) -> Stmt:
    """``body`` with the consumer loop's wgmma issues taken in turns (unchanged when it does not
    qualify)."""
    if consumers != 256:
        return body
    wg = THREAD // 128

    def fn(n: Any) -> Any:
        if not isinstance(n, Seq):
            return None
        stmts = list(n.stmts)
        for i, s in enumerate(stmts):
            if isinstance(s, For) and takes(s, consumers):
                lo, hi = i, i + 1
                if s.ann().get(ROTATED) and 0 < i < len(stmts) - 1 and _barriers_first(stmts[i - 1]) \
                        and not any(isinstance(x, Barrier) for x in walk(stmts[i + 1])):
                    lo, hi = i - 1, i + 2
                first = If(E.binary("==", wg, 1), _call("tlx_pp_pass", wg), None, s.loc)
                last = If(E.binary("==", wg, 0), _call("tlx_pp_wait", wg), None, s.loc)
                region = [_turns(x, wg) for x in stmts[lo:hi]]
                return Seq((*stmts[:lo], first, *region, last, *stmts[hi:]), n.loc)
        return None

    return rewrite(body, fn)
