"""TileLang's manual wgmma fences, commits and waits (``T.warpgroup_arrive``,
``T.warpgroup_commit_batch``, ``T.warpgroup_wait``, ``T.warpgroup_fence_operand``,
``T.wait_wgmma``).

TileLang kernels that issue wgmma groups themselves pair them with these calls. In tilelang-x
every wgmma group comes from a ``T.gemm``, and the compiler places the fence before it
(``wgmma.fence``), its commit (``wgmma.commit_group``), the wait for it and the register fences of
its accumulators itself, taking every ``wg_wait`` as 0 (a group left in flight could still read a
pipeline stage being refilled, or its accumulators being read). So these calls have nothing left
to do, on every target: each checks its arguments at the call's line and emits nothing.
"""

from __future__ import annotations

from typing import Any

from ..core_ir import dtypes
from ..core_ir import expr as E
from ..core_ir.buffer import Buffer
from ..core_ir.errors import TileLangSyntaxError, TileLangTypeError
from ..core_ir.source import SourceLoc, caller_loc
from . import builder as bld
from .warp_specialize import outside_parallel

__all__ = ["wait_wgmma", "warpgroup_arrive", "warpgroup_commit_batch", "warpgroup_fence_operand", "warpgroup_wait"]

#: the scopes of the registers a wgmma writes (its accumulators) or reads (an A fragment)
_REGISTER_SCOPES = ("fragment", "local")


def _in_kernel(what: str, loc: SourceLoc | None) -> None:
    outside_parallel(bld.require_kernel(what), what, loc)


def _groups_left(value: Any, what: str, loc: SourceLoc | None) -> int:
    n = None if isinstance(value, bool) else E.as_int(value)
    if n is None:
        raise TileLangSyntaxError(f"{what}({value!r}): the count of groups left in flight must be a Python int",
                                loc=loc, hint=f"{what}(0) waits for every group")
    if n < 0:
        raise TileLangSyntaxError(f"{what}({n}): the count of groups left in flight cannot be negative", loc=loc,
                                  hint=f"{what}(0) waits for every group")
    return n


def warpgroup_arrive() -> None:
    """``T.warpgroup_arrive()``: TileLang's ``wgmma.fence`` before a batch of wgmma; the compiler
    fences each ``T.gemm`` itself (see the module docstring)."""
    _in_kernel("T.warpgroup_arrive", caller_loc())


def warpgroup_commit_batch() -> None:
    """``T.warpgroup_commit_batch()``: TileLang's ``wgmma.commit_group``; the compiler commits each
    ``T.gemm``'s group itself (see the module docstring)."""
    _in_kernel("T.warpgroup_commit_batch", caller_loc())


def warpgroup_wait(num_mma: Any) -> None:
    """``T.warpgroup_wait(n)``: TileLang's ``wgmma.wait_group n``; the compiler waits for each
    ``T.gemm``'s group itself (see the module docstring)."""
    loc = caller_loc()
    _in_kernel("T.warpgroup_wait", loc)
    _groups_left(num_mma, "T.warpgroup_wait", loc)


def wait_wgmma(id: Any) -> None:  # noqa: A002 (TileLang's parameter name)
    """``T.wait_wgmma(n)``: TileLang's wait until at most ``n`` wgmma groups of the warpgroup are in
    flight, after ``T.gemm(..., wg_wait=-1)``; the compiler places those waits itself (see the
    module docstring)."""
    loc = caller_loc()
    _in_kernel("T.wait_wgmma", loc)
    _groups_left(id, "T.wait_wgmma", loc)


def warpgroup_fence_operand(buffer_or_ptr: Any, offset: Any = 0, num_regs: Any = None, dtype: Any = None) -> None:
    """``T.warpgroup_fence_operand(acc)``: TileLang's register fence that keeps the compiler from
    moving uses of a wgmma's accumulators across it; the compiler fences the accumulators of each
    ``T.gemm`` itself (see the module docstring). ``buffer_or_ptr`` is a fragment or local buffer,
    or one element of it (then ``num_regs`` says how many registers)."""
    loc = caller_loc()
    what = "T.warpgroup_fence_operand"
    _in_kernel(what, loc)
    element = isinstance(buffer_or_ptr, E.Load)
    buf = buffer_or_ptr.buffer if element else buffer_or_ptr
    if not isinstance(buf, Buffer) or buf.scope not in _REGISTER_SCOPES:
        raise TileLangTypeError(f"{what}: {buffer_or_ptr!r} is not a fragment or local buffer (or an element of one)",
                                loc=loc, hint="pass the accumulator fragment of the T.gemm, e.g. T.alloc_fragment(...)")
    if dtype is not None and dtypes.as_dtype(dtype) != buf.dtype:
        raise TileLangTypeError(f"{what}: dtype {dtypes.as_dtype(dtype)} differs from `{buf.name}`'s {buf.dtype}",
                                loc=loc, hint="leave dtype out: it is the buffer's")
    if not _integer(offset, 0):
        raise TileLangSyntaxError(f"{what}: offset={offset!r} is not an element offset (an int, at least 0)",
                                  loc=loc, hint="offset counts elements from the start of the buffer")
    if num_regs is None and element:
        raise TileLangSyntaxError(f"{what}: an element of `{buf.name}` needs num_regs=", loc=loc,
                                  hint="say how many 32-bit registers from that element on, or pass the buffer")
    if num_regs is not None and not _integer(num_regs, 1):
        raise TileLangSyntaxError(f"{what}: num_regs={num_regs!r} is not a positive count of registers", loc=loc,
                                  hint="leave it out to fence the whole buffer")


def _integer(value: Any, least: int) -> bool:
    """Whether ``value`` is an integer expression, or an int of at least ``least``."""
    if isinstance(value, bool) or not isinstance(value, (int, E.Expr)):
        return False
    known = E.as_int(value)
    return known >= least if known is not None else value.dtype.is_int
