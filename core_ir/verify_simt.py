"""The verifier's rules for per-thread values (``core_ir.uniformity``).

Tile ops, ``T.Parallel`` loops and block and cluster barriers (the block's votes too) are executed
by the whole block together, so every thread must reach them with the same operands: not under a
condition that differs between threads, with uniform region offsets and scalar operands, without
reading a per-thread local. A block vote stands only where each thread computes the statement's
operands itself: a variable's value, an ``if`` / ``while`` condition.
Thread queries and warp operations stay out of ``T.Parallel`` bodies (the backend maps their
iterations onto threads), as do per-thread locals. ``break`` / ``continue`` may not leave a loop
from under a condition that differs between threads. A kernel with warp operations runs whole
warps (the block's votes excepted): its block size is a multiple of 32.
"""

from __future__ import annotations

from .allreduce import ThreadAllreduce
from .buffer import Region
from .errors import VerificationError
from .expr import BLOCK_VOTE_OPS, AtomicLoad, Expr, Load, ThreadIndex, WarpOp, as_int
from .source import SourceLoc
from .stmt import CLUSTER_SCOPES, Alloc, ExprStmt, For, If, Jump, Kernel, PrimFunc, Seq, Stmt, Store, Sync, While
from .tileops import Atomic, Gemm, GemmSp, Reduce, TileOp
from .uniformity import PRIVATE_SCOPES, Uniformity, written_regions
from .visit import children, walk

__all__ = ["verify_simt"]

_DIVERGENT_HINT = ("compute the condition from block-level values only (not from T.get_thread_binding, a warp "
                   "operation or a per-thread variable), or move the statement out of the `if` / loop")


def verify_simt(func: PrimFunc) -> None:
    """Raise ``VerificationError`` where ``func`` uses a per-thread value where the whole block
    must agree (see the module docstring)."""
    for node in walk(func.body):
        if isinstance(node, Kernel):
            u = Uniformity(node.body)
            if u.simt:
                _Checker(func, u).kernel(node)


