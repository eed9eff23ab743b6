"""Ping-pong scheduling of two consumer warpgroups (sm_90a, warp-specialized compute loops such as
FlashAttention's): the warpgroups take turns issuing their wgmma groups, so that while one
warpgroup's gemm runs on the tensor cores the other one computes (softmax) instead of both
issuing at once and then both waiting on the ALUs.

Each wgmma issue sequence inside the consumer loop (``tlx_wgmma_arrive`` … ``tlx_wgmma_commit``)
is preceded by ``tlx_pp_wait(wg)`` (``bar.sync 2 + wg``) and followed by ``tlx_pp_pass(wg)``
(``bar.arrive`` on the other warpgroup's barrier), before the wait for the group's completion.
Warpgroup 1 hands the first turn to warpgroup 0 before the loop; after the loop warpgroup 0 takes
the one hand-over that is left, so both barriers end balanced.

Taken only when the block has exactly two consumer warpgroups and the consumer loop contains no
block barrier (which would put the warpgroups back in lockstep); every gemm in the loop is
block-collective, so both warpgroups pass the same turns. Switch: ``tlx.pingpong`` (default on;
measured in hopper/config.py)."""

from __future__ import annotations

from typing import Any

from ....core_ir import expr as E
from ....core_ir.stmt import For, If, Seq, Stmt
from ....core_ir.visit import rewrite, walk
from ..lir import THREAD, Barrier, Evaluate, Intrin, is_call

CONSUMER_LOOP = "ws_compute_loop"


def _call(fn: str, *args: E.Expr) -> Evaluate:
    return Evaluate(Intrin(fn, args))


def _turns(loop: For, wg: E.Expr) -> For:
    def fn(n: Any) -> Any:
        if isinstance(n, Seq) and any(is_call(s, "tlx_wgmma_arrive") for s in n.stmts):
            out: list[Stmt] = []
            for s in n.stmts:
                if is_call(s, "tlx_wgmma_arrive"):
                    out.append(_call("tlx_pp_wait", wg))
                out.append(s)
                if is_call(s, "tlx_wgmma_commit"):
                    out.append(_call("tlx_pp_pass", wg))
            return Seq(tuple(out), n.loc)
        return None

    return rewrite(loop, fn)


def _qualifies(loop: For) -> bool:
    nodes = list(walk(loop.body))
    return not any(isinstance(n, Barrier) for n in nodes) and \
        any(isinstance(n, Intrin) and n.fn == "tlx_wgmma_arrive" for n in nodes)


def pingpong(body: Stmt, consumers: int) -> Stmt:
    """``body`` with the consumer loop's wgmma issues taken in turns (unchanged when it does not
    qualify)."""
    if consumers != 256:
        return body
    wg = THREAD // 128

    def fn(n: Any) -> Any:
        if isinstance(n, For) and n.ann().get(CONSUMER_LOOP) and _qualifies(n):
            first = If(E.binary("==", wg, 1), _call("tlx_pp_pass", wg), None, n.loc)
            last = If(E.binary("==", wg, 0), _call("tlx_pp_wait", wg), None, n.loc)
            return Seq((first, _turns(n, wg), last), n.loc)
        return None

    return rewrite(body, fn)
