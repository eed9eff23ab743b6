"""Running the warpgroups (or warps) of one block side by side: ``T.ws`` regions, mbarriers and
named barriers.

In a kernel with ``T.ws`` regions (or explicit barriers) each warpgroup of a block is a *member*
of the block's ``Team``: a Python thread with its own copy of the slots (a forked ``Frame``, so its
own loop variables and ``var`` / ``local`` buffers, as registers are per thread), sharing the
block's shared and fragment arrays. In a kernel with named barriers each warp is a member. Exactly
one member runs at a time; it keeps running until it must wait, then the next member that can go
on runs, in member order after it. So runs are deterministic, and the interpreter's tile ops stay
atomic.

A member waits at
- a ``T.barrier_wait`` whose phase has not completed (``MBarriers``);
- a ``T.sync_threads(id, count)`` until the named barrier completes (``NamedBarriers``);
- a *meeting*: a statement the region's warpgroups (all members outside regions) execute
  together (a tile op, a ``T.Parallel`` loop, an allocation, a store to shared memory, a
  ``T.sync_threads()``). The last member to arrive runs it once, for all of them; the others go on
  after it. This is the block barrier a GPU needs around such statements anyway.

When every member that has not ended waits, none can go on (on a GPU the block would hang):
``DeadlockError`` naming what each one waits at; unless the block is one of a cluster whose blocks
run side by side (``cluster_sync``), whose other blocks may arrive on its mbarriers: they run until
one of its waits can go on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from ...core_ir.errors import DeadlockError, TileLangError
from ...core_ir.expr import WARP_SIZE
from ...core_ir.source import SourceLoc
from .turns import TakingTurns, run_side_by_side

__all__ = ["MBarriers", "NamedBarriers", "PendingWrite", "Stuck", "Team", "run_team"]

#: ``stuck(ready, what, loc)``: every member of a block waits (``what``, the first at ``loc``); returns
#: once ``ready()`` (another block of its cluster made a wait go on)
Stuck = Callable[[Callable[[], bool], Callable[[], str], SourceLoc | None], None]

_RUN, _WAIT, _DONE = "run", "wait", "done"


class MBarriers:
    """The mbarriers of one ``T.alloc_barrier``: per barrier, the arrivals a phase needs, those
    still missing from the current phase, the transaction bytes expected and not yet landed, and
    the current phase's parity. A phase completes once its arrivals are all in and its bytes
    balance (backends.md A4)."""

    def __init__(self, counts: Sequence[int]) -> None:
        self.counts = list(counts)
        self.missing = list(counts)
        self.tx = [0] * len(counts)
        self.phase = [0] * len(counts)

    def arrive(self, k: int, threads: int) -> int:
        """``threads`` threads arrive at barrier ``k``, one after another: each ``counts[k]``-th
        arrival whose phase has no bytes outstanding completes it. Returns the arrivals that found
        their phase's arrivals all in but its bytes still outstanding (0 for a correct kernel)."""
        while threads:
            if not self.missing[k]:
                return threads
            take = min(threads, self.missing[k])
            self.missing[k] -= take
            threads -= take
            self._settle(k)
        return 0

    def expect(self, k: int, nbytes: int) -> None:
        """The current phase of barrier ``k`` waits for ``nbytes`` more transaction bytes."""
        self.tx[k] += nbytes

    def complete(self, k: int, nbytes: int) -> None:
        """``nbytes`` transaction bytes have landed on barrier ``k``."""
        self.tx[k] -= nbytes
        self._settle(k)

    def _settle(self, k: int) -> None:
        if not self.missing[k] and not self.tx[k]:
            self.phase[k] ^= 1
            self.missing[k] = self.counts[k]

    def completed(self, k: int, parity: int) -> bool:
        """Whether the phase of parity ``parity`` of barrier ``k`` has completed (the last phase
        of that parity: the current one has the other parity)."""
        return self.phase[k] != parity

    def pending(self, k: int) -> str:
        """What the current phase of barrier ``k`` still waits for, in words."""
        out = f"{self.missing[k]} of {self.counts[k]} arrivals"
        if self.tx[k]:
            out += f", {self.tx[k]} expected transaction bytes"
        return out


class PendingWrite:
    """A cp.async copy read at its issue whose values land in shared memory at the first wait of
    a thread that committed it (every thread of the region committed it: it lands once)."""

    def __init__(self, land: Callable[[], None]) -> None:
        self.land: Callable[[], None] | None = land

    def __call__(self) -> None:
        if self.land is not None:
            land, self.land = self.land, None
            land()


_MBARRIER_HINT = ("check the arrive counts (threads that arrive per phase) and the parities: a wait for parity p "
                  "returns once the barrier's phase of parity p has completed; a fresh barrier is in phase 0, so "
                  "waiting for parity 1 returns at once; a phase with expected transaction bytes "
                  "(T.mbarrier_expect_tx) completes only once copies deliver them (a T.tma_copy delivers the "
                  "bytes it expects itself)")
_NAMED_HINT = ("check the named barriers' arrive counts: barrier id completes once arrive_count threads (whole warps) "
               "have arrived at it with T.sync_threads(id, count) or T.named_barrier_arrive(id, count)")


