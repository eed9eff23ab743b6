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
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from ...core_ir import expr as E
from ...core_ir.buffer import Buffer, Region
from ...core_ir.errors import LayoutError
from ...core_ir.stmt import Alloc, For, PrimFunc, Seq, Store
from ...core_ir.tileops import Copy, Fill
from ...core_ir.visit import rewrite, walk

log = logging.getLogger("tilelang_x.cuda.layout")

#: exchanges one kernel may get before a conflict is reported instead
MAX_EXCHANGES = 8


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
    staging = Buffer(f"{buf.name}_exchange{count}", buf.shape, buf.dtype, "shared", buf.loc)
    copy = Buffer(f"{buf.name}_as{count}", buf.shape, buf.dtype, "fragment", buf.loc)
    loc = getattr(target, "loc", None)

    def moved(src: Buffer, dst: Buffer) -> list[Any]:
        return [Copy(Region.full(src), Region.full(staging), loc=loc), Copy(Region.full(staging), Region.full(dst),
                                                                              loc=loc)]

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
