"""Register control: what ``T.set_max_nreg`` and the register-split hints leave in the IR.

All of it is ``Annotate`` statements, hints for the backend with no effect on a kernel's results
(the interpreter runs none of them):

- ``SET_MAX_NREG`` (data: count, whether it increases): the threads that run it change their
  register budget to ``count`` (Hopper's ``setmaxnreg``), where it stands;
- ``PRODUCER_REGS`` / ``CONSUMER_REGS`` (data: count): at the kernel level, the register split the
  compiler's own warp specialization gives its producer and its consumer warpgroups;
- ``NO_SET_MAX_NREG`` (no data): that warp specialization moves no registers.

A register count is a multiple of 8 from 24 to 256 (``REG_COUNTS``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .source import SourceLoc
from .stmt import Annotate, Stmt
from .visit import walk

__all__ = ["CONSUMER_REGS", "HINTS", "NO_SET_MAX_NREG", "PRODUCER_REGS", "REG_COUNTS", "SET_MAX_NREG",
           "RegisterSplit", "register_split", "sets_max_nreg"]

SET_MAX_NREG = "set_max_nreg"
PRODUCER_REGS = "producer_regs"
CONSUMER_REGS = "consumer_regs"
NO_SET_MAX_NREG = "no_set_max_nreg"
#: the kinds that steer the compiler's warp specialization (kernel-level hints)
HINTS = (PRODUCER_REGS, CONSUMER_REGS, NO_SET_MAX_NREG)
#: the counts ``setmaxnreg`` takes
REG_COUNTS = range(24, 257, 8)


@dataclass(frozen=True)
class RegisterSplit:
    """A kernel's hints for the compiler's warp specialization: the producer's and the consumers'
    registers per thread (``None``: the compiler's choice), whether it moves none, and where the
    hints are written (for errors)."""

    producer: int | None = None
    consumer: int | None = None
    disabled: bool = False
    locs: tuple[SourceLoc | None, ...] = ()


def register_split(body: Stmt) -> RegisterSplit:
    """The register-split hints of a kernel body (the last one of each kind counts)."""
    producer = consumer = None
    disabled = False
    locs: list[SourceLoc | None] = []
    for n in walk(body):
        if not isinstance(n, Annotate) or n.kind not in HINTS:
            continue
        locs.append(n.loc)
        if n.kind == PRODUCER_REGS:
            producer = n.data[0]
        elif n.kind == CONSUMER_REGS:
            consumer = n.data[0]
        else:
            disabled = True
    return RegisterSplit(producer, consumer, disabled, tuple(locs))


def sets_max_nreg(body: Stmt) -> bool:
    """Whether ``body`` changes register budgets itself (``T.set_max_nreg`` and its spellings)."""
    return any(isinstance(n, Annotate) and n.kind == SET_MAX_NREG for n in walk(body))
