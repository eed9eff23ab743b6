"""Register reallocation on CUDA (``setmaxnreg``, sm_90a only; core_ir/registers.py).

- A kernel's own ``T.set_max_nreg`` (and its spellings) is ``TLX_SETMAXNREG_INC`` / ``_DEC`` where
  it stands (include/tlx_hopper.h). On a target without the instruction (sm_80 to sm_90) it is a
  register-allocation hint with no effect on results: dropped, with a debug log line.
- ``setmaxnreg`` needs the register count each thread starts with fixed at compile time: a kernel
  that uses it gets ``__launch_bounds__(threads, 1)`` (launch_bounds.py), unless it asks for
  another count of blocks per SM. It then starts with ``entry_registers(threads)``; an increase
  must not ask for fewer, a decrease not for more.
- In a kernel's ``T.ws`` regions (its branches on whole warpgroups included), each warpgroup's
  first ``setmaxnreg`` must move from that count the right way, and the warpgroups' counts must
  fit the block's registers together (``check_region_budget``): else an increase waits forever.
- The compiler's own warp specialization (hopper/pipeline.py) gives its producer warpgroup
  ``tlx.producer_regs`` (or the kernel's ``T.annotate_producer_reg_dealloc``) and its consumers
  the kernel's ``T.annotate_consumer_reg_alloc``, or else what the block's registers leave, at
  most 240 (``ws_split``): setmaxnreg moves registers within the block, which starts with
  ``threads x entry_registers(threads)``. With one consumer warpgroup the block starts with all
  the registers a thread can hold, so nothing moves; ``T.no_set_max_nreg()`` moves nothing either.
"""

from __future__ import annotations

import logging

from ...core_ir import expr as E
from ...core_ir.errors import TileLangSyntaxError
from ...core_ir.registers import SET_MAX_NREG, register_split
from ...core_ir.source import SourceLoc
from ...core_ir.stmt import Annotate, Kernel, Seq, Stmt, WarpSpecialize
from ...core_ir.verify_ws import WARPGROUP
from ...core_ir.visit import walk
from .lir import Evaluate, Intrin

__all__ = ["REGISTER_FILE", "check_region_budget", "entry_registers", "lower_set_max_nreg", "moves_registers",
           "ws_split"]

log = logging.getLogger("tilelang_x.cuda.registers")

#: 32-bit registers per SM (sm_80 to sm_90)
REGISTER_FILE = 65536
#: the most registers a thread can hold
MAX_PER_THREAD = 255
#: registers are allocated to a thread in multiples of this
GRANULE = 8
#: the most registers the compiler's warp specialization gives its consumers
MAX_CONSUMER = 240
_INTRINS = ("TLX_SETMAXNREG_INC", "TLX_SETMAXNREG_DEC")


def lower_set_max_nreg(s: Annotate, available: bool) -> Stmt:
    """The CUDA form of a ``T.set_max_nreg`` (an ``Annotate`` of kind ``set_max_nreg``)."""
    count, inc = s.data
    if not available:
        log.debug("T.set_max_nreg(%d, %d) at line %s: no setmaxnreg on this target (sm_90a only); dropped", count,
                  int(inc), getattr(s.loc, "line", "?"))
        return Seq(())
    return Evaluate(Intrin(_INTRINS[0] if inc else _INTRINS[1], (E.const(count),)), s.loc)


def moves_registers(body: Stmt) -> bool:
    """Whether lowered code ``body`` reallocates registers (and so needs an entry register cap)."""
    return any(isinstance(n, Intrin) and n.fn in _INTRINS for n in walk(body))


