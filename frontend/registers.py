"""TileLang's register control (``T.set_max_nreg`` and its spellings, the register-split hints).

Hopper lets a warpgroup give registers back to the block's pool or take more from it
(``setmaxnreg``), so that a producer warpgroup that only issues copies runs on few registers and
the consumers that hold the accumulators on many. None of this changes what a kernel computes:

- ``T.set_max_nreg(n, is_inc)``, ``T.inc_max_nreg(n)``, ``T.dec_max_nreg(n)``: the threads that
  run it change their register budget to ``n`` there (CUDA sm_90a: ``setmaxnreg``; other targets,
  the interpreter included, drop it);
- ``T.annotate_producer_reg_dealloc(n)``, ``T.annotate_consumer_reg_alloc(n)`` at the kernel level:
  the producer / consumer registers of the compiler's own warp specialization in this kernel;
  written in a ``T.ws`` region or a branch on the thread index (a kernel specialized by hand),
  they are ``T.dec_max_nreg(n)`` / ``T.inc_max_nreg(n)`` where they stand, as TileLang's first
  spelling of them was. At the kernel level of a kernel specialized by hand they have no
  warpgroups to apply to: an error;
- ``T.no_set_max_nreg()``, ``T.disable_warp_group_reg_alloc()``: the compiler's warp
  specialization moves no registers in this kernel.

``n`` is a Python int, a multiple of 8 from 24 to 256. ``setmaxnreg`` runs on whole warpgroups
(128 threads): one in a block that is not whole warpgroups, or under a branch that splits one, is
an error at its line, on every target (the program would be wrong on the one that runs it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core_ir import expr as E
from ..core_ir.errors import TileLangSyntaxError
from ..core_ir.registers import CONSUMER_REGS, NO_SET_MAX_NREG, PRODUCER_REGS, REG_COUNTS, SET_MAX_NREG, sets_max_nreg
from ..core_ir.source import SourceLoc, caller_loc
from ..core_ir.stmt import Annotate, If, Stmt, WarpSpecialize
from ..core_ir.uniformity import Uniformity
from ..core_ir.verify_ws import WARPGROUP, has_regions
from ..core_ir.visit import children, rewrite, walk
from . import builder as bld
from .warp_specialize import outside_parallel
from .warpgroup_branches import threads_taking

__all__ = ["annotate_consumer_reg_alloc", "annotate_producer_reg_dealloc", "dec_max_nreg",
           "disable_warp_group_reg_alloc", "inc_max_nreg", "no_set_max_nreg", "place_register_hints", "set_max_nreg"]

_SPELLING = {PRODUCER_REGS: "T.annotate_producer_reg_dealloc", CONSUMER_REGS: "T.annotate_consumer_reg_alloc"}


def _count(value: Any, what: str, loc: SourceLoc | None) -> int:
    n = None if isinstance(value, bool) else E.as_int(value)
    if n is None:
        raise TileLangSyntaxError(f"{what}({value!r}): the register count must be a Python int", loc=loc,
                                  hint="the count is part of the instruction: give a constant, e.g. 240")
    if n not in REG_COUNTS:
        raise TileLangSyntaxError(f"{what}({n}): setmaxnreg takes a multiple of 8 from 24 to 256", loc=loc,
                                  hint="e.g. 24 or 40 for a producer warpgroup, 232 or 240 for consumers")
    return n


def _emit(kind: str, data: tuple[Any, ...], what: str, loc: SourceLoc | None) -> None:
    b = bld.require_kernel(what)
    outside_parallel(b, what, loc)
    b.emit(Annotate(kind, data, loc=loc))


def set_max_nreg(reg_count: Any, is_inc: Any) -> None:
    """``T.set_max_nreg(n, is_inc)``: the warpgroups that run it change their registers per thread
    to ``n``, taking registers from the block's pool (``is_inc`` 1) or giving them back (0). Every
    thread of a warpgroup must run it (in a ``T.ws`` region, or a branch on whole warpgroups)."""
    loc = caller_loc()
    n = _count(reg_count, "T.set_max_nreg", loc)
    inc = E.as_int(is_inc)  # True / False too
    if inc not in (0, 1):
        raise TileLangSyntaxError(f"T.set_max_nreg({n}, {is_inc!r}): is_inc is neither 0 nor 1", loc=loc,
                                  hint="1 (or T.inc_max_nreg) takes registers, 0 (or T.dec_max_nreg) gives them back")
    _emit(SET_MAX_NREG, (n, bool(inc)), "T.set_max_nreg", loc)


def inc_max_nreg(reg_count: Any) -> None:
    """``T.inc_max_nreg(n)``: ``T.set_max_nreg(n, 1)``."""
    loc = caller_loc()
    _emit(SET_MAX_NREG, (_count(reg_count, "T.inc_max_nreg", loc), True), "T.inc_max_nreg", loc)


def dec_max_nreg(reg_count: Any) -> None:
    """``T.dec_max_nreg(n)``: ``T.set_max_nreg(n, 0)``."""
    loc = caller_loc()
    _emit(SET_MAX_NREG, (_count(reg_count, "T.dec_max_nreg", loc), False), "T.dec_max_nreg", loc)


def annotate_producer_reg_dealloc(reg_count: Any = 24) -> None:
    """``T.annotate_producer_reg_dealloc(n)``: the producer warpgroup of the compiler's warp
    specialization runs on ``n`` registers per thread (see the module docstring)."""
    loc = caller_loc()
    what = _SPELLING[PRODUCER_REGS]
    _emit(PRODUCER_REGS, (_count(reg_count, what, loc),), what, loc)


def annotate_consumer_reg_alloc(reg_count: Any = 240) -> None:
    """``T.annotate_consumer_reg_alloc(n)``: the consumer warpgroups of the compiler's warp
    specialization run on ``n`` registers per thread (see the module docstring)."""
    loc = caller_loc()
    what = _SPELLING[CONSUMER_REGS]
    _emit(CONSUMER_REGS, (_count(reg_count, what, loc),), what, loc)


def no_set_max_nreg() -> None:
    """``T.no_set_max_nreg()``: the compiler's warp specialization of this kernel moves no
    registers between its warpgroups."""
    _emit(NO_SET_MAX_NREG, (), "T.no_set_max_nreg", caller_loc())


def disable_warp_group_reg_alloc() -> None:
    """TileLang's other spelling of ``T.no_set_max_nreg()``."""
    _emit(NO_SET_MAX_NREG, (), "T.disable_warp_group_reg_alloc", caller_loc())


