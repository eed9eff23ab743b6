"""Tile-op executors of the interpreter, one module per op, and the contract they follow.

How the interpreter runs a tile op
----------------------------------
When a kernel is compiled for ``interp``, the compiler asks the plugin hook, for every tile op in
the function (once per op, at compile time)::

    executor = hook.tlx_lower_op(target=target, op=op, ctx=lower_ctx)

The built-in plugin answers with the executors of this package, marked ``trylast``: a third-party
plugin that answers first for an op (say, a faster ``Gemm``) replaces the built-in one. An answer
for the interpreter must be an **executor**::

    executor(rt: Frame) -> None

called every time execution reaches the op (once per block and loop iteration). It reads and
writes buffers through ``rt`` (``tilelang_x.plugins.interp.runtime.Frame``):

``rt.eval(expr)``
    The value of an index or value expression at this point (a numpy scalar; inside a
    ``T.Parallel`` body possibly a broadcastable numpy array, one value per lane).
``rt.bounds(region)``
    ``(starts, extents)`` of a region as Python ints.
``rt.read(region)``
    The region's values as a numpy array shaped like its extents, in the buffer's storage dtype
    (bfloat16 and float8 are held as float32). Parts of a ``global`` region outside the buffer
    read as zero; elsewhere they raise ``OutOfBoundsError``. The result may be a view: do not
    modify it.
``rt.write(region, values, src_dtype=None)``
    Converts ``values`` to the buffer's dtype with correct rounding (``src_dtype``: the IR dtype
    they already have, if known), reshapes them to the region (dimensions of extent 1 may be
    missing) and stores them; parts of a ``global`` region outside the buffer are skipped.
    ``rt.read`` and ``rt.write`` also tell the launch's race check (``races.py``) what the block
    accessed; an atomic update passes ``atomic=True`` to both.
``rt.array(buffer)``
    The numpy array holding a buffer (for executors that need direct access; an executor that
    accesses a global one this way tells ``rt.races``, when it is not ``None``, itself).
``rt.mask`` / ``rt.in_parallel`` / ``rt.lane_shape``
    The active-lane mask (``None``: all lanes), whether the op runs inside a ``T.Parallel``
    body, where ``rt.eval`` may return arrays, and the shape of the nest's lanes (an array
    ``rt.eval`` returns broadcasts to it; a value the same in every lane may be a scalar).
``rt.block``
    The block index ``(bx, by, bz)`` being run.

``ctx`` (``LowerContext``) gives the executor factory the target, the function and the compile
options. Errors a user can act on are ``TileLangError``s; the interpreter adds the op's
``file:line`` when an executor raises one without a location.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilelang_x.core_ir.stmt import PrimFunc, Stmt
    from tilelang_x.target import Target

    from ..runtime import Frame

#: What ``tlx_lower_op`` returns for the interpreter.
Executor = Callable[["Frame"], None]


@dataclass
class LowerContext:
    """What executor factories see at compile time."""

    target: Target
    func: PrimFunc
    options: dict[str, Any] = field(default_factory=dict)


def default_executor(op: Stmt, ctx: LowerContext) -> Executor | None:
    """The built-in executor for ``op`` (``None`` for an op this package does not know)."""
    from tilelang_x.core_ir import tileops

    from . import atomic, copy, cumsum, fill, gemm, gemm_sp, reduce, reducer

    factories: dict[type, Callable[[Any, LowerContext], Executor]] = {
        tileops.Copy: copy.lower,
        tileops.TmaCopy: copy.lower,  # a TMA store (loads complete on barriers: warp_regions.py)
        tileops.Fill: fill.lower,
        tileops.Gemm: gemm.lower,
        tileops.GemmSp: gemm_sp.lower,
        tileops.Reduce: reduce.lower,
        tileops.CumSum: cumsum.lower,
        tileops.Atomic: atomic.lower,
        tileops.ReducerInit: reducer.lower_init,
        tileops.ReducerUpdate: reducer.lower_update,
        tileops.FinalizeReducer: reducer.lower_finalize,
    }
    factory = factories.get(type(op))
    return None if factory is None else factory(op, ctx)


def reject_in_parallel(rt: Frame, what: str) -> None:
    """Raise a clear error when a whole-tile op is reached inside a ``T.Parallel`` body."""
    if rt.in_parallel:
        from tilelang_x.core_ir.errors import TileLangSyntaxError

        raise TileLangSyntaxError(
            f"{what} inside a T.Parallel loop: a tile op works on whole tiles",
            hint="move it out of the T.Parallel loop, or write the element-wise form",
        )
