"""Layout conflicts resolved through shared memory.

A fragment's elements live in the registers of the threads its layout names. Two loops can need one
fragment under different layouts: TileLang's MLA decode with 32-key blocks splits the score tile's
rows over two warps (a 64x32 tile cannot give 8 warps 8 columns each), so the row statistics
(``scores_max``, ``logsum``) are spread that way, while the output tile, split by columns only,
needs every row's value in every warp (``acc_o[i, j] /= logsum[i]``). Layout inference then meets a
conflict. Rather than failing, the loop it met the conflict in gets its own copy of the fragment,
laid out as it needs: before the loop the fragment goes to a shared tile and from there to the copy
(when the loop reads it), after the loop back the same way (when it writes it). Sync insertion
orders the shared accesses. Each exchange costs a round trip through shared memory where the loop
runs, so it is logged (debug, ``tilelang_x.cuda.layout``) with the line to change to avoid it.

The same round trip serves reads of single elements outside ``T.Parallel``. TileLang's split-KV
combine kernel reduces the LSE maxima into a fragment spread one element a thread and then reads
``lse_max_local[0]`` in statements every thread runs: element 0 lives in thread 0's registers
only. Such a statement (or the run of statements that read the fragment without writing it) gets
the fragment's values in a shared tile, copied there by their owners just before it, and reads
the element from there (``broadcast_reads``).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from ...core_ir import expr as E
from ...core_ir.buffer import Buffer, Region
from ...core_ir.errors import LayoutError
from ...core_ir.stmt import Alloc, For, If, Kernel, PrimFunc, Seq, Stmt, Store, While
from ...core_ir.tileops import Copy, Fill, TileOp
from ...core_ir.uniformity import Uniformity, written_regions
from ...core_ir.visit import children, rewrite, walk
from .lir import PtrTo

log = logging.getLogger("tilelang_x.cuda.layout")

#: exchanges one kernel may get before a conflict is reported instead
MAX_EXCHANGES = 8
#: annotation of the copies added here (``exchange_through_shared``, ``broadcast_reads``): they take
#: the layout of the fragment they copy from or into and never choose one (layout inference leaves
#: them out of its free choices)
FOLLOW = "tlx.follow"


class NestConflict(LayoutError):
    """A parallel loop (or element-wise tile op) ``key`` needs ``buffer`` in a layout other than
    the one it already has."""

    def __init__(self, message: str, key: int, buffer: Buffer, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.key = key
        self.buffer = buffer


def _uses(stmt: Any, buf: Buffer) -> tuple[bool, bool]:
    """Whether ``stmt`` reads and whether it writes ``buf``."""
    if isinstance(stmt, Copy):
        return stmt.src.buffer is buf, stmt.dst.buffer is buf
    if isinstance(stmt, Fill):
        return False, stmt.dst.buffer is buf
    reads = any(isinstance(n, E.Load) and n.buffer is buf for n in walk(stmt))
    writes = any(isinstance(n, Store) and n.buffer is buf for n in walk(stmt))
    return reads, writes


def exchange_through_shared(func: PrimFunc, conflict: NestConflict, count: int) -> PrimFunc | None:
    """``func`` with the conflicting loop working on its own copy of the fragment (see the module
    docstring), or ``None`` when the conflict cannot be resolved this way."""
    buf = conflict.buffer
    shape = buf.static_shape()
    target = next((n for n in walk(func.body) if id(n) == conflict.key), None)
    if shape is None or count >= MAX_EXCHANGES or not isinstance(target, (For, Copy, Fill)):
        return None
    reads, writes = _uses(target, buf)
    staging = _staging(buf, f"exchange{count}")
    copy = Buffer(f"{buf.name}_as{count}", buf.shape, buf.dtype, "fragment", buf.loc)
    loc = getattr(target, "loc", None)

    # the copy takes its layout from the loop, the original keeps its own: a copy that chose one
    # (before the loop, in program order) would meet the same conflict again
    def moved(src: Buffer, dst: Buffer) -> list[Any]:
        return [_to_staging(src, staging, loc), Copy(Region.full(staging), Region.full(dst), _FOLLOWS, loc=loc)]

    def on_copy(n: Any) -> Any:
        if isinstance(n, (E.Load, Store, Region)) and n.buffer is buf:
            return dataclasses.replace(n, buffer=copy)
        return None

    stmts = [Alloc(staging, loc=loc), Alloc(copy, loc=loc), *(moved(buf, copy) if reads else ()),
             rewrite(target, on_copy), *(moved(copy, buf) if writes else ())]
    log.debug("line %s: `%s` is needed in two thread layouts (%s); this statement works on a copy exchanged "
              "through shared memory", getattr(loc, "line", "?"), buf.name, conflict.message)
    return dataclasses.replace(func, body=rewrite(func.body, lambda n: Seq(tuple(stmts), loc) if n is target
                                                  else None))


def _staging(buf: Buffer, suffix: str) -> Buffer:
    """A shared tile of ``buf``'s shape and dtype that ``buf`` passes through."""
    return Buffer(f"{buf.name}_{suffix}", buf.shape, buf.dtype, "shared", buf.loc)


_FOLLOWS = ((FOLLOW, True),)