def place_register_hints(body: Stmt, threads: tuple[int, ...]) -> Stmt:
    """A kernel body (of a block of ``threads``) with its register-split hints written in a
    ``T.ws`` region or a branch on the thread index turned into the ``setmaxnreg`` they ask for
    there; a kernel-level one in a kernel specialized by hand, and a ``setmaxnreg`` that a branch
    leaves to part of a warpgroup, are a ``TileLangSyntaxError`` at its line."""
    calls = [n for n in walk(body) if isinstance(n, Annotate) and n.kind in (SET_MAX_NREG, *_SPELLING)]
    if not calls:
        return body
    hints = [n for n in calls if n.kind in _SPELLING]
    uni = Uniformity(body)
    branches = [n.body for n in walk(body) if isinstance(n, WarpSpecialize)]
    branches += [c for n in walk(body) if isinstance(n, If) and uni.divergent(n) for c in (n.then, n.otherwise) if c]
    placed = {id(n) for br in branches for n in walk(br) if isinstance(n, Annotate) and n.kind in _SPELLING}
    out = rewrite(body, lambda n: Annotate(SET_MAX_NREG, (n.data[0], n.kind == CONSUMER_REGS), n.loc)
                  if id(n) in placed else None)
    loose = [n for n in hints if id(n) not in placed]
    if loose and (has_regions(out) or sets_max_nreg(out)):
        n = loose[0]
        what, step = (_SPELLING[n.kind], "T.dec_max_nreg" if n.kind == PRODUCER_REGS else "T.inc_max_nreg")
        raise TileLangSyntaxError(
            f"{what}({n.data[0]}) at the kernel level sets the register split of the compiler's warp "
            "specialization, but this kernel specializes its warpgroups by hand (T.ws regions or setmaxnreg "
            "in its branches)", loc=n.loc,
            hint=f"write {step}({n.data[0]}) (or this call) at the start of the region of the warpgroups it is for")
    _whole_warpgroups(out, threads, Uniformity(out), ())
    return out


def _whole_warpgroups(s: Stmt, threads: tuple[int, ...], uni: Uniformity, conds: tuple[E.Expr, ...]) -> None:
    """Refuse a ``setmaxnreg`` in ``s`` that part of a warpgroup runs: in a block that is not whole
    warpgroups, or under a branch (``conds``: the divergent ones around ``s``) that splits one."""
    if isinstance(s, Annotate) and s.kind == SET_MAX_NREG:
        count, inc = s.data
        what = f"T.{'inc' if inc else 'dec'}_max_nreg({count})"
        total = math.prod(threads)
        if total % WARPGROUP:
            raise TileLangSyntaxError(f"{what}: setmaxnreg runs on whole warpgroups of {WARPGROUP} threads, but the "
                                      f"kernel has threads={total}", loc=s.loc,
                                      hint=f"launch a multiple of {WARPGROUP} threads")
        tids = np.arange(total)
        for cond in conds:
            taken = threads_taking(cond, tids) if len(threads) == 1 else None
            rows = None if taken is None else taken.reshape(-1, WARPGROUP)
            split = [] if rows is None else [g for g, row in enumerate(rows) if row.any() and not row.all()]
            if split:
                raise TileLangSyntaxError(
                    f"{what} under `if {cond}`, which splits warpgroup {split[0]} (threads {split[0] * WARPGROUP}.."
                    f"{split[0] * WARPGROUP + WARPGROUP - 1}): setmaxnreg runs on whole warpgroups", loc=s.loc,
                    hint=f"branch on whole warpgroups, e.g. `if tx < {WARPGROUP}:`, or use T.ws regions")
        return
    inner = conds + ((s.cond,) if isinstance(s, If) and uni.divergent(s) else ())
    for c in children(s):
        if isinstance(c, Stmt):
            _whole_warpgroups(c, threads, uni, inner)
