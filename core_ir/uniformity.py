"""Which values of a kernel differ between the threads of a block.

Statements outside ``T.Parallel`` describe what the block does as a whole, so their values are
*uniform*: every thread computes the same. ``T.get_thread_binding`` (``ThreadIndex``) and the warp
operations (``WarpOp``) make values *varying* (per-thread), and so does everything computed from
them, except the block's votes (``T.syncthreads_count/and/or``), the same in every thread:

- an expression is varying when it contains a thread index, a warp operation, a varying loop
  variable or a read of a varying ``local`` / ``var`` buffer (a read of shared or global memory
  is varying only through its indices);
- a ``local`` / ``var`` buffer is varying when some statement writes it a varying value, at a
  varying index, or under control flow that is divergent relative to the buffer's declaration
  (inside an ``if`` / ``while`` on a varying condition, or a loop with varying bounds, that the
  declaration is outside of: the threads that skip the write keep their old value);
- a serial loop's variable is varying when its bounds are;
- the previous value an atomic update returns (``AtomicFetch``) is varying when its operands are,
  or when it runs under divergent control flow (each thread that gets there makes its own update).

Writes feed reads (a variable assigned a varying value at the end of a loop makes reads at the
start of the next iteration varying), so the analysis iterates to a fixpoint. ``T.Parallel``
bodies are not analysed: their iterations are the backend's business, and the verifier keeps
varying values out of them (``core_ir.verify_simt``).
"""

from __future__ import annotations

from .allreduce import ThreadAllreduce
from .buffer import Buffer, Region
from .expr import BLOCK_VOTE_OPS, AtomicFetch, AtomicLoad, Expr, Load, ThreadIndex, Var, WarpOp
from .stmt import Alloc, For, If, Kernel, NamedBarrier, Seq, Stmt, Store, While
from .tileops import Atomic, Copy, CumSum, Fill, Gemm, GemmSp, Reduce, TileOp
from .visit import walk

__all__ = ["Uniformity", "uses_simt", "written_regions"]

#: scopes whose buffers are private to a thread (the ones a varying write makes varying)
PRIVATE_SCOPES = ("local", "var")


def uses_simt(node: Stmt) -> bool:
    """Whether ``node`` contains a thread index, a warp operation or a thread allreduce (without
    them every value of the block is uniform), or a named barrier (which parts of the block reach:
    the backends keep the block's threads as the kernel wrote them)."""
    return any(isinstance(n, (ThreadIndex, WarpOp, NamedBarrier, ThreadAllreduce)) for n in walk(node))


def written_regions(op: TileOp) -> tuple[Region, ...]:
    """The regions a tile op writes."""
    if isinstance(op, (Copy, Fill, Reduce, CumSum, Atomic)):
        return (op.dst,)
    if isinstance(op, (Gemm, GemmSp)):
        return (op.C,)
    return op.regions()


class Uniformity:
    """The varying buffers and loop variables of a kernel body (see the module docstring)."""

    def __init__(self, body: Stmt) -> None:
        self.simt = uses_simt(body)
        self._buffers: set[int] = set()  # id(storage) of varying local / var buffers
        self._vars: set[int] = set()  # id of varying loop variables
        self._level: dict[int, int] = {}  # id(storage) -> divergence depth of its declaration
        self._memo: dict[int, bool] = {}
        if not self.simt:
            return
        changed = True
        while changed:
            before = (len(self._buffers), len(self._vars))
            self._memo.clear()
            self._stmt(body, 0)
            changed = (len(self._buffers), len(self._vars)) != before

    # ---- queries ----------------------------------------------------------------------------
    def varying(self, e: object) -> bool:
        """Whether the value of expression ``e`` may differ between the threads of a block."""
        if not self.simt or not isinstance(e, Expr):
            return False
        key = id(e)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._varying(e)
            self._memo[key] = hit
        return hit

    def varying_buffer(self, buf: Buffer) -> bool:
        """Whether ``buf`` (a ``local`` / ``var`` buffer) holds per-thread values."""
        return id(buf.storage) in self._buffers

    def varying_region(self, r: Region) -> bool:
        """Whether the offsets or extents of region ``r`` differ between threads."""
        return any(self.varying(x) for x in (*r.starts, *r.extents))

    def divergent(self, s: Stmt) -> bool:
        """Whether the threads of a block may take different paths through ``s`` (an ``if`` /
        ``while`` on a varying condition, a serial loop with varying bounds)."""
        if isinstance(s, (If, While)):
            return self.varying(s.cond)
        if isinstance(s, For) and s.kind != "parallel":
            return self.varying(s.extent) or self.varying(s.start)
        return False

    # ---- the fixpoint -----------------------------------------------------------------------
    def _varying(self, e: Expr) -> bool:
        if isinstance(e, WarpOp) and e.op in BLOCK_VOTE_OPS:  # the block's vote: every thread gets it
            return False
        if isinstance(e, (ThreadIndex, WarpOp)):
            return True
        if isinstance(e, Var):
            return id(e) in self._vars
        if isinstance(e, (Load, AtomicLoad)) and id(e.buffer.storage) in self._buffers:
            return True
        return any(self.varying(c) for c in e.children())

    def _write(self, buf: Buffer, varying: bool, depth: int) -> None:
        key = id(buf.storage)
        if buf.scope in PRIVATE_SCOPES and (varying or depth > self._level.get(key, 0)):
            self._buffers.add(key)

    def _stmt(self, s: Stmt, depth: int) -> None:
        if isinstance(s, Seq):
            for c in s.stmts:
                self._stmt(c, depth)
        elif isinstance(s, Kernel):
            self._stmt(s.body, 0)
        elif isinstance(s, For):
            if s.kind == "parallel":
                return
            div = self.divergent(s)
            if div:
                self._vars.add(id(s.var))
            self._stmt(s.body, depth + div)
        elif isinstance(s, If):
            div = self.divergent(s)
            self._stmt(s.then, depth + div)
            if s.otherwise is not None:
                self._stmt(s.otherwise, depth + div)
        elif isinstance(s, While):
            self._stmt(s.body, depth + self.divergent(s))
        elif isinstance(s, Alloc):
            self._level.setdefault(id(s.buffer.storage), depth)
            if s.init is not None:
                # under divergent control flow each thread that gets there makes its own atomic update
                own = depth > 0 and isinstance(s.init, AtomicFetch)
                self._write(s.buffer, own or self.varying(s.init), depth)
        elif isinstance(s, Store):
            varying = self.varying(s.value) or any(self.varying(i) for i in s.indices)
            self._write(s.buffer, varying, depth)
        elif isinstance(s, TileOp):
            self._tile_op(s, depth)
        elif isinstance(s, ThreadAllreduce):  # one result per group of threads
            self._write(s.out, True, depth)

    def _tile_op(self, op: TileOp, depth: int) -> None:
        written = written_regions(op)
        inputs = [r for r in op.regions() if all(r is not w for w in written) or isinstance(op, (Atomic, Gemm, GemmSp))]
        varying = any(self.varying_region(r) or self.varying_buffer(r.buffer) for r in inputs)
        varying = varying or any(self.varying_region(r) for r in written)
        varying = varying or any(self.varying(getattr(op, f, None)) for f in op.__dataclass_fields__)
        for r in written:
            self._write(r.buffer, varying, depth)
