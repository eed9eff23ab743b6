"""Backend-private IR nodes of the lowered (thread-level) CUDA program.

After ``lower_tile_ops`` a kernel body holds core statements (``For``, ``If``, ``Store``...) over
thread-level buffers plus these nodes; ``func.script()`` still prints them (as ``T.<name>(...)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...core_ir import dtypes
from ...core_ir.buffer import Buffer
from ...core_ir.dtypes import DType
from ...core_ir.expr import Expr, Var, binary
from ...core_ir.source import SourceLoc
from ...core_ir.stmt import If, Stmt

_NODE = dict(frozen=True, eq=False, slots=True, repr=False)

#: The linear thread index inside a block (``threadIdx.x`` for 1-d blocks).
THREAD = Var("tx")
#: a ``For`` annotation: the loop stays rolled in the device code (``#pragma unroll 1``)
ROLLED = "tlx_rolled"



def by_thread_0(body: Stmt, loc: SourceLoc | None = None) -> If:
    """``if (tx == 0) body``: what one thread does for the whole block."""
    return If(binary("==", THREAD, 0), body, None, loc)


#: C-side type of shared-memory addresses and packed registers.
U32 = DType("uint32", "uint", 32)


@dataclass(**_NODE)
class Intrin(Expr):
    """A call of a device function or macro from ``tlx_cuda.h`` (or a CUDA builtin)."""

    fn: str
    args: tuple[Expr, ...]
    dtype: DType = dtypes.int32

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def structural_key(self) -> tuple:
        return ("intrin", self.fn, tuple(a.structural_key() for a in self.args))

    def __repr__(self) -> str:
        return f"{self.fn}({', '.join(repr(a) for a in self.args)})"


@dataclass(**_NODE)
class SmemAddr(Expr):
    """The 32-bit shared-memory address of ``buffer[indices]`` (``mode``: ``r``/``w``/``async``)."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    mode: str = "r"
    dtype: DType = U32

    def children(self) -> tuple[Expr, ...]:
        return self.indices

    def structural_key(self) -> tuple:
        return ("smem_addr", id(self.buffer), tuple(i.structural_key() for i in self.indices), self.mode)

    def __repr__(self) -> str:
        return f"T.smem_addr({self.buffer.name}[{', '.join(repr(i) for i in self.indices)}], {self.mode!r})"


@dataclass(**_NODE)
class PtrTo(Expr):
    """A pointer to ``buffer[indices]`` (``mode``: ``r``/``w``/``rw``/``async``)."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    mode: str = "r"
    dtype: DType = dtypes.uint64

    def children(self) -> tuple[Expr, ...]:
        return self.indices

    def structural_key(self) -> tuple:
        return ("ptr", id(self.buffer), tuple(i.structural_key() for i in self.indices), self.mode)

    def __repr__(self) -> str:
        return f"T.address_of({self.buffer.name}[{', '.join(repr(i) for i in self.indices)}], {self.mode!r})"


@dataclass(**_NODE)
class Evaluate(Stmt):
    """Evaluate an expression for its side effect (an intrinsic call)."""

    value: Expr
    loc: SourceLoc | None = field(default=None, compare=False)
    name = "evaluate"


def is_call(s: object, fn: str) -> bool:
    """Whether ``s`` is the statement ``fn(...);``."""
    return isinstance(s, Evaluate) and isinstance(s.value, Intrin) and s.value.fn == fn


@dataclass(**_NODE)
class Barrier(Stmt):
    """``__syncthreads()``."""

    loc: SourceLoc | None = field(default=None, compare=False)
    name = "sync_threads"


@dataclass(**_NODE)
class AsyncCommit(Stmt):
    """``cp.async.commit_group``."""

    loc: SourceLoc | None = field(default=None, compare=False)
    name = "cp_async_commit"


@dataclass(**_NODE)
class AsyncWait(Stmt):
    """``cp.async.wait_group n``."""

    n: int
    loc: SourceLoc | None = field(default=None, compare=False)
    name = "cp_async_wait"


@dataclass(**_NODE)
class AtomicStore(Stmt):
    """``atomic<kind>(&buffer[indices], value)``; ``order`` is the memory order of a ``store``;
    ``prev``: a buffer whose element 0 receives the element's previous value (``return_prev``)."""

    kind: str
    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr
    order: str | None = None
    loc: SourceLoc | None = field(default=None, compare=False)
    prev: Buffer | None = None
    name = "atomic"


@dataclass(**_NODE)
class PairStore(Stmt):
    """``buffer[index] = lo; buffer[index + 1] = hi`` for a 16-bit float register array, computed
    as one pair (``half_pairs``); ``index`` is even."""

    buffer: Buffer
    index: Expr
    lo: Expr
    hi: Expr
    loc: SourceLoc | None = field(default=None, compare=False)
    name = "pair_store"


@dataclass(**_NODE)
class Block(Stmt):
    """The lowered form of one tile op or parallel loop: synchronization is placed around it,
    never inside (its threads touch shared memory only in ways the op itself orders)."""

    body: Stmt
    label: str = ""
    loc: SourceLoc | None = field(default=None, compare=False)
    name = "lowered"


@dataclass(**_NODE)
class Decl(Stmt):
    """Declare a scalar C variable ``var = value`` (visible to the end of the enclosing block);
    ``bounds``: its inclusive range when the value's expression does not show it."""

    var: Var
    value: Expr
    loc: SourceLoc | None = field(default=None, compare=False)
    bounds: tuple[int, int] | None = None
    name = "let"


@dataclass(**_NODE)
class DeviceAssert(Stmt):
    """``T.device_assert``: where ``cond`` is false, ``printf(fmt + " (block (x, y, z), thread t)")``
    and ``__trap()`` (the launch fails; ``fmt`` is an escaped printf format without conversions)."""

    cond: Expr
    fmt: str
    loc: SourceLoc | None = field(default=None, compare=False)
    name = "device_assert"


@dataclass(**_NODE)
class DevicePrint(Stmt):
    """``T.print`` of one value: ``printf(fmt + "<value>\\n", *args, value)`` by one thread of block 0
    (by every thread that runs the iteration inside a parallel loop). ``fmt`` is a printf format
    (already escaped) whose ``%d``/``%lld`` conversions take ``args`` (e.g. element indices)."""

    value: Expr
    fmt: str
    args: tuple[Expr, ...] = ()
    loc: SourceLoc | None = field(default=None, compare=False)
    name = "device_print"
