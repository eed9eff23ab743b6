"""Python threads of which exactly one runs at a time, handing the turn to one another: the blocks
of a kernel with ``T.sync_grid()`` (``grid_sync``) and the warpgroups of a block with ``T.ws``
regions (``team``). One runner at a time keeps the interpreter's element atomics atomic and its
results deterministic."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Aborted", "TakingTurns", "run_in_turns", "run_side_by_side"]


class Aborted(Exception):
    """Ends a runner's thread once another runner failed (the failure is what the launch raises)."""


class TakingTurns:
    """Whose turn it is (``turn``); subclasses decide who runs next."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.turn = 0
        self.error: BaseException | None = None

    def wait_turn(self, i: int) -> None:
        """With ``cond`` held: sleep until it is runner ``i``'s turn (``Aborted`` once one failed)."""
        self.cond.wait_for(lambda: self.turn == i or self.error is not None)
        if self.error is not None:
            raise Aborted

    def start(self, i: int) -> None:
        """Runner ``i`` waits for its first turn."""
        with self.cond:
            self.wait_turn(i)

    def fail(self, error: BaseException) -> None:
        """A runner raised ``error``: every other runner stops."""
        with self.cond:
            if self.error is None:
                self.error = error
            self.cond.notify_all()


def run_side_by_side(n: int, run: Callable[[int], None], turns: TakingTurns, name: Callable[[int], str]) -> None:
    """Call ``run(i)`` for ``i`` in ``range(n)``, each in a thread named ``name(i)`` that takes turns
    through ``turns``; raise the first failure once all have ended."""

    def runner(i: int) -> None:
        try:
            run(i)
        except Aborted as e:  # a failure of this group (already its error) or of an enclosing one: stop the others
            turns.fail(e)
        except BaseException as e:  # noqa: BLE001 - handed to the launching thread
            turns.fail(e)

    threads = [threading.Thread(target=runner, args=(i,), name=f"tilelang-x {name(i)}", daemon=True)
               for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if turns.error is not None:
        raise turns.error


def run_in_turns(blocks: Sequence[tuple[int, ...]], turns: Any,
                 start: Callable[[tuple[int, ...], Any, int], Callable[[], None]]) -> None:
    """Run the ``blocks`` side by side: ``start(block, turns, i)`` prepares block ``i`` and returns
    the function that runs it, between ``turns.start(i)`` and ``turns.finish(i)``."""

    def run(i: int) -> None:
        fn = start(blocks[i], turns, i)
        turns.start(i)
        fn()
        turns.finish(i)

    run_side_by_side(len(blocks), run, turns, lambda i: f"block {blocks[i]}")