class _Checker:
    def __init__(self, func: PrimFunc, u: Uniformity) -> None:
        self.func = func
        self.u = u
        self.div = 0  # divergent constructs around the statement being checked
        self.loops: list[int] = []  # self.div at the entry of each enclosing loop

    def fail(self, message: str, loc: SourceLoc | None, hint: str) -> None:
        raise VerificationError(f"in kernel `{self.func.name}`: {message}", loc=loc or self.func.loc, hint=hint)

    def kernel(self, k: Kernel) -> None:
        if k.num_threads % 32 and any(_is_warp_op(n) for n in walk(k.body)):
            where = next(s for s in walk(k.body) if isinstance(s, Stmt) and _has_warp_op(s))
            self.fail(f"T.{_first_warp_op(where)} needs whole warps, but the block has {k.num_threads} threads",
                      getattr(where, "loc", None) or k.loc,
                      hint="make T.Kernel(threads=...) a multiple of 32: every lane of a warp takes part")
        self.stmt(k.body)

    def stmt(self, s: Stmt) -> None:
        vote = None if isinstance(s, Seq) else _block_vote(s)
        if vote is not None:
            self.block_vote(s, vote)
        if isinstance(s, Seq):
            for c in s.stmts:
                self.stmt(c)
        elif isinstance(s, For) and s.kind == "parallel":
            self.parallel(s)
        elif isinstance(s, (For, While)):
            self.loops.append(self.div)
            self.nested(s, s.body)
            self.loops.pop()
        elif isinstance(s, If):
            self.nested(s, s.then)
            if s.otherwise is not None:
                self.nested(s, s.otherwise)
        elif isinstance(s, Jump):
            if self.loops and self.div > self.loops[-1]:
                self.fail(f"`{s.kind}` under a condition that differs between the threads of the block",
                          s.loc, hint="the threads of a block leave a loop together here: " + _DIVERGENT_HINT)
        elif isinstance(s, Sync):
            if (s.scope in ("block", "grid") or s.scope in CLUSTER_SCOPES) and self.div:
                self.fail(f"{s.call} under a condition that differs between the threads of the block: the threads "
                          "that skip it would never arrive", s.loc, hint=_DIVERGENT_HINT)
        elif isinstance(s, TileOp):
            self.tile_op(s)
        elif isinstance(s, ThreadAllreduce) and self.div:
            self.fail("T.tvm_thread_allreduce under a condition that differs between the threads of the block: "
                      "every thread of the block takes part", s.loc,
                      hint=_DIVERGENT_HINT + "; threads that should not contribute pass False as its condition")

    def block_vote(self, s: Stmt, vote: str) -> None:
        """Every thread must evaluate a block vote: outside divergent code, where each thread computes
        the statement's operands itself (a variable, an ``if`` / ``while`` condition)."""
        if self.div:
            self.fail(f"T.{vote} under a condition that differs between the threads of the block: it is a "
                      "barrier of the whole block, and the threads that skip it would never arrive", s.loc,
                      hint=_DIVERGENT_HINT)
        own = isinstance(s, (If, While, ExprStmt)) or isinstance(s, (Alloc, Store)) and s.buffer.scope in PRIVATE_SCOPES
        if not own:
            self.fail(f"T.{vote} in the operands of a {type(s).__name__}: the backend may let one thread (or a loop "
                      "of the tile's elements) compute them, and every thread must reach the barrier once", s.loc,
                      hint=f"assign it to a variable first (`n = T.{vote}(...)`) and use the variable")

    def nested(self, s: Stmt, body: Stmt) -> None:
        div = self.u.divergent(s)
        self.div += div
        self.stmt(body)
        self.div -= div

    def tile_op(self, op: TileOp) -> None:
        name = f"T.{getattr(op, 'name', type(op).__name__.lower())}"
        if isinstance(op, Atomic) and isinstance(op.value, Expr) and all(_is_one(x) for x in op.dst.extents):
            return  # an element atomic: each thread makes its own, like a store
        if self.div:
            self.fail(f"{name} under a condition that differs between the threads of the block: the whole block "
                      "executes a tile op", op.loc, hint=_DIVERGENT_HINT)
        written = written_regions(op)
        for r in op.regions():
            if self.u.varying_region(r):
                self.fail(f"{name}: the region of `{r.buffer.name}` starts at a per-thread offset", op.loc,
                          hint="tile ops take one tile for the whole block: index it with block-level values, "
                          "or write per-thread element accesses (`A[i] = ...`) instead")
            if self.u.varying_buffer(r.buffer) and (all(r is not w for w in written) or _reads_dst(op)):
                self.fail(f"{name} reads `{r.buffer.name}`, which holds per-thread values", op.loc,
                          hint="tile ops see the block's tiles, not one thread's registers: copy the values "
                          "through shared memory element by element, or use T.alloc_fragment")
        for f in op.__dataclass_fields__:
            value = getattr(op, f)
            if isinstance(value, Expr) and self.u.varying(value):
                self.fail(f"{name}: its operand `{value}` differs between threads", op.loc,
                          hint="tile ops take block-level scalars; store per-thread values element by element")

    def parallel(self, nest: For) -> None:
        if self.div:
            self.fail("T.Parallel loop under a condition that differs between the threads of the block: the "
                      "backend spreads its iterations over all threads", nest.loc, hint=_DIVERGENT_HINT)
        for s in walk(nest):
            if isinstance(s, ThreadAllreduce):
                self.fail("T.tvm_thread_allreduce inside a T.Parallel loop", s.loc,
                          hint="a thread allreduce runs outside T.Parallel, where each thread executes the kernel's "
                               "statements itself")
            if not isinstance(s, Stmt):
                continue
            for e in children(s):
                if isinstance(e, (Expr, Region)):
                    self.parallel_expr(e, s)

    def parallel_expr(self, root: Expr | Region, s: Stmt) -> None:
        for n in walk(root):
            if isinstance(n, ThreadIndex):
                self.fail("T.get_thread_binding (or a thread query built on it) inside a T.Parallel loop", s.loc,
                          hint="the backend decides which thread runs which iteration: index with the loop "
                          "variables, or compute the thread query before the loop into a block-level value")
            if isinstance(n, WarpOp):
                self.fail(f"T.{n.op} inside a T.Parallel loop", s.loc,
                          hint="warp operations run outside T.Parallel, where each thread executes the kernel's "
                          "statements itself")
            if isinstance(n, (Load, AtomicLoad)) and self.u.varying_buffer(n.buffer):
                self.fail(f"T.Parallel loop reads `{n.buffer.name}`, which holds per-thread values", s.loc,
                          hint="the loop's iterations run on other threads, which hold other values: pass the "
                          "values through a T.alloc_shared tile")


def _is_one(x: Expr) -> bool:
    return as_int(x) == 1


def _reads_dst(op: TileOp) -> bool:
    """Whether ``op`` combines its result with the destination's old values."""
    if isinstance(op, (Gemm, GemmSp)):
        return not op.clear_accum
    return isinstance(op, Atomic) or (isinstance(op, Reduce) and not op.clear)


def _is_warp_op(n: object) -> bool:
    """Whether ``n`` is an operation of the lanes of a warp (the block's votes need no whole warps)."""
    return isinstance(n, WarpOp) and n.op not in BLOCK_VOTE_OPS


def _has_warp_op(s: Stmt) -> bool:
    return any(_is_warp_op(n) for e in children(s) if isinstance(e, (Expr, Region)) for n in walk(e))


def _first_warp_op(s: Stmt) -> str:
    return next(n.op for e in children(s) if isinstance(e, (Expr, Region)) for n in walk(e) if _is_warp_op(n))


def _block_vote(s: Stmt) -> str | None:
    """The block vote among the operands of ``s`` (not of its nested statements), if any."""
    return next((n.op for e in children(s) if isinstance(e, (Expr, Region)) for n in walk(e)
                 if isinstance(n, WarpOp) and n.op in BLOCK_VOTE_OPS), None)
