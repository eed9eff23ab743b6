"""Running the blocks of a kernel that calls ``T.sync_grid()``.

Without grid barriers the interpreter runs one block after another. With them, every block must
reach a barrier before any leaves it, so each block gets a Python thread of its own (its own copy
of the slots, a forked ``Frame``), and ``Turns`` lets exactly one run at a time: in each *phase*
the blocks run in grid order, each up to its next ``T.sync_grid()`` or its end, and the phase ends
when the last one stops. Blocks share only the global arrays, as on a GPU; one block at a time
keeps the interpreter's element atomics atomic and the results deterministic.

A phase in which some blocks wait at a barrier while others finish means the blocks reach
different numbers of barriers (a deadlock on a GPU): ``TileLangError`` at the barrier's line.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from ...core_ir.errors import BackendNotImplementedError, TileLangError
from ...core_ir.source import SourceLoc
from .turns import TakingTurns, run_in_turns

__all__ = ["MAX_GRID_BLOCKS", "Turns", "run_blocks"]

#: The most blocks the interpreter runs with ``T.sync_grid()`` (one Python thread each).
MAX_GRID_BLOCKS = 1024

_READY, _WAITING, _DONE = "ready", "waiting", "done"


class Turns(TakingTurns):
    """Whose turn it is among the ``n`` blocks of one launch (see the module docstring)."""

    def __init__(self, n: int, on_barrier: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.state = [_READY] * n
        self.finished_in_phase = 0
        self.on_barrier = on_barrier  # called when every block passed a barrier (the race check's)

    def arrive(self, i: int, loc: SourceLoc | None) -> None:
        """Block ``i`` reached a ``T.sync_grid()``: the next block runs; ``i`` resumes in the next phase."""
        with self.cond:
            self.state[i] = _WAITING
            self._pass(i, loc)
            self.wait_turn(i)

    def finish(self, i: int) -> None:
        """Block ``i`` ended."""
        with self.cond:
            self.state[i] = _DONE
            self.finished_in_phase += 1
            self._pass(i, None)

    def _pass(self, i: int, loc: SourceLoc | None) -> None:
        n = len(self.state)
        nxt = next((j for j in range(i + 1, n) if self.state[j] == _READY), None)
        if nxt is None:  # the phase ends
            waiting = [j for j in range(n) if self.state[j] == _WAITING]
            if waiting and self.finished_in_phase:
                self.error = TileLangError(
                    f"T.sync_grid: {self.finished_in_phase} block(s) of {n} ended without reaching a grid barrier "
                    f"that {len(waiting)} other block(s) wait at (on a GPU the kernel would hang)", loc=loc,
                    hint="every block must reach the same number of T.sync_grid() calls: keep them out of "
                    "conditions and loops whose trip count differs between blocks")
            if waiting and self.on_barrier is not None and self.error is None:
                self.on_barrier()
            for j in waiting:
                self.state[j] = _READY
            self.finished_in_phase = 0
            nxt = waiting[0] if waiting else n
        self.turn = nxt
        self.cond.notify_all()


def run_blocks(dims: Sequence[int], start: Callable[[tuple[int, ...], Turns, int], Any],
               loc: SourceLoc | None, on_barrier: Callable[[], None] | None = None) -> None:
    """Run the blocks of grid ``dims`` side by side, one at a time between grid barriers.
    ``start(block, turns, i)`` prepares block ``i`` (the ``i``-th in grid order, x fastest) and
    returns the function that runs it; ``on_barrier()`` runs each time all blocks passed a barrier."""
    blocks = [rev[::-1] for rev in itertools.product(*[range(n) for n in reversed(dims)])]
    if len(blocks) > MAX_GRID_BLOCKS:
        raise BackendNotImplementedError(
            f"the interpreter runs a kernel with T.sync_grid() on at most {MAX_GRID_BLOCKS} blocks (one thread "
            f"each); this grid has {len(blocks)}", loc=loc,
            hint="use fewer, larger blocks (each may loop over several tiles), or run it on a GPU")
    turns = Turns(len(blocks), on_barrier)
    run_in_turns(blocks, turns, start)
