"""TVM's cross-thread reduction (``T.tvm_thread_allreduce`` under a ``reduce_scope`` attribute) as
one statement: the threads of a block that share their indices along the other thread axes form
a group along axis ``dim``; each one contributes ``value`` (the reducer's identity where ``cond``
is false) and every thread of the group receives the group's reduction in ``out[index]``.

The order of combination is fixed, so that every backend computes bit-identical results:

- ``butterfly``: axis x with a power-of-two extent of at most 32 (the group is consecutive lanes
  of one warp): ``v = v op v[lane ^ m]`` for ``m`` = extent / 2, ..., 2, 1;
- ``warps``: axis x with a power-of-two extent above 32: the butterfly over each warp (m = 16 ...
  1), then the warps' results of the group in order, ``((w0 op w1) op w2) ...``;
- ``serial``: any other axis or extent: the group's values in thread order, ``((v0 op v1) op v2) ...``.

16-bit floats are combined in float32 and integers narrower than 32 bits in int32; the result is
converted to ``out``'s dtype once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import dtypes
from .buffer import Buffer
from .dtypes import DType
from .expr import Expr
from .source import SourceLoc
from .stmt import Stmt

#: the combiners a ``T.comm_reducer`` may have, by kind, as ``core_ir.expr.binary`` operators
KIND_OPS = {"sum": "+", "prod": "*", "max": "max", "min": "min", "bitand": "&", "bitor": "|", "bitxor": "^"}
#: the combiners of integers only
BIT_KINDS = ("bitand", "bitor", "bitxor")
WARP = 32


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class ThreadAllreduce(Stmt):
    """``out[index]`` = the ``kind`` reduction of ``value`` (``identity`` where ``cond`` is false)
    over the ``extent`` threads of the caller's group along thread axis ``dim`` (0, 1, 2: x, y, z).
    Executed by every thread of the block together."""

    kind: str
    value: Expr
    cond: Expr
    identity: Expr
    out: Buffer
    index: tuple[Expr, ...]
    dim: int
    extent: int
    loc: SourceLoc | None = field(default=None, compare=False)
    name = "thread_allreduce"

    @property
    def order(self) -> str:
        """``butterfly``, ``warps`` or ``serial`` (see the module docstring)."""
        pow2 = self.extent & (self.extent - 1) == 0
        if self.dim != 0 or not pow2:
            return "serial"
        return "butterfly" if self.extent <= WARP else "warps"


def accumulator_dtype(dt: DType) -> DType:
    """The dtype values of ``dt`` are combined in."""
    if dt.is_float and dt.bits < 32:
        return dtypes.float32
    if dt.is_int and dt.bits < 32:
        return dtypes.int32
    return dt
