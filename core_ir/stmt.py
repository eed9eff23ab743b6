"""Statements of the IR and the ``PrimFunc`` that holds a kernel.

Every statement carries the source location it came from (``loc``), which errors print.
Annotations are stored as a sorted tuple of pairs so that nodes stay hashable; ``ann()`` reads
them as a dict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .buffer import Buffer
from .expr import Expr, Var
from .source import SourceLoc

LOOP_KINDS = ("serial", "unroll", "parallel", "pipelined", "vectorized")


class Stmt:
    """Base of every statement."""

    __slots__ = ()
    loc: SourceLoc | None

    def __repr__(self) -> str:
        from .printer import stmt_to_str

        return stmt_to_str(self)


def freeze_annotations(values: dict[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    """Turn an annotation dict into the hashable form stored on nodes."""
    if not values:
        return ()
    frozen = []
    for key in sorted(values):
        v = values[key]
        frozen.append((key, tuple(v) if isinstance(v, list) else v))
    return tuple(frozen)


_NODE = dict(frozen=True, eq=False, slots=True, repr=False)


@dataclass(**_NODE)
class Seq(Stmt):
    """Statements in order."""

    stmts: tuple[Stmt, ...]
    loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(**_NODE)
class For(Stmt):
    """``for var in [start, start + extent)`` with a loop ``kind`` (``LOOP_KINDS``).

    ``T.Parallel(M, N)`` is two nested ``parallel`` loops; ``T.Pipelined`` keeps ``num_stages``,
    ``order`` and ``stage`` in its annotations.
    """

    var: Var
    extent: Expr
    kind: str
    body: Stmt
    start: Expr | None = None
    annotations: tuple[tuple[str, Any], ...] = ()
    loc: SourceLoc | None = field(default=None, compare=False)

    def ann(self) -> dict[str, Any]:
        return dict(self.annotations)


@dataclass(**_NODE)
class If(Stmt):
    """A branch on a symbolic condition (Python conditions fold away at trace time)."""

    cond: Expr
    then: Stmt
    otherwise: Stmt | None = None
    loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(**_NODE)
class While(Stmt):
    """A loop on a symbolic condition."""

    cond: Expr
    body: Stmt
    loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(**_NODE)
class Store(Stmt):
    """``buffer[indices] = value``."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr
    loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(**_NODE)
class Alloc(Stmt):
    """Declares a kernel-local buffer (shared, fragment, local or var); visible until the end of
    the enclosing ``Seq``. ``init`` initialises a ``var`` buffer."""

    buffer: Buffer
    init: Expr | None = None
    loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(**_NODE)
class Kernel(Stmt):
    """``with T.Kernel(*grid, threads=...) as (bx, by, ...)``: a grid of tile programs."""

    grid: tuple[Expr, ...]
    block_vars: tuple[Var, ...]
    threads: tuple[int, ...]
    body: Stmt
    annotations: tuple[tuple[str, Any], ...] = ()
    loc: SourceLoc | None = field(default=None, compare=False)

    def ann(self) -> dict[str, Any]:
        return dict(self.annotations)

    @property
    def num_threads(self) -> int:
        n = 1
        for t in self.threads:
            n *= t
        return n


@dataclass(**_NODE)
class Print(Stmt):
    """``T.print(value, msg)``: a buffer or a scalar, printed by one thread."""

    value: Any
    msg: str = ""
    loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(**_NODE)
class Assert(Stmt):
    """``T.device_assert(cond, msg)``: the kernel stops with ``msg`` where ``cond`` is false."""

    cond: Expr
    msg: str = ""
    loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(**_NODE)
class ExprStmt(Stmt):
    """``T.evaluate(value)``: ``value`` computed for its effect (a ``T.call_extern``), the result
    dropped."""

    value: Expr
    loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(**_NODE)
class Sync(Stmt):
    """A synchronization the kernel asks for, on top of those the backend inserts: ``scope``
    ``"block"`` (``T.sync_threads()``), ``"warp"`` (``T.sync_warp()``), ``"grid"``
    (``T.sync_grid()``: every block of the grid waits for all the others), the programmatic
    dependent launch points ``"pdl_trigger"`` (``T.pdl_trigger()``) and ``"pdl_sync"``
    (``T.pdl_sync()``), which never change results, or one of the ``CLUSTER_SCOPES``, the barrier
    of the blocks of a thread-block cluster (``core_ir.cluster``)."""

    scope: str = "block"
    loc: SourceLoc | None = field(default=None, compare=False)

    @property
    def call(self) -> str:
        """How the kernel spells it."""
        return SYNC_CALLS[self.scope]


