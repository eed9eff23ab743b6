"""The ``fragment_fallback`` stage: fragments no register layout can serve live in shared memory.

A fragment is a block-wide tile whose elements the backend spreads over the threads' registers;
inside a ``T.Parallel`` loop it is read and written by the loop's own variables (``frag[i, j]``),
so each thread finds its elements in its own registers. TileLang's dequantization kernels also
read a fragment by a derived index, two 4-bit values a byte: ``B_local[i, j // 2]``. No thread
layout serves both that loop and the copy that fills ``B_local``, so such a fragment is made a
shared tile instead: same semantics (a tile the whole block sees; sync insertion orders its
accesses), at the cost of shared-memory traffic. Only fragments that no tile op other than
``T.copy`` / ``T.fill`` / ``T.clear`` touches are moved (a gemm or reduction needs registers); the
others keep the ``LayoutError`` that says what to change.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from ...core_ir import expr as E
from ...core_ir.buffer import Buffer, Region
from ...core_ir.stmt import Alloc, For, PrimFunc, Stmt, Store
from ...core_ir.tileops import Copy, Fill, TileOp
from ...core_ir.visit import children, rewrite, walk

log = logging.getLogger("tilelang_x.cuda.layout")


def _derived_accesses(s: Any, loop_vars: tuple[E.Var, ...], out: dict[int, Buffer]) -> None:
    """Fragments that a ``T.Parallel`` body indexes by something other than its loop variables."""
    if isinstance(s, For) and s.kind == "parallel":
        loop_vars = (*loop_vars, s.var)
    elif loop_vars and isinstance(s, (E.Load, Store)) and s.buffer.scope == "fragment" and not all(
            any(i is v for v in loop_vars) for i in s.indices):
        out[id(s.buffer)] = s.buffer
    for c in children(s):
        _derived_accesses(c, loop_vars, out)


def _register_bound(body: Stmt) -> set[int]:
    """Fragments a tile op other than a copy or fill reads or writes."""
    return {id(r.buffer) for n in walk(body) if isinstance(n, TileOp) and not isinstance(n, (Copy, Fill))
            for r in n.regions()}


def fragment_fallback_stage(func: PrimFunc, ctx: Any) -> PrimFunc:
    found: dict[int, Buffer] = {}
    _derived_accesses(func.body, (), found)
    bound = _register_bound(func.body)
    moved = {k: Buffer(b.name, b.shape, b.dtype, "shared", b.loc) for k, b in found.items() if k not in bound}
    if not moved:
        return func
    for b in moved.values():
        log.debug("fragment `%s` (line %s) is indexed by more than its T.Parallel loop's variables: kept in "
                  "shared memory", b.name, getattr(b.loc, "line", "?"))

    def fn(n: Any) -> Any:
        buf = getattr(n, "buffer", None)
        if isinstance(buf, Buffer) and id(buf) in moved and isinstance(n, (E.Load, Store, Region, Alloc)):
            return dataclasses.replace(n, buffer=moved[id(buf)])
        return None

    return dataclasses.replace(func, body=rewrite(func.body, fn))
