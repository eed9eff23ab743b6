"""Thread-private buffers (``T.alloc_local`` arrays and ``T.alloc_var`` scalars).

Every thread owns a copy of a private buffer, so a tile op that writes one (``T.fill``,
``T.clear``, ``T.copy`` into it) runs over *all* its elements in every thread, as a serial
(unrolled when small) loop nest, instead of spreading the elements over the threads as it does
for shared and fragment tiles. A fragment source must then be held whole by every thread.

A ``T.Parallel`` loop spreads its iterations over the threads, so it must not write a private
buffer declared outside it: each thread would fill a different copy (``check_private_writes``).
"""

from __future__ import annotations

import math
from typing import Any

from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.errors import BackendNotImplementedError, LayoutError
from ....core_ir.stmt import Alloc, For, Stmt, Store
from ....core_ir.tileops import Copy, Fill
from ....core_ir.visit import rewrite, walk
from ..layout import spread_over_threads
from ..lir import Block
from ..nests import copy_nest, fill_nest, nest_info
from .parallel import drop_proven

#: Scopes whose buffers are private to one thread.
PRIVATE_SCOPES = ("local", "var")

#: Tile ops over at most this many elements are fully unrolled.
UNROLL_LIMIT = 64


def writes_private(op: Any) -> bool:
    """Whether ``op`` is a ``T.copy`` / ``T.fill`` into a thread-private buffer."""
    return isinstance(op, (Copy, Fill)) and op.dst.buffer.scope in PRIVATE_SCOPES


def lower_private(op: Copy | Fill, lc: Any) -> Stmt:
    """``op`` (see ``writes_private``) as a loop nest over the whole region, run by every thread."""
    from .walker import whole_slot

    dst = op.dst.buffer
    if isinstance(op, Copy) and op.src.buffer.scope == "fragment":
        src = op.src.buffer
        lay = lc.frag(src)
        if spread_over_threads(lay):
            raise LayoutError(
                f"T.copy from fragment `{src.name}` into local buffer `{dst.name}`: every thread holds its own copy "
                f"of `{dst.name}` and needs the whole tile, but `{src.name}` is spread over the threads "
                f"({lay.describe()})", loc=op.loc,
                hint=f"copy `{src.name}` into a T.alloc_shared tile first and copy that into `{dst.name}`, or work "
                "on the fragment in a T.Parallel loop")
    nest = copy_nest(op) if isinstance(op, Copy) else fill_nest(op)
    vars_, exts, body = nest_info(nest)
    ranges = dict(lc.ranges)
    sizes = [E.as_int(e) for e in exts]
    for v, n in zip(vars_, sizes):
        if n is not None:
            ranges[v] = (0, max(n, 1) - 1)
    body = drop_proven(body, ranges)

    def fragment(n: Any) -> Any:
        buf = getattr(n, "buffer", None)
        if not isinstance(n, E.Load) or getattr(buf, "scope", None) != "fragment":
            return None
        return E.Load(lc.local_of(buf), (whole_slot(lc, buf, n.indices, n.loc or op.loc),), n.loc)

    body = rewrite(body, fragment)
    unroll = all(n is not None for n in sizes) and math.prod(sizes) <= UNROLL_LIMIT  # type: ignore[arg-type]
    for v, e in reversed(list(zip(vars_, exts))):
        body = For(v, e, "unroll" if unroll else "serial", body, None, (), op.loc)
    return Block(body, "private", op.loc)


def check_private_writes(nest: For) -> None:
    """Raise when the parallel ``nest`` stores to a private buffer declared outside it."""
    inside: set[int] = set()
    for n in walk(nest):
        if isinstance(n, Alloc):
            inside.add(id(n.buffer))
    for n in walk(nest):
        buf = getattr(n, "buffer", None)
        if isinstance(n, Store) and isinstance(buf, Buffer) and buf.scope in PRIVATE_SCOPES \
                and id(buf.storage) not in inside:
            what = "T.alloc_local buffer" if buf.scope == "local" else "variable"
            raise BackendNotImplementedError(
                f"the T.Parallel loop at line {nest.loc.line if nest.loc else '?'} writes `{buf.name}`, a {what} "
                f"declared outside it: on CUDA the loop's iterations run in different threads, each with its own "
                f"copy of `{buf.name}`, so no thread would see all the writes", loc=n.loc or nest.loc,
                hint=f"declare `{buf.name}` inside the T.Parallel body for per-iteration scratch, use "
                "T.alloc_fragment / T.alloc_shared for a tile the whole block fills, or write it in a T.serial loop "
                "outside T.Parallel")