#: The ids of named barriers a kernel may use (0 is the barrier of the whole block, ``__syncthreads``).
NAMED_BARRIER_IDS = range(1, 16)


@dataclass(**_NODE)
class NamedBarrier(Stmt):
    """A barrier of part of the block (CUDA's named barriers): ``T.sync_threads(barrier_id,
    arrive_count)`` (``arrive`` False) waits until ``count`` threads, those that call it included,
    have arrived at barrier ``barrier_id`` since it last completed; ``T.named_barrier_arrive``
    (``arrive`` True) arrives without waiting. Threads arrive a whole warp at a time, so ``count``
    is a multiple of 32 and the threads of a warp reach the statement together. ``barrier_id`` is
    an int32 expression (a constant one is checked to be in ``NAMED_BARRIER_IDS`` when built)."""

    barrier_id: Expr
    count: int
    arrive: bool = False
    loc: SourceLoc | None = field(default=None, compare=False)

    @property
    def call(self) -> str:
        """How the kernel spells it."""
        fn = "T.named_barrier_arrive" if self.arrive else "T.sync_threads"
        return f"{fn}({self.barrier_id}, {self.count})"


#: How a kernel spells each ``Sync`` scope.
SYNC_CALLS: dict[str, str] = {"block": "T.sync_threads()", "warp": "T.sync_warp()", "grid": "T.sync_grid()",
                              "pdl_trigger": "T.pdl_trigger()", "pdl_sync": "T.pdl_sync()",
                              "cluster_arrive": "T.cluster_arrive()",
                              "cluster_arrive_relaxed": "T.cluster_arrive_relaxed()",
                              "cluster_wait": "T.cluster_wait()", "cluster_sync": "T.cluster_sync()"}
#: The ``Sync`` scopes of the cluster barrier: arrive, arrive without ordering memory, wait, both.
CLUSTER_SCOPES = ("cluster_arrive", "cluster_arrive_relaxed", "cluster_wait", "cluster_sync")


@dataclass(**_NODE)
class Jump(Stmt):
    """``break`` (``kind`` ``"break"``) or ``continue`` (``"continue"``) of the innermost enclosing
    serial, unrolled or ``while`` loop. Never inside a ``T.Parallel``, ``T.Pipelined`` or vectorized
    loop (the verifier checks), so every thread of a block takes it together."""

    kind: str = "break"
    loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(**_NODE)
class Annotate(Stmt):
    """A hint for the backend: ``kind`` is ``layout`` (data: buffer → Layout pairs), ``swizzle``
    (data: panel size, order, enable) or a plugin-defined kind."""

    kind: str
    data: tuple[Any, ...]
    loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(**_NODE)
class WarpSpecialize(Stmt):
    """``with T.ws(*ids):`` a region run only by the warpgroups ``ids`` (warpgroup ``g`` is threads
    ``128 g .. 128 g + 127`` of the block); tile ops inside it are spread over those threads. Never
    nested, never inside ``T.Parallel`` (the frontend and ``verify_ws`` check)."""

    ids: tuple[int, ...]
    body: Stmt
    loc: SourceLoc | None = field(default=None, compare=False)

    @property
    def call(self) -> str:
        """How the kernel spells it."""
        return ws_call(self.ids)


def ws_call(ids: tuple[int, ...]) -> str:
    """How a kernel spells the region of warpgroups ``ids``: ``T.ws(0, 1)``."""
    return f"T.ws({', '.join(str(g) for g in ids)})"


@dataclass(**_NODE)
class BarrierInit(Stmt):
    """Follows the ``Alloc`` of a ``barrier``-scope buffer (``T.alloc_barrier``): barrier ``k`` of
    ``buffer`` completes a phase once ``counts[k]`` threads have arrived."""

    buffer: Buffer
    counts: tuple[int, ...]
    loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(**_NODE)
class BarrierArrive(Stmt):
    """``T.barrier_arrive(bar[index])``: every thread that runs it arrives once at the barrier;
    with ``cta`` (``cta_id=``, a uint32), at barrier ``bar[index]`` of the block of that rank in
    the caller's thread-block cluster (``mapa`` + ``mbarrier.arrive.shared::cluster``)."""

    buffer: Buffer
    index: Expr
    loc: SourceLoc | None = field(default=None, compare=False)
    cta: Expr | None = None


@dataclass(**_NODE)
class BarrierWait(Stmt):
    """``T.barrier_wait(bar[index], parity)``: the threads that run it wait until the barrier's
    phase of parity ``parity`` (0 or 1) has completed; a barrier starts in phase 0, so a wait for
    parity 1 on a fresh barrier returns at once."""

    buffer: Buffer
    index: Expr
    parity: Expr
    loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(**_NODE)
