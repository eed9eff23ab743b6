"""``T.atomic_load`` outside ``T.Parallel``: such statements run once per block (every thread,
the same way), so the block must agree on the value. Thread 0 loads it into a shared-memory slot
between two barriers and every thread reads the slot: ``if`` and ``while`` on it stay uniform (a
barrier under them is legal), and the other threads' later reads are ordered after thread 0's
acquire by the barrier. Inside ``T.Parallel`` each iteration's load is its own thread's, and so is
a load whose address or control flow differs per thread (``core_ir.uniformity``).

A guarded atomic load, ``T.if_then_else(in_range, T.atomic_load(...), 0)`` (core_ir.safe_access),
is fetched whole, so thread 0 loads only where the guard holds; so is any ``T.if_then_else`` with
an atomic load in a branch.

An atomic update that returns the previous value (``AtomicFetch``, ``return_prev=True``) is
fetched the same way: once per block, by thread 0, into the slot (the update happens once); a
per-thread one is each thread's own update (``fetch_store``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.errors import BackendNotImplementedError
from ....core_ir.source import SourceLoc
from ....core_ir.stmt import For, If, Jump, Seq, Stmt, Store, While
from ....core_ir.tileops import TileOp
from ....core_ir.visit import children, rewrite, walk
from ..lir import AtomicStore, Barrier, by_thread_0

#: what a block fetches at once: an atomic load, a guarded one (``_guarded``), an atomic update
Fetched = E.AtomicLoad | E.AtomicFetch | E.Select

#: the expression fields of the statements that hold other statements (which are lowered on their own)
_OWN_FIELDS = {If: ("cond",), While: ("cond",), For: ("start", "extent")}


def uniform_atomic_loads(s: Stmt, lc: Any, lower: Callable[[Stmt], Stmt], fix: Callable[[Any], Any],
                         per_thread: Callable[[Fetched], bool] | None = None) -> Stmt | None:
    """``s`` lowered with its own atomic loads (and fetches) read once per block, or None when it
    has none. ``per_thread`` picks the loads each thread makes itself (in a kernel with thread
    queries: an address that differs per thread, or a load under a per-thread condition, where the
    block's barriers cannot be)."""
    fields = _OWN_FIELDS.get(type(s))
    loads = [ld for ld in _own_loads(s, fields) if per_thread is None or not per_thread(ld)]
    if not loads:
        return None
    if isinstance(s, TileOp):  # its lowering plans are keyed by the op itself: it cannot be rebuilt here
        raise BackendNotImplementedError(
            f"T.atomic_load in the operands of T.{s.name} is not supported on CUDA", loc=s.loc,
            hint="read it into a variable first: v = T.alloc_var(T.int32); v = T.atomic_load(...)")
    slots: dict[int, E.Load] = {}
    fetches: list[Stmt] = []
    for ld in loads:
        if id(ld) not in slots:
            ws = lc.workspace("aload", 1, ld.dtype)
            slots[id(ld)] = E.Load(ws, (E.const(0),), _loc(ld))
            if isinstance(ld, E.AtomicFetch):
                fetches.append(fetch_store(fix(ld), ws))
            else:
                fetches.append(Store(ws, (E.const(0),), fix(ld), _loc(ld)))
    fetch = Seq((Barrier(s.loc), by_thread_0(Seq(tuple(fetches)), s.loc), Barrier(s.loc)))

    def swap(n: Any) -> Any:
        return slots.get(id(n))

    if fields is None:
        return Seq((fetch, lower(rewrite(s, swap))), s.loc)
    reads = dataclasses.replace(s, **{f: rewrite(getattr(s, f), swap) for f in fields})
    if isinstance(s, While):  # fetched again before every test, also after a `continue`
        leave = If(E.unary("not", fix(reads.cond)), Jump("break", s.loc), None, s.loc)
        return While(E.const(True), Seq((fetch, leave, lower(s.body)), s.loc), s.loc)
    return Seq((fetch, lower(reads)), s.loc)


def fetch_store(fetch: E.AtomicFetch, prev: Buffer) -> AtomicStore:
    """The update ``fetch`` as a statement that puts the previous value into ``prev[0]``."""
    return AtomicStore(fetch.kind, fetch.buffer, fetch.indices, fetch.value, None, fetch.loc, prev)


def _own_loads(s: Stmt, fields: tuple[str, ...] | None) -> list[Fetched]:
    """The outermost atomic loads and fetches of ``s`` (of its ``fields`` when given); one whose
    indices hold another is fetched whole, and so is a guarded one."""
    stack: list[Any] = [s] if fields is None else [getattr(s, f) for f in fields if getattr(s, f) is not None]
    out = []
    while stack:
        n = stack.pop()
        if isinstance(n, (E.AtomicLoad, E.AtomicFetch)) or _guarded(n):
            out.append(n)
        else:
            stack.extend(children(n))
    return out


def _guarded(n: Any) -> bool:
    """Whether ``n`` is ``T.if_then_else(cond, t, f)`` with an atomic load in a branch, which only
    the branch ``cond`` picks may make (a guard, as core_ir.safe_access adds)."""
    return isinstance(n, E.Select) and any(isinstance(x, E.AtomicLoad) for b in (n.t, n.f) for x in walk(b))


def _loc(ld: Fetched) -> SourceLoc | None:
    if isinstance(ld, E.Select):
        return next(x.loc for b in (ld.t, ld.f) for x in walk(b) if isinstance(x, E.AtomicLoad))
    return ld.loc