def entry_registers(threads: int, blocks: int = 1) -> int:
    """The registers per thread a kernel of ``threads`` threads under ``__launch_bounds__(threads,
    blocks)`` starts with (what ptxas gives a kernel that calls setmaxnreg)."""
    return min(MAX_PER_THREAD, REGISTER_FILE // (threads * blocks)) // GRANULE * GRANULE


def ws_split(body: Stmt, consumers: int, producers: int, default_producer: int) -> tuple[int, int] | None:
    """The (producer, consumer) registers per thread of a kernel the compiler warp-specializes into
    ``producers`` producer and ``consumers`` consumer threads, or ``None`` when no registers move.
    A split the block's registers cannot hold, or that moves registers the wrong way, is a
    ``TileLangSyntaxError`` at the kernel's hint."""
    hints = register_split(body)
    where = hints.locs[-1] if hints.locs else None
    if hints.disabled:
        return None
    if consumers < 2 * producers:
        if hints.producer is not None or hints.consumer is not None:
            log.debug("register hints at line %s: one consumer warpgroup starts with all the registers a thread can "
                      "hold; no setmaxnreg", getattr(where, "line", "?"))
        return None
    producer = default_producer if hints.producer is None else hints.producer
    entry = entry_registers(consumers + producers)
    left = ((consumers + producers) * entry - producers * producer) // consumers // GRANULE * GRANULE
    consumer = min(MAX_CONSUMER, left) if hints.consumer is None else hints.consumer
    counts = [producer] * (producers // WARPGROUP) + [consumer] * (consumers // WARPGROUP)
    _fits(entry, consumers + producers, counts, where, f"give the consumers at most {left}")
    if producer > entry or consumer < entry:
        raise TileLangSyntaxError(
            f"the register split producer {producer} / consumers {consumer}: a block of {consumers + producers} "
            f"threads starts with {entry} registers per thread, which the producer can only lower and the "
            "consumers only raise", loc=where,
            hint=f"give the producer at most {entry} and the consumers at least {entry}")
    return producer, consumer


def _fits(entry: int, threads: int, counts: list[int], loc: SourceLoc | None, hint: str) -> None:
    """Refuse warpgroup register counts (per thread) that need more registers than the block starts
    with: setmaxnreg only moves registers within the block's pool, so an increase would wait forever."""
    total = WARPGROUP * sum(counts)
    if total > threads * entry:
        raise TileLangSyntaxError(
            f"the warpgroups' registers per thread ({', '.join(map(str, counts))}) need {total} registers, more "
            f"than the {threads * entry} a block of {threads} threads starts with ({entry} each): setmaxnreg moves "
            "registers within the block, so an increase would wait forever", loc=loc, hint=hint)


def check_region_budget(kernel: Kernel, blocks: int) -> None:
    """Refuse the ``setmaxnreg`` of a kernel's ``T.ws`` regions (``blocks`` of it per SM) that
    cannot work on sm_90a: an increase below, or a decrease above, the registers the block starts
    with, or warpgroups whose first counts (the others keep the starting one) need more than the
    block's registers, which leaves an increase waiting forever (``TileLangSyntaxError`` at the
    call)."""
    threads = kernel.num_threads
    entry = entry_registers(threads, blocks)
    first: dict[int, Annotate] = {}
    for region in (n for n in walk(kernel.body) if isinstance(n, WarpSpecialize)):
        for call in (n for n in walk(region.body) if isinstance(n, Annotate) and n.kind == SET_MAX_NREG):
            count, inc = call.data
            if count < entry if inc else count > entry:
                raise TileLangSyntaxError(
                    f"T.{'inc' if inc else 'dec'}_max_nreg({count}) in {region.call}: a block of {threads} threads "
                    f"starts with {entry} registers per thread, which an increase can only raise and a decrease "
                    "only lower", loc=call.loc, hint=f"{'raise to at least' if inc else 'lower to at most'} {entry}")
            for g in region.ids:
                first.setdefault(g, call)
    raised = [c for c in first.values() if c.data[1]]
    if raised:
        call = max(raised, key=lambda c: c.data[0])
        counts = [first[g].data[0] if g in first else entry for g in range(threads // WARPGROUP)]
        _fits(entry, threads, counts, call.loc, "give the producer fewer (24) or the consumers fewer")