class BarrierExpectTx(Stmt):
    """``T.mbarrier_expect_tx(bar[index], nbytes)``: the threads running it add ``nbytes`` to the
    barrier's expected transaction bytes once (their first thread issues it, as TileLang kernels
    elect one); ``arrive``: ``T.mbarrier_arrive_expect_tx``, which also arrives once. A phase
    completes when its arrivals are all in and its expected bytes have landed."""

    buffer: Buffer
    index: Expr
    nbytes: Expr
    arrive: bool = False
    loc: SourceLoc | None = field(default=None, compare=False)

    @property
    def call(self) -> str:
        return "T.mbarrier_arrive_expect_tx" if self.arrive else "T.mbarrier_expect_tx"


@dataclass(**_NODE)
class FenceProxyAsync(Stmt):
    """``T.fence_proxy_async()``: orders the calling thread's ordinary shared-memory accesses
    before the async proxy's (TMA, wgmma) that follow; nothing to do where everything runs in order."""

    loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(**_NODE)
class CpAsyncGroup(Stmt):
    """``T.ptx_commit_group()`` (``kind`` ``"commit"``: the calling thread's cp.async copies not
    yet committed form a group) or ``T.ptx_wait_group(n)`` (``"wait"``: the calling thread waits
    until at most its ``n`` newest groups are pending, and the threads running it then see one
    another's landed copies)."""

    kind: str
    n: int = 0
    loc: SourceLoc | None = field(default=None, compare=False)

    @property
    def call(self) -> str:
        return "T.ptx_commit_group()" if self.kind == "commit" else f"T.ptx_wait_group({self.n})"


@dataclass(**_NODE)
class BulkGroup(Stmt):
    """``T.tma_store_arrive()`` (``kind`` ``"commit"``: the TMA stores issued and not yet
    committed form a bulk group) or ``T.tma_store_wait(n, read)`` (``"wait"``: until at most the
    ``n`` newest groups are pending: they have read their shared tiles, or with ``read=False``
    also written the tensor); the threads running it then may write those tiles again."""

    kind: str
    n: int = 0
    read: bool = True
    loc: SourceLoc | None = field(default=None, compare=False)

    @property
    def call(self) -> str:
        if self.kind == "commit":
            return "T.tma_store_arrive()"
        return f"T.tma_store_wait({self.n}{'' if self.read else ', read=False'})"


#: ``PrimFunc.attrs`` keys: the indices of the parameters that are ``T.alloc_global`` workspaces
#: (always the last ones; the runtime allocates them on every call, a caller neither passes nor gets
#: them) and of the ``T.ptr`` parameters (a caller passes memory for the tensor ``T.make_tensor``
#: shaped over it).
WORKSPACES = "workspaces"
POINTERS = "pointers"
#: ``PrimFunc.attrs`` key of the ``T.import_source`` code of a function: its strings, in order
IMPORTS = "import_source"
#: ``Kernel`` annotation keys of ``T.CUDASourceCodeKernel``: the CUDA module that replaces the
#: kernel's body, and the name of its ``extern "C" __global__`` entry
CUDA_SOURCE = "cuda_source"
CUDA_ENTRY = "cuda_entry"
#: ``PrimFunc.attrs`` keys of ``T.annotate_pass_configs`` (sorted ``(key, value)`` pairs) and
#: ``T.annotate_compile_flags`` (the flags, in order): merged with the jit's own when compiling
PASS_CONFIGS = "pass_configs"
COMPILE_FLAGS = "compile_flags"


@dataclass(frozen=True, eq=False)
class PrimFunc:
    """A kernel: parameters (global buffers and scalar vars), a body, and which parameters are
    outputs the runtime allocates (``out_idx``)."""

    name: str
    params: tuple[Buffer | Var, ...]
    body: Stmt
    out_idx: tuple[int, ...] = ()
    attrs: tuple[tuple[str, Any], ...] = ()
    loc: SourceLoc | None = None

    def buffer_params(self) -> list[Buffer]:
        return [p for p in self.params if isinstance(p, Buffer)]

    @property
    def n_visible(self) -> int:
        """The number of parameters a caller sees: all but the trailing workspaces."""
        return len(self.params) - len(self.attr(WORKSPACES, ()))

    def attr(self, key: str, default: Any = None) -> Any:
        return dict(self.attrs).get(key, default)

    def script(self) -> str:
        from .printer import func_to_str

        return func_to_str(self)

    def __repr__(self) -> str:
        return self.script()
