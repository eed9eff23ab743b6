"""Compiling a kernel with ``T.ws`` regions or explicit mbarriers for the interpreter.

Each block runs as a ``team.Team`` of members, one per warpgroup (one member when the kernel has
barriers but no regions). Every member runs the whole body; ``WarpSpecialize`` runs its body on
the members it names. Statements that the threads of a region (or, outside regions, of the block)
execute together become meetings (``Team.meet``): tile ops, ``T.Parallel`` loops, allocations and
stores of shared or fragment memory, ``T.print``, ``T.sync_threads()``. What belongs to each
thread runs in every member on its own copy: control flow, ``var`` / ``local`` buffers, barrier
arrivals and waits. Each member arrives at a barrier with its warpgroup's threads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tilelang_x.core_ir.errors import TileLangError
from tilelang_x.core_ir.stmt import (
    Alloc,
    Assert,
    BarrierArrive,
    BarrierInit,
    BarrierWait,
    ExprStmt,
    For,
    If,
    Jump,
    Kernel,
    Seq,
    Stmt,
    Store,
    Sync,
    WarpSpecialize,
    While,
)
from tilelang_x.core_ir.tileops import TileOp
from tilelang_x.core_ir.uniformity import written_regions
from tilelang_x.core_ir.verify_ws import WARPGROUP, has_regions
from tilelang_x.core_ir.visit import walk

from .compile_expr import Fn
from .runtime import FRAME
from .team import MBarriers, Team, run_team

if TYPE_CHECKING:
    from .compile import Compiler

__all__ = ["Regions"]

_PRIVATE = ("var", "local")
#: Statements every member runs for itself (control flow, per-thread work, barrier operations).
_OWN = (Seq, If, While, Jump, Assert, ExprStmt, WarpSpecialize, BarrierArrive, BarrierWait)


def _team(env: list) -> tuple[Team, int]:
    frame = env[FRAME]
    return frame.turns, frame.turn


def _private(s: Stmt) -> bool:
    """Whether ``s`` writes only per-thread (``var`` / ``local``) buffers."""
    written = []
    for n in walk(s):
        if isinstance(n, (Store, Alloc)):
            written.append(n.buffer)
        elif isinstance(n, TileOp):
            written += [r.buffer for r in written_regions(n)]
    return bool(written) and all(b.storage.scope in _PRIVATE for b in written)


class Regions:
    """The compile-time state of one kernel with regions or barriers (see the module docstring)."""

    def __init__(self, comp: Compiler, kernel: Kernel) -> None:
        self.comp = comp
        self.members = kernel.num_threads // WARPGROUP if has_regions(kernel.body) else 1
        self.threads = kernel.num_threads // self.members  # each member's threads
        self.everyone = tuple(range(self.members))
        self.region: tuple[int, ...] = self.everyone  # the members of the region being compiled

    # ---- the launch -----------------------------------------------------------------------------
    def run_block(self, env: list, block: tuple[int, ...], body: Fn) -> None:
        """Run one block (its variables already bound in ``env``) as a team."""
        frame = env[FRAME]

        def fork(team: Team, i: int) -> list[Any]:
            return frame.fork(block, team, i).env

        run_team(self.members, block, fork, body)

    # ---- statements -----------------------------------------------------------------------------
    def stmt(self, s: Stmt) -> Fn | None:
        """The closure of a region or barrier statement, or ``None`` for another kind."""
        if isinstance(s, WarpSpecialize):
            return self._region(s)
        if isinstance(s, Alloc) and s.buffer.scope == "barrier":
            return lambda env: None
        if isinstance(s, BarrierInit):
            return self._init(s)
        if isinstance(s, BarrierArrive):
            return self._arrive(s)
        if isinstance(s, BarrierWait):
            return self._wait(s)
        return None

    def wrap(self, s: Stmt, fn: Fn | None) -> Fn | None:
        """``fn``, the closure of ``s`` outside ``T.Parallel``, made a meeting of the region's
        members when they execute ``s`` together."""
        if isinstance(s, Sync) and s.scope == "block":
            fn = lambda env: None  # noqa: E731 - a meeting with nothing to run
        if fn is None or isinstance(s, _OWN) or isinstance(s, For) and s.kind != "parallel" or _private(s) \
                or isinstance(s, Alloc) and s.buffer.scope == "barrier":
            return fn
        members = self.region
        binds = self._binds(s)
        what = f"`{type(s).__name__}`" if not isinstance(s, TileOp) else f"T.{s.name}"
        loc = s.loc
        key = id(s)

        def meeting(env: list) -> None:
            team, i = _team(env)

            def run() -> None:
                fn(env)
                for j in members:
                    for k in binds:
                        team.envs[j][k] = env[k]

            team.meet(i, key, members, run, loc, what)

        return meeting

    def _binds(self, s: Stmt) -> list[int]:
        """The slots that running ``s`` binds, which every member must see."""
        if isinstance(s, (Alloc, BarrierInit)):
            comp = self.comp
            return [comp.buffer_slot(s.buffer)] + [comp.buffer_slot(v) for v in comp.views.get(s.buffer, ())]
        return []

    def _region(self, s: WarpSpecialize) -> Fn | None:
        outer, self.region = self.region, s.ids
        try:
            body = self.comp.stmt(s.body)
        finally:
            self.region = outer
        if body is None:
            return None
        ids = frozenset(s.ids)

        def region(env: list) -> None:
            if env[FRAME].turn in ids:
                body(env)

        return region

    def _init(self, s: BarrierInit) -> Fn:
        slot = self.comp.buffer_slot(s.buffer)
        counts = s.counts

        def init(env: list) -> None:
            env[slot] = MBarriers(counts)

        return init

    def _which(self, s: BarrierArrive | BarrierWait) -> Callable[[list], tuple[MBarriers, int]]:
        slot = self.comp.buffer_slot(s.buffer)
        findex = self.comp.expr(s.index, s.loc)
        name, loc = s.buffer.name, s.loc

        def which(env: list) -> tuple[MBarriers, int]:
            bars = env[slot]
            k = int(findex(env))
            if not isinstance(bars, MBarriers):
                raise TileLangError(f"barrier `{name}` is used before T.alloc_barrier", loc=loc)
            if not 0 <= k < len(bars.counts):
                raise TileLangError(f"barrier index {k} is out of range for `{name}`, which holds {len(bars.counts)}",
                                    loc=loc)
            return bars, k

        return which

    def _arrive(self, s: BarrierArrive) -> Fn:
        which = self._which(s)
        threads = self.threads

        def arrive(env: list) -> None:
            bars, k = which(env)
            bars.arrive(k, threads)

        return arrive

    def _wait(self, s: BarrierWait) -> Fn:
        which = self._which(s)
        fparity = self.comp.expr(s.parity, s.loc)
        loc = s.loc
        what = f"T.barrier_wait({s.buffer.name}[{s.index}], {s.parity})"

        def wait(env: list) -> None:
            bars, k = which(env)
            p = fparity(env)
            if int(p) not in (0, 1) or isinstance(p, np.ndarray):
                raise TileLangError(f"T.barrier_wait: parity {p} is neither 0 nor 1", loc=loc,
                                    hint="a phase parity is 0 or 1: write `k % 2` rather than `k`")
            team, i = _team(env)
            team.wait_until(i, lambda: bars.completed(k, int(p)), loc, what)

        return wait
