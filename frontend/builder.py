"""The IR builder that a kernel trace writes into.

While a kernel function runs (``T.prim_func``, ``@tilelang.jit``), one ``Builder`` is active. It
holds a stack of frames; each frame collects the statements of one block (the function, a
``T.Kernel`` body, a loop body, one branch of an ``if``). ``T.*`` calls and stores
(``buf[i, j] = v``, through the store handler it installs) append statements to the innermost
frame; closing a frame turns its statements into the body of the node that opened it.

Besides statements, the builder keeps what a trace learns about the function: the parameters
bound by annotations, the outputs declared with ``T.empty``, the workspaces of ``T.alloc_global``,
the ``T.ptr`` parameters, the ``T.const`` names and values.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from ..core_ir import expr as E
from ..core_ir.buffer import Buffer, pop_store_handler, push_store_handler
from ..core_ir.errors import TileLangError, TileLangSyntaxError
from ..core_ir.source import SourceLoc, caller_loc
from ..core_ir.stmt import Jump, Seq, Stmt, Store
from ..core_ir.verify import NO_JUMP_LOOPS
from .reducer_epochs import Epochs

#: Frame kinds. ``if``/``loop``/``while`` frames hold code that runs conditionally or
#: repeatedly at kernel run time, so a Python ``return``/``break`` cannot cross them.
CONTROL_KINDS = ("if", "loop", "while")


class Frame:
    """One open block: its kind and the statements collected so far."""

    __slots__ = ("kind", "stmts", "loc", "loop_kind")

    def __init__(self, kind: str, loc: SourceLoc | None = None, loop_kind: str | None = None) -> None:
        self.kind = kind
        self.stmts: list[Stmt] = []
        self.loc = loc
        self.loop_kind = loop_kind  # an IR loop's body: its ``For`` kind, or "while"


class Slot:
    """A parameter whose buffer (or scalar) is not known until the kernel body annotates it
    (``A: T.Tensor((M, K), T.float16)``). Passed to the traced function in its place."""

    __slots__ = ("name", "index", "value")

    def __init__(self, name: str, index: int) -> None:
        self.name = name
        self.index = index
        self.value: Buffer | E.Var | None = None

    def __repr__(self) -> str:
        return f"<parameter {self.name} (not annotated yet)>"

    def _unbound(self, *args: Any, **kwargs: Any) -> Any:
        raise TileLangSyntaxError(
            f"parameter `{self.name}` is used before it is annotated",
            loc=caller_loc(),
            hint=f"annotate it first, e.g. `{self.name}: T.Tensor((M, K), T.float16)`",
        )

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._unbound()

    __getitem__ = __setitem__ = __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _unbound


class StopTrace(Exception):
    """Raised to end a trace early once it has learned what it was run for."""


def seq(stmts: list[Stmt], loc: SourceLoc | None = None) -> Stmt:
    """The statements as one statement: a single one as itself, otherwise a ``Seq``."""
    if len(stmts) == 1:
        return stmts[0]
    return Seq(tuple(stmts), loc=loc if loc is not None else (stmts[0].loc if stmts else None))


class Builder:
    """Collects the IR of one kernel function while it is traced.

    ``mode`` is ``"prim"`` (a ``T.prim_func``), ``"eager"`` (an eager ``@tilelang.jit``
    function with ``T.const`` values known) or ``"probe"`` (the first, shape-learning trace of
    an eager function, where ``T.const`` names are placeholder variables).
    """

    def __init__(self, name: str, mode: str = "prim", const_values: dict[str, int] | None = None) -> None:
        self.name = name
        self.mode = mode
        self.frames: list[Frame] = [Frame("func")]
        self.fn_bases: list[int] = [1]
        self.slots: list[Slot] = []
        self.outputs: list[Buffer] = []
        self.workspaces: list[Buffer] = []
        self.pointers: dict[int, Any] = {}  # id of a T.ptr parameter's buffer -> pointers.Pointer
        self.auto_named: set[int] = set()
        self.kernel_open = 0
        self.kernel_frame: Any = None  # the open T.Kernel (frames.KernelFrame): its threads and block variables
        self.kernels = 0
        # T.const: the placeholder variables of a probe trace, or the values of a real one.
        self.const_vars: dict[str, E.Var] = {}
        self.const_locs: dict[str, SourceLoc | None] = {}
        self.const_values = dict(const_values or {})
        # A probe trace stops as soon as every slot is annotated.
        self.stop_when_bound = False
        # T.alloc_reducer buffers and the state of their reductions
        self.reducers = Epochs()
        # the random stream the last T.rng_init opened (frontend.rng.Stream)
        self.rng: Any = None
        # T.import_source code and the T.call_extern calls of the trace (frontend.extern)
        self.imports: list[str] = []
        self.externs: list[E.ExternCall] = []
        # T.annotate_pass_configs / T.annotate_compile_flags (frontend.compile_annotations)
        self.pass_configs: dict[str, Any] = {}
        self.compile_flags: list[str] = []
        # the warpgroups of the T.ws region being traced, and T.create_list_of_mbarrier's barriers
        self.warp_region: tuple[int, ...] | None = None
        self.mbarrier_list: Buffer | None = None

    # ---- frames -----------------------------------------------------------------------------
    def emit(self, stmt: Stmt) -> None:
        self.reducers.check(stmt)
        self.frames[-1].stmts.append(stmt)

    def push(self, kind: str, loc: SourceLoc | None = None, loop_kind: str | None = None) -> Frame:
        frame = Frame(kind, loc, loop_kind)
        self.frames.append(frame)
        return frame

    def pop(self, frame: Frame) -> Stmt:
        """Close ``frame`` (the innermost one) and return its statements as one statement."""
        if self.frames[-1] is not frame:
            raise TileLangSyntaxError(
                "kernel blocks were closed out of order",
                loc=caller_loc(),
                hint="do not leave a T.Kernel / loop / if block with `break`, `return` or an exception",
            )
        self.frames.pop()
        return seq(frame.stmts, frame.loc)

    def unwind(self, depth: int) -> None:
        """Drop frames above ``depth`` (after an exception left them open)."""
        del self.frames[depth:]

    @property
    def depth(self) -> int:
        return len(self.frames)

    def control_frames_above(self, depth: int) -> list[Frame]:
        return [f for f in self.frames[depth:] if f.kind in CONTROL_KINDS]

    def jump(self, word: str, loc: SourceLoc | None) -> None:
        """``break`` / ``continue`` (``word``) of the innermost IR loop being traced."""
        loops = [f.loop_kind for f in self.frames if f.loop_kind is not None]
        if not loops:
            raise TileLangSyntaxError(f"`{word}` outside an IR loop", loc=loc,
                                      hint="use it inside a T.serial / range / while loop of the kernel")
        inside = next((NO_JUMP_LOOPS[k] for k in reversed(loops) if k in NO_JUMP_LOOPS), None)
        if inside is not None:
            raise TileLangSyntaxError(f"`{word}` inside a {inside[0]} loop", loc=loc, hint=inside[1])
        self.emit(Jump(word, loc=loc))

    # ---- stores -----------------------------------------------------------------------------
    def store(self, buffer: Buffer, indices: tuple[E.Expr, ...], value: E.Expr) -> None:
        """The store handler: ``buffer[indices] = value`` inside the kernel."""
        loc = caller_loc()
        if not self.kernel_open:
            raise TileLangSyntaxError(
                f"store to `{buffer.name}` outside `with T.Kernel(...)`",
                loc=loc,
                hint="element assignments belong inside the kernel body",
            )
        reducer = self.reducers.get(buffer)
        if reducer is not None:
            from .reducer import store_reducer

            store_reducer(reducer, indices, value, loc)
            return
        self.emit(Store(buffer, indices, value, loc=loc))

    # ---- naming -----------------------------------------------------------------------------
    def new_buffer(self, name: str, shape: tuple[Any, ...], dtype: Any, scope: str,
                   loc: SourceLoc | None, base: Buffer | None = None) -> Buffer:
        """A buffer that takes the name of the variable it is first assigned to (a view of
        ``base`` when given)."""
        buf = Buffer(name, shape, dtype, scope, loc, base=base)
        self.auto_named.add(id(buf))
        return buf

    def name_buffer(self, value: Any, name: str) -> None:
        if type(value) is Buffer and id(value) in self.auto_named:
            self.auto_named.discard(id(value))
            value.name = name

    # ---- parameters -------------------------------------------------------------------------
    def bind_slot(self, slot: Slot, value: Buffer | E.Var) -> None:
        if slot.value is not None:
            raise TileLangSyntaxError(
                f"parameter `{slot.name}` is annotated twice", loc=caller_loc(),
                hint="annotate each parameter once",
            )
        slot.value = value
        if self.stop_when_bound and all(s.value is not None for s in self.slots):
            raise StopTrace

    def require_kernel(self, what: str) -> None:
        if not self.kernel_open:
            raise TileLangSyntaxError(
                f"{what} must be used inside `with T.Kernel(...)`",
                loc=caller_loc(),
                hint="open the kernel first: `with T.Kernel(grid, threads=128) as bx:`",
            )

    def finish(self) -> Stmt:
        """The function body once the trace has returned."""
        if len(self.frames) != 1:
            raise TileLangSyntaxError(
                f"kernel `{self.name}` ended with blocks still open", loc=caller_loc(),
            )
        return seq(self.frames[0].stmts)


class _Traces(threading.local):
    """The builders of the traces in progress, per thread (an autotuner may trace in parallel)."""

    def __init__(self) -> None:
        self.stack: list[Builder] = []


_traces = _Traces()


def current() -> Builder | None:
    """The builder of the trace in progress, if any."""
    stack = _traces.stack
    return stack[-1] if stack else None


def require(what: str) -> Builder:
    """The active builder, or a located error saying ``what`` needs a kernel trace."""
    stack = _traces.stack
    if stack:
        return stack[-1]
    raise TileLangSyntaxError(
        f"{what} can only be used while a kernel is traced",
        loc=caller_loc(),
        hint="call it inside a function decorated with @T.prim_func, @T.macro or @tilelang.jit",
    )


def require_kernel(what: str) -> Builder:
    b = require(what)
    b.require_kernel(what)
    return b


def _store(buffer: Buffer, indices: tuple[E.Expr, ...], value: E.Expr) -> None:
    # The core keeps one stack of store handlers for all threads; every entry the frontend
    # pushes is this function, which stores through the calling thread's own builder.
    require(f"a store to `{buffer.name}`").store(buffer, indices, value)


@contextmanager
def tracing(builder: Builder) -> Iterator[Builder]:
    """Make ``builder`` the active one (and install the store handler) for the calling thread."""
    _traces.stack.append(builder)
    push_store_handler(_store)
    try:
        yield builder
    finally:
        pop_store_handler()
        _traces.stack.pop()


F = TypeVar("F", bound=Callable[..., Any])


def user_errors(fn: F) -> F:
    """Re-raise a ``TileLangError`` from an entry point without the frontend's frames: the
    message already names the user's file:line, the internal stack would only hide it."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TileLangError as err:
            raise err.with_traceback(None) from None

    return wrapper  # type: ignore[return-value]
