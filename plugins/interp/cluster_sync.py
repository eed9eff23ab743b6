"""Running the blocks of a thread-block cluster side by side: a kernel with ``T.cluster_arrive``,
``T.cluster_wait``, ``T.cluster_sync`` or arrivals at other blocks' mbarriers
(``T.barrier_arrive(bar, cta_id)``) and ``cluster_dims`` of more than one block.

The clusters run one after another (they share only global memory, as on a GPU, where nothing
orders them). Within a cluster each block gets a Python thread of its own (a forked ``Frame``) and
``ClusterTurns`` lets one run at a time, in rank order after the one that stops: a block runs until
it waits at the barrier, every warpgroup of its team waits on mbarriers (``Team``'s ``stuck``),
or it ends. Each block registers its slots here when it first initializes mbarriers, for its
peers' arrivals and multicast loads (``multicast``). A block waiting on mbarriers runs again once one of its
waits can go on; when no block of the cluster can, the kernel would hang on a GPU:
``DeadlockError``. A block's arrival counts once every thread of the block arrived
(the whole block executes the barrier statement); its ``k``-th wait returns once every block of
the cluster that has not ended has arrived ``k`` times (PTX: the wait is for all non-exited
threads of the cluster). Each wait must follow an arrival of its own, and an arrival its previous
wait: anything else is undefined in PTX, a ``TileLangError`` here. With those rules the blocks
cannot deadlock: the waiting block with the fewest arrivals can always go on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...core_ir.errors import DeadlockError, TileLangError
from ...core_ir.source import SourceLoc
from .turns import TakingTurns, run_in_turns

__all__ = ["ClusterTurns", "run_cluster"]

_RUN, _WAIT, _MBAR, _DONE = "run", "wait", "mbarrier", "done"
_PAIR_HINT = "follow each T.cluster_arrive() (or T.cluster_arrive_relaxed()) by one T.cluster_wait(), or call " \
             "T.cluster_sync(), which does both"


class ClusterTurns(TakingTurns):
    """The blocks of one cluster, by rank (see the module docstring)."""

    def __init__(self, blocks: Sequence[tuple[int, ...]]) -> None:
        super().__init__()
        self.blocks = list(blocks)
        self.state = [_RUN] * len(blocks)
        self.arrived = [0] * len(blocks)
        self.waited = [0] * len(blocks)
        self.envs: dict[int, list[Any]] = {}  # rank -> the slots of that block, once it initialized barriers
        # a block whose warpgroups all wait on mbarriers: (whether one can go on, what they wait at)
        self.stuck: list[tuple[Callable[[], bool], Callable[[], str], SourceLoc | None] | None] = [None] * len(blocks)

    def arrive(self, i: int, call: str, loc: SourceLoc | None) -> None:
        """Block ``i`` arrives at the cluster barrier."""
        if self.arrived[i] > self.waited[i]:
            raise TileLangError(f"{call}: block {self.blocks[i]} arrives at the cluster barrier again before waiting "
                                "for its last arrival", loc=loc, hint=_PAIR_HINT)
        self.arrived[i] += 1

    def wait(self, i: int, call: str, loc: SourceLoc | None) -> None:
        """Block ``i`` waits until every block of the cluster arrived as often as it did."""
        if self.arrived[i] == self.waited[i]:
            raise TileLangError(f"{call}: block {self.blocks[i]} waits at the cluster barrier without arriving "
                                "first", loc=loc, hint=_PAIR_HINT)
        self.waited[i] += 1
        if self._ready(i):
            return
        with self.cond:
            self.state[i] = _WAIT
            self._pass(i)
            self.wait_turn(i)

    def block_waits(self, i: int, ready: Callable[[], bool], what: Callable[[], str], loc: SourceLoc | None) -> None:
        """Every warpgroup of block ``i`` waits on mbarriers (``what``, the first at ``loc``): the
        other blocks run until ``ready()``."""
        with self.cond:
            self.state[i] = _MBAR
            self.stuck[i] = (ready, what, loc)
            self._pass(i)
            self.wait_turn(i)

    def finish(self, i: int) -> None:
        """Block ``i`` ended."""
        with self.cond:
            self.state[i] = _DONE
            self._pass(i)

    def _ready(self, i: int) -> bool:
        phase = self.arrived[i]
        return all(s == _DONE or a >= phase for s, a in zip(self.state, self.arrived))

    def _pass(self, i: int) -> None:
        """Give the turn to the next block after ``i`` that can run (none: every block ended)."""
        n = len(self.state)
        self.turn = n
        for step in range(1, n + 1):
            j = (i + step) % n
            stuck = self.stuck[j]
            if self.state[j] == _RUN or self.state[j] == _WAIT and self._ready(j) \
                    or self.state[j] == _MBAR and stuck is not None and stuck[0]():
                self.state[j], self.stuck[j] = _RUN, None
                self.turn = j
                break
        else:
            self._deadlock()
        self.cond.notify_all()

    def _deadlock(self) -> None:
        """No block can go on: those waiting on mbarriers would hang on a GPU."""
        stuck = [(j, s) for j, s in enumerate(self.stuck) if self.state[j] == _MBAR and s is not None]
        if stuck and self.error is None:
            others = [f"block {self.blocks[j]} at the cluster barrier" for j, st in enumerate(self.state)
                      if st == _WAIT]
            lines = [f"block {self.blocks[j]}: {s[1]()}" for j, s in stuck] + others
            self.error = DeadlockError(
                "deadlock in a cluster: every block that has not ended waits, so none can go on (on a GPU the kernel "
                f"would hang): {'; '.join(lines)}", loc=stuck[0][1][2],
                hint="check the arrive counts and the peers' arrivals (T.barrier_arrive(bar, cta_id) arrives at the "
                "barrier of the block of rank cta_id) and the parities of the waits")


def run_cluster(blocks: Sequence[tuple[int, ...]], start: Callable[[tuple[int, ...], ClusterTurns, int], Any]) -> None:
    """Run the blocks of one cluster, ``blocks`` in rank order, side by side; ``start(block, turns,
    rank)`` prepares one and returns the function that runs it."""
    turns = ClusterTurns(blocks)
    run_in_turns(blocks, turns, start)
