"""The IR verifier: checks that a ``PrimFunc`` is well formed before any backend sees it.

It catches what a frontend or a pass can get wrong and a backend would otherwise turn into a
confusing failure or wrong code: variables used outside the scope that binds them, buffers used
outside theirs, stores to global memory or tile ops outside a kernel, nested kernels, index
counts that do not match a buffer, tile-op operands of the wrong rank, non-boolean conditions
and unknown memory scopes. Each problem raises ``VerificationError`` at the statement's location.

Scopes: parameters (buffers and scalar vars) and the variables in parameter shapes and strides
are visible everywhere; a loop variable inside its loop; block variables inside their kernel; a
buffer declared by ``Alloc`` from that statement to the end of the enclosing ``Seq``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

from .buffer import Buffer, Region, known_scope
from .errors import ShapeMismatchError, VerificationError
from .expr import AtomicFetch, AtomicLoad, Expr, Load, Var
from .source import SourceLoc
from .stmt import (
    LOOP_KINDS,
    Alloc,
    Annotate,
    Assert,
    For,
    If,
    Jump,
    Kernel,
    NamedBarrier,
    PrimFunc,
    Print,
    Seq,
    Stmt,
    Store,
    Sync,
    While,
)
from .tileops import CumSum, Gemm, Reduce, TileOp, squeeze
from .verify_bounds import verify_bounds
from .verify_parallel import verify_parallel
from .verify_simt import verify_simt
from .verify_ws import verify_ws

__all__ = ["verify", "NO_JUMP_LOOPS"]

#: Loops a ``break`` / ``continue`` cannot be inside: kind -> (how the kernel spells it, what to do).
NO_JUMP_LOOPS = {
    "parallel": ("T.Parallel", "its iterations run at once, spread over the threads: guard the rest of the body "
                 "with an `if`"),
    "vectorized": ("T.vectorized", "its iterations run at once: guard the rest of the body with an `if`"),
    "pipelined": ("T.Pipelined", "the pipeline loads later iterations' tiles ahead of time, so it runs every "
                  "iteration: guard the rest of the body with an `if`, or loop with T.serial"),
}


def verify(func: PrimFunc) -> None:
    """Raise ``VerificationError`` (with the source location) if ``func`` is ill formed."""
    _Verifier(func).run()
    verify_simt(func)
    verify_ws(func)
    verify_bounds(func)
    verify_parallel(func)


class _Verifier:
    def __init__(self, func: PrimFunc) -> None:
        self.func = func
        self.vars: dict[int, Var] = {}  # id -> bound variable
        self.bufs: dict[int, Buffer] = {}  # id -> visible buffer
        self.params: set[int] = set()
        self.in_kernel = False
        self.parallel_depth = 0  # T.Parallel loops around the statement being checked
        self.loops: list[str] = []  # kinds of the loops around it, innermost last ("while" for While)
        self.loc: SourceLoc | None = func.loc

    def fail(self, message: str, loc: SourceLoc | None = None, hint: str | None = None) -> None:
        raise VerificationError(f"in kernel `{self.func.name}`: {message}", loc=loc or self.loc, hint=hint)

    # ---- entry ------------------------------------------------------------------------------
    def run(self) -> None:
        f = self.func
        for p in f.params:
            if isinstance(p, Var):
                self.vars[id(p)] = p
        for p in f.params:
            if isinstance(p, Buffer):
                self.bufs[id(p)] = p
                self.params.add(id(p))
                for e in p.shape + (p.strides or ()):
                    for v in _vars_in(e):
                        self.vars[id(v)] = v
            elif not isinstance(p, Var):
                self.fail(f"parameter {p!r} is neither a buffer nor a scalar variable")
        for i in f.out_idx:
            if not -len(f.params) <= i < len(f.params) or not isinstance(f.params[i], Buffer):
                self.fail(f"out_idx {i} does not name a tensor parameter")
        self.stmt(f.body)

    # ---- expressions ------------------------------------------------------------------------
    def expr(self, e: Any, fetch: bool = False) -> None:
        """Check expression ``e``; ``fetch``: it is the ``init`` of a ``var``, where an
        ``AtomicFetch`` may stand (as the whole expression)."""
        if not isinstance(e, Expr):
            return
        if fetch and isinstance(e, AtomicFetch):
            self.access(e.buffer, e.indices, e.loc)
            if e.buffer.scope not in ("global", "shared"):
                self.fail(f"atomic update of `{e.buffer.name}`, a {e.buffer.scope} buffer", loc=e.loc,
                          hint="atomics update global or shared memory")
            stack: list[Expr] = list(e.children())
        else:
            stack = [e]
        while stack:
            node = stack.pop()
            if isinstance(node, Var):
                if id(node) not in self.vars:
                    self.fail(
                        f"variable `{node.name}` is used outside the scope that defines it",
                        hint="loop and block variables exist only inside their loop or T.Kernel; to carry a value "
                             "out of a loop (a running sum), keep it in a T.alloc_var",
                    )
                continue
            if isinstance(node, AtomicFetch):
                self.fail(f"T.atomic_{node.kind}(..., return_prev=True) inside an expression: it must be the whole "
                          "initial value of a variable (a pass moved it)", loc=node.loc)
            if isinstance(node, (Load, AtomicLoad)):
                self.access(node.buffer, node.indices, node.loc)
            stack.extend(node.children())

    def access(self, buf: Buffer, indices: tuple[Expr, ...], loc: SourceLoc | None = None) -> None:
        self.visible(buf, loc)
        if len(indices) != buf.ndim:
            self.fail(f"`{buf.name}` has {buf.ndim} dimension(s) but is indexed with {len(indices)}", loc)
        for i in indices:
            if not i.dtype.is_int:
                self.fail(f"index `{i}` of `{buf.name}` has dtype {i.dtype}, not an integer type", loc)

    def visible(self, buf: Buffer, loc: SourceLoc | None = None) -> None:
        if buf.base is not None:  # a view is visible where the buffer owning its memory is
            self.view(buf, loc)
            buf = buf.base
        if id(buf) in self.bufs:
            return
        if buf.scope == "global":
            self.fail(f"global buffer `{buf.name}` is not a parameter of the kernel", loc,
                      hint="pass it as an argument (or create it with T.empty) instead")
        self.fail(f"buffer `{buf.name}` ({buf.scope}) is used outside the scope of its allocation", loc,
                  hint="a T.alloc_* buffer exists from its allocation to the end of the enclosing block")

    def view(self, v: Buffer, loc: SourceLoc | None) -> None:
        base = v.base
        assert base is not None
        sizes = v.static_shape(), base.static_shape()
        if sizes[0] is not None and sizes[1] is not None and \
                math.prod(sizes[0]) * v.dtype.bytes != math.prod(sizes[1]) * base.dtype.bytes:
            self.fail(f"view `{v.name}` ({list(sizes[0])} x {v.dtype}) does not cover the bytes of `{base.name}` "
                      f"({list(sizes[1])} x {base.dtype})", loc)

    def region(self, r: Region, what: str) -> None:
        buf = r.buffer
        self.visible(buf)
        if len(r.starts) != buf.ndim or len(r.extents) != buf.ndim:
            self.fail(f"{what}: region of `{buf.name}` has {len(r.starts)} start(s) and {len(r.extents)} "
                      f"extent(s) for a {buf.ndim}-d buffer")
        for e in r.starts + r.extents:
            self.expr(e)

    # ---- statements -------------------------------------------------------------------------
    def bind(self, v: Var, what: str) -> None:
        if id(v) in self.vars:
            self.fail(f"{what} `{v.name}` is bound again inside its own scope")
        if not v.dtype.is_int:
            self.fail(f"{what} `{v.name}` has dtype {v.dtype}, not an integer type")
        self.vars[id(v)] = v

    def jump(self, s: Jump) -> None:
        """``break`` / ``continue``: in a serial, unrolled or ``while`` loop that no ``T.Parallel``,
        ``T.Pipelined`` or vectorized loop encloses (``NO_JUMP_LOOPS``)."""
        if s.kind not in ("break", "continue"):
            self.fail(f"unknown jump {s.kind!r}", loc=s.loc, hint="`break` or `continue`")
        if not self.loops:
            self.fail(f"`{s.kind}` outside a loop", loc=s.loc)
        inside = next((NO_JUMP_LOOPS[k] for k in reversed(self.loops) if k in NO_JUMP_LOOPS), None)
        if inside is not None:
            self.fail(f"`{s.kind}` inside a {inside[0]} loop", loc=s.loc, hint=inside[1])

    def stmt(self, s: Stmt) -> None:
        saved = self.loc
        self.loc = getattr(s, "loc", None) or saved
        try:
            self._stmt(s)
        finally:
            self.loc = saved

    def _stmt(self, s: Stmt) -> None:
        if isinstance(s, Seq):
            added: list[int] = []
            try:
                for c in s.stmts:
                    self.stmt(c)
                    if isinstance(c, Alloc):
                        self.bufs[id(c.buffer)] = c.buffer
                        added.append(id(c.buffer))
            finally:
                for key in added:
                    self.bufs.pop(key, None)
        elif isinstance(s, For):
            if s.kind not in LOOP_KINDS:
                self.fail(f"unknown loop kind {s.kind!r}", hint=f"one of {', '.join(LOOP_KINDS)}")
            for e in (s.start, s.extent):
                if e is not None:
                    self.expr(e)
                    if not e.dtype.is_int:
                        self.fail(f"loop bound `{e}` has dtype {e.dtype}, not an integer type")
            self.bind(s.var, "loop variable")
            self.parallel_depth += s.kind == "parallel"
            self.loops.append(s.kind)
            try:
                self.stmt(s.body)
            finally:
                del self.vars[id(s.var)]
                self.parallel_depth -= s.kind == "parallel"
                self.loops.pop()
        elif isinstance(s, Kernel):
            self.kernel(s)
        elif isinstance(s, If | While):
            self.expr(s.cond)
            if not s.cond.dtype.is_bool:
                self.fail(f"condition `{s.cond}` has dtype {s.cond.dtype}, not bool",
                          hint="compare explicitly, e.g. `x != 0`")
            if isinstance(s, If):
                self.stmt(s.then)
                if s.otherwise is not None:
                    self.stmt(s.otherwise)
            else:
                self.loops.append("while")
                try:
                    self.stmt(s.body)
                finally:
                    self.loops.pop()
        elif isinstance(s, Store):
            self.access(s.buffer, s.indices)
            if s.buffer.scope == "global" and not self.in_kernel:
                self.fail(f"store to global buffer `{s.buffer.name}` outside a T.Kernel",
                          hint="global memory is written by the kernel's threads: move it into the T.Kernel body")
            for i in s.indices:
                self.expr(i)
            self.expr(s.value)
        elif isinstance(s, Alloc):
            self.alloc(s)
        elif isinstance(s, TileOp):
            self.tile_op(s)
        elif isinstance(s, Assert):
            self.expr(s.cond)
        elif isinstance(s, (Sync, NamedBarrier)):
            if isinstance(s, NamedBarrier):
                self.expr(s.barrier_id)
            if self.parallel_depth:
                self.fail(f"{s.call} inside a T.Parallel loop", loc=s.loc,
                          hint="a T.Parallel body runs once per element; put the barrier before or after the loop")
            if not self.in_kernel:
                self.fail(f"{s.call} outside a T.Kernel", loc=s.loc)
        elif isinstance(s, Jump):
            self.jump(s)
        elif isinstance(s, Print):
            if isinstance(s.value, Buffer):
                self.visible(s.value)
            elif isinstance(s.value, Region):
                self.region(s.value, "T.print")
            else:
                self.expr(s.value)
        elif isinstance(s, Annotate):
            for item in _flatten(s.data):
                if isinstance(item, Buffer):
                    self.visible(item)
                else:
                    self.expr(item)
        else:
            self.generic(s)

    def kernel(self, k: Kernel) -> None:
        if self.in_kernel:
            self.fail("T.Kernel inside another T.Kernel",
                      hint="kernels cannot be nested; launch them one after another")
        if len(k.grid) != len(k.block_vars):
            self.fail(f"T.Kernel has {len(k.grid)} grid dimension(s) but {len(k.block_vars)} block variable(s)")
        if not k.threads or any(not isinstance(t, int) or t <= 0 for t in k.threads):
            self.fail(f"T.Kernel threads must be positive integers, got {k.threads}")
        for g in k.grid:
            self.expr(g)
        for v in k.block_vars:
            self.bind(v, "block variable")
        self.in_kernel = True
        try:
            self.stmt(k.body)
        finally:
            self.in_kernel = False
            for v in k.block_vars:
                self.vars.pop(id(v), None)

    def alloc(self, a: Alloc) -> None:
        b = a.buffer
        if not known_scope(b.scope):
            self.fail(f"buffer `{b.name}` is allocated in unknown memory scope {b.scope!r}",
                      hint="use shared, fragment, local or var (or a scope a backend plugin registers)")
        if b.scope == "global":
            self.fail(f"buffer `{b.name}`: global memory cannot be allocated inside a kernel",
                      hint="make it a parameter (or create it with T.empty)")
        if not self.in_kernel:
            self.fail(f"buffer `{b.name}` ({b.scope}) is allocated outside a T.Kernel",
                      hint="T.alloc_* belongs inside the `with T.Kernel(...)` body")
        if id(b) in self.bufs:
            self.fail(f"buffer `{b.name}` is allocated twice")
        for e in b.shape:
            self.expr(e)
        if a.init is not None:
            self.expr(a.init, fetch=b.scope == "var")

    def tile_op(self, op: TileOp) -> None:
        what = f"T.{op.name}"
        if not self.in_kernel:
            self.fail(f"{what} outside a T.Kernel", hint="tile operations run on a kernel's threads")
        for f in dataclasses.fields(op):
            value = getattr(op, f.name)
            if isinstance(value, Region):
                self.region(value, what)
            elif isinstance(value, Expr):
                self.expr(value)
        if isinstance(op, Gemm):
            for label, r in (("A", op.A), ("B", op.B), ("C", op.C)):
                if len(squeeze(r.extents)) != 2:
                    self.fail(f"{what} operand {label} (`{r.buffer.name}`) is not a 2-d tile: "
                              f"extents [{', '.join(str(e) for e in r.extents)}]")
        elif isinstance(op, Reduce | CumSum):
            if not 0 <= op.dim < len(op.src.extents):
                self.fail(f"{what}: dim {op.dim} is out of range for the {len(op.src.extents)}-d source "
                          f"`{op.src.buffer.name}`")
        try:
            op.check()
        except ShapeMismatchError as err:
            raise VerificationError(err.message, loc=err.loc or self.loc, hint=err.hint) from err

    def generic(self, s: Any) -> None:
        """A statement kind this module does not know (a plugin's): check what it holds."""
        if not dataclasses.is_dataclass(s):
            return
        for f in dataclasses.fields(s):
            if f.name == "loc":
                continue
            for item in _flatten(getattr(s, f.name)):
                if isinstance(item, Stmt):
                    self.stmt(item)
                elif isinstance(item, Region):
                    self.region(item, type(s).__name__)
                elif isinstance(item, Buffer):
                    self.visible(item)
                else:
                    self.expr(item)


def _vars_in(e: Expr) -> Iterator[Var]:
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, Var):
            yield node
        else:
            stack.extend(node.children())


def _flatten(value: Any) -> Iterator[Any]:
    if isinstance(value, tuple | list):
        for v in value:
            yield from _flatten(v)
    else:
        yield value