class NamedBarriers:
    """The named barriers of one block: per id, the threads arrived since it last completed, the
    count it completes at, and how many times it has completed. Threads arrive a warp at a time."""

    def __init__(self) -> None:
        self.state: dict[int, list[int]] = {}  # id -> [threads arrived, count, completions]

    def arrive(self, bar: int, count: int, call: str, loc: SourceLoc | None) -> int:
        """A warp arrives at barrier ``bar`` of ``count`` threads; returns the completions before."""
        st = self.state.setdefault(bar, [0, count, 0])
        if st[0] and st[1] != count:
            raise TileLangError(f"{call}: barrier {bar} is in use by {st[1]} threads, not {count}", loc=loc,
                                hint="every use of a named barrier gives the same arrive_count")
        st[1] = count
        done = st[2]
        st[0] += WARP_SIZE
        if st[0] == count:
            st[0], st[2] = 0, done + 1
        return done

    def completed(self, bar: int, before: int) -> bool:
        """Whether barrier ``bar`` has completed since it had completed ``before`` times."""
        return self.state[bar][2] != before


class Team(TakingTurns):
    """The members (warpgroups or warps) of one block; see the module docstring."""

    def __init__(self, n: int, block: tuple[int, ...], member: str = "warpgroup", stuck: Stuck | None = None) -> None:
        """``stuck``: a block of a cluster run side by side (``cluster_sync``), where the block's
        members all waiting lets the cluster's other blocks run until one of the waits can go on."""
        super().__init__()
        self.block = block
        self.member = member
        self.stuck = stuck
        self.named = NamedBarriers()
        self.state = [_RUN] * n
        self.waits: list[tuple[Callable[[], bool], SourceLoc | None, str] | None] = [None] * n
        self.envs: list[list[Any]] = []
        self.meetings: dict[int, list[Any]] = {}  # statement -> [members arrived, times it ran]
        # per member, its committed cp.async groups, oldest first: each the writes still to land
        self.async_groups: list[list[list[PendingWrite]]] = [[] for _ in range(n)]

    def wait_until(self, i: int, ready: Callable[[], bool], loc: SourceLoc | None,
                   what: str | Callable[[], str]) -> None:
        """Member ``i`` goes on once ``ready()``; meanwhile the others run. ``what`` it waits at (a
        callable: worded when a deadlock is reported)."""
        if ready():
            return
        with self.cond:
            self.state[i] = _WAIT
            self.waits[i] = (ready, loc, what)
            self._pass(i)
            self.wait_turn(i)

    def meet(self, i: int, key: int, members: tuple[int, ...], run: Callable[[], None], loc: SourceLoc | None,
             what: str) -> None:
        """Member ``i`` reached the statement ``key`` that ``members`` execute together: the last of
        them to arrive calls ``run()``."""
        if len(members) == 1:
            run()
            return
        m = self.meetings.setdefault(key, [set(), 0])
        m[0].add(i)
        if len(m[0]) == len(members):
            m[0] = set()
            m[1] += 1
            run()
            return
        seen = m[1]
        others = ", ".join(str(j) for j in members if j not in m[0])
        self.wait_until(i, lambda: m[1] != seen, loc, f"{what}, which {self.member}(s) {others} must reach too")

    def finish(self, i: int) -> None:
        with self.cond:
            self.state[i] = _DONE
            self._pass(i)

    def _pass(self, i: int) -> None:
        """Give the turn to the next member after ``i`` that can run."""
        n = len(self.state)
        while True:
            for step in range(1, n + 1):
                j = (i + step) % n
                wait = self.waits[j]
                if self.state[j] == _RUN or self.state[j] == _WAIT and wait is not None and wait[0]():
                    self.state[j], self.waits[j] = _RUN, None
                    self.turn = j
                    self.cond.notify_all()
                    return
            waiting = [(j, w) for j, w in enumerate(self.waits) if self.state[j] == _WAIT and w is not None]
            if not waiting or self.stuck is None:
                break
            ready = [w[0] for _, w in waiting]
            self.stuck(functools.partial(_any, ready), functools.partial(self._waits, waiting), waiting[0][1][1])
        if waiting:
            block = ", ".join(str(b) for b in self.block)
            lines = self._waits(waiting)
            self.error = DeadlockError(
                f"deadlock in block ({block}): every {self.member} that has not ended waits, so none can go on "
                f"(on a GPU the kernel would hang): {lines}", loc=waiting[0][1][1],
                hint=_NAMED_HINT if self.member == "warp" else _MBARRIER_HINT)
        self.turn = n
        self.cond.notify_all()

    def _waits(self, waiting: list[tuple[int, Any]]) -> str:
        return "; ".join(f"{self.member} {j} at {w[2]() if callable(w[2]) else w[2]} ({w[1]})" for j, w in waiting)


def _any(ready: list[Callable[[], bool]]) -> bool:
    return any(r() for r in ready)


def run_team(n: int, block: tuple[int, ...], fork: Callable[[Team, int], list[Any]],
             body: Callable[[list[Any]], None], member: str = "warpgroup", stuck: Stuck | None = None) -> None:
    """Run ``body`` once per member of a block's team of ``n``; ``fork(team, i)`` makes member
    ``i``'s environment; ``stuck``: see ``Team``."""
    team = Team(n, block, member, stuck)
    team.envs = [fork(team, i) for i in range(n)]

    def run(i: int) -> None:
        team.start(i)
        body(team.envs[i])
        team.finish(i)

    run_side_by_side(n, run, team, lambda i: f"{member} {i} of block {block}")
