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
  fit the register file together (``check_region_budget``): else an increase waits forever.
- The compiler's own warp specialization (hopper/pipeline.py) gives its producer warpgroup
  ``tlx.producer_regs`` (or the kernel's ``T.annotate_producer_reg_dealloc``) and its consumers
  the kernel's ``T.annotate_consumer_reg_alloc``, or else what the register file leaves, at most
  240 (``ws_split``). With one consumer warpgroup the block starts with all the registers a thread
  can hold, so nothing moves; ``T.no_set_max_nreg()`` moves nothing either.
"""

from __future__ import annotations

import logging

from ...core_ir import expr as E
from ...core_ir.errors import TileLangSyntaxError
from ...core_ir.registers import SET_MAX_NREG, register_split
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


def entry_registers(threads: int) -> int:
    """The registers per thread a kernel of ``threads`` threads under ``__launch_bounds__(threads,
    1)`` starts with."""
    return min(MAX_PER_THREAD, REGISTER_FILE // threads) // GRANULE * GRANULE


def ws_split(body: Stmt, consumers: int, producers: int, default_producer: int) -> tuple[int, int] | None:
    """The (producer, consumer) registers per thread of a kernel the compiler warp-specializes into
    ``producers`` producer and ``consumers`` consumer threads, or ``None`` when no registers move.
    A split the register file cannot hold, or that moves registers the wrong way, is a
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
    left = (REGISTER_FILE - producers * producer) // consumers // GRANULE * GRANULE
    consumer = min(MAX_CONSUMER, left) if hints.consumer is None else hints.consumer
    entry = entry_registers(consumers + producers)
    if producers * producer + consumers * consumer > REGISTER_FILE:
        raise TileLangSyntaxError(
            f"the register split producer {producer} / consumers {consumer} needs {producers} x {producer} + "
            f"{consumers} x {consumer} = {producers * producer + consumers * consumer} registers, more than the "
            f"{REGISTER_FILE} of an SM (the consumers' setmaxnreg.inc would wait forever)", loc=where,
            hint=f"give the consumers at most {left}, or the producer fewer")
    if producer > entry or consumer < entry:
        raise TileLangSyntaxError(
            f"the register split producer {producer} / consumers {consumer}: a block of {consumers + producers} "
            f"threads starts with {entry} registers per thread, which the producer can only lower and the "
            "consumers only raise", loc=where,
            hint=f"give the producer at most {entry} and the consumers at least {entry}")
    return producer, consumer


def check_region_budget(kernel: Kernel) -> None:
    """Refuse the ``setmaxnreg`` of a kernel's ``T.ws`` regions that cannot work on sm_90a: an
    increase below, or a decrease above, the registers the block starts with, or warpgroups whose
    first counts (the others keep the starting one) add up to more than the register file, which
    leaves an increase waiting forever (``TileLangSyntaxError`` at the call)."""
    entry = entry_registers(kernel.num_threads)
    first: dict[int, Annotate] = {}
    for region in (n for n in walk(kernel.body) if isinstance(n, WarpSpecialize)):
        for call in (n for n in walk(region.body) if isinstance(n, Annotate) and n.kind == SET_MAX_NREG):
            count, inc = call.data
            if count < entry if inc else count > entry:
                raise TileLangSyntaxError(
                    f"T.{'inc' if inc else 'dec'}_max_nreg({count}) in {region.call}: a block of "
                    f"{kernel.num_threads} threads starts with {entry} registers per thread, which an increase can "
                    "only raise and a decrease only lower", loc=call.loc,
                    hint=f"{'raise to at least' if inc else 'lower to at most'} {entry}")
            for g in region.ids:
                first.setdefault(g, call)
    counts = {g: first[g].data[0] if g in first else entry for g in range(kernel.num_threads // WARPGROUP)}
    total = WARPGROUP * sum(counts.values())
    if total > REGISTER_FILE:
        call = max((c for c in first.values() if c.data[1]), key=lambda c: c.data[0])
        raise TileLangSyntaxError(
            f"T.inc_max_nreg({call.data[0]}): the warpgroups' registers per thread "
            f"({', '.join(str(counts[g]) for g in sorted(counts))}) need {total} registers, more than the "
            f"{REGISTER_FILE} of an SM: the increase would wait forever", loc=call.loc,
            hint="give the producer fewer (24) or the consumers fewer, so that 128 x the sum fits")