def _to_staging(buf: Buffer, staging: Buffer, loc: Any) -> Copy:
    return Copy(Region.full(buf), Region.full(staging), _FOLLOWS, loc=loc)


def broadcast_reads(func: PrimFunc, spread: set[Buffer]) -> PrimFunc | None:
    """``func`` with the reads of the fragments ``spread`` (those whose layout spreads them over
    the threads) outside ``T.Parallel`` loops and tile ops taken from a shared tile that the
    fragment is copied into just before the statement reading it (see the module docstring);
    ``None`` when there are none. One copy serves a run of sibling statements that do not write
    the fragment; a statement that both writes and reads it is entered, unless the threads may
    take different paths through it (no barrier could be placed in it): its reads are left to
    fail in lowering."""
    reads = {id(n) for n in _scalar_loads(func.body) if n.buffer in spread}
    if not reads:
        return None
    kernel = next(n for n in walk(func.body) if isinstance(n, Kernel))
    uni = Uniformity(kernel.body)
    placer = _Broadcast(reads, uni if uni.simt else None)
    new = dataclasses.replace(kernel, body=placer.stmt(kernel.body))
    return dataclasses.replace(func, body=rewrite(func.body, lambda n: new if n is kernel else None)) \
        if placer.count else None


def _scalar_loads(node: Any) -> list[E.Load]:
    """The fragment loads of ``node`` that every thread evaluates itself: outside ``T.Parallel``
    loops and tile ops."""
    if isinstance(node, For) and node.kind == "parallel" or isinstance(node, TileOp):
        return []
    found = [node] if isinstance(node, E.Load) and node.buffer.scope == "fragment" else []
    for c in children(node):
        found.extend(_scalar_loads(c))
    return found


def _writes(stmt: Stmt, buf: Buffer) -> bool:
    """Whether ``stmt`` may write fragment ``buf``."""
    for n in walk(stmt):
        if isinstance(n, Store) and n.buffer is buf or isinstance(n, PtrTo) and n.buffer is buf and n.mode != "r":
            return True
        if isinstance(n, TileOp) and any(r.buffer is buf for r in written_regions(n)):
            return True
    return False


def _redirect(stmt: Stmt, mapping: dict[int, Buffer]) -> Stmt:
    """``stmt`` with the loads ``mapping`` names (by id) reading the buffer it gives instead."""
    return rewrite(stmt, lambda n: dataclasses.replace(n, buffer=mapping[id(n)])
                   if isinstance(n, E.Load) and id(n) in mapping else None)


class _Broadcast:
    """Places the copies of ``broadcast_reads`` and points the reads ``reads`` (ids of loads) at them."""

    def __init__(self, reads: set[int], uni: Uniformity | None) -> None:
        self.reads = reads
        self.uni = uni
        self.count = 0

    def stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, Seq):
            return self.seq(s)
        if isinstance(s, For) and s.kind != "parallel" and not self.divergent(s):
            return dataclasses.replace(s, body=self.stmt(s.body))
        if isinstance(s, While) and not self.divergent(s):
            return dataclasses.replace(s, body=self.stmt(s.body))
        if isinstance(s, If) and not self.divergent(s):
            return dataclasses.replace(s, then=self.stmt(s.then),
                                       otherwise=None if s.otherwise is None else self.stmt(s.otherwise))
        return self.seq(Seq((s,), s.loc)) if self.read_here(s) else s

    def divergent(self, s: Stmt) -> bool:
        return self.uni is not None and self.uni.divergent(s)

    def read_here(self, s: Stmt) -> bool:
        """Whether ``s`` reads a broadcast fragment that it does not write (a copy can go before it)."""
        return any(id(n) in self.reads and not _writes(s, n.buffer) for n in _scalar_loads(s))

    def seq(self, s: Seq) -> Stmt:
        out: list[Stmt] = []
        valid: dict[Buffer, Buffer] = {}  # fragment -> its shared copy, while no statement writes it
        for c in s.stmts:
            loads = [n for n in _scalar_loads(c) if id(n) in self.reads]
            written = {n.buffer for n in loads if _writes(c, n.buffer)}
            for buf in dict.fromkeys(n.buffer for n in loads if n.buffer not in written):
                if buf not in valid:
                    valid[buf] = self.copy(buf, c, out)
            mapping = {id(n): valid[n.buffer] for n in loads if n.buffer not in written}
            if mapping:
                c = _redirect(c, mapping)
            if written:
                c = self.stmt(c)
            for buf in [b for b in valid if _writes(c, b)]:
                del valid[buf]
            out.append(c)
        return s if len(out) == len(s.stmts) and all(a is b for a, b in zip(out, s.stmts)) else Seq(tuple(out), s.loc)

    def copy(self, buf: Buffer, reader: Stmt, out: list[Stmt]) -> Buffer:
        staging = _staging(buf, f"bcast{self.count}")
        self.count += 1
        loc = getattr(reader, "loc", None) or buf.loc
        out += [Alloc(staging, loc=loc), _to_staging(buf, staging, loc)]
        log.debug("%s: fragment `%s` is spread over the threads, and this statement reads it outside T.Parallel: its "
                  "values are passed through shared memory (a store by their owners and a barrier first)",
                  loc if loc is not None else "?", buf.name)
        return staging
