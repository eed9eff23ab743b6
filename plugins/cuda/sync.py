"""The ``sync_insertion`` stage: ``__syncthreads()`` between shared-memory accesses of different
threads that could race (read after write, write after read or write).

Lowered tile ops and parallel loops (``Block``) are treated as units: a barrier goes before or
after them, never inside (they order their own internal accesses). Workspaces only their owning
warps touch (``LowerCtx.warp_private``: the staged epilogue's slots) are not tracked. Loops are
walked twice so that hazards carried from the end of one iteration to the start of the next are
seen. cp.async writes are ordered by the pipeline's own wait + barrier and are not tracked here.
Buffers are tracked by ``storage``: an access through a view (``T.view``) is one to its base.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...core_ir.buffer import Buffer
from ...core_ir.expr import AtomicLoad, BinOp, Load, as_int
from ...core_ir.stmt import For, If, Jump, Kernel, PrimFunc, Seq, Stmt, Store, WarpSpecialize, While
from ...core_ir.visit import walk
from .lir import THREAD, AtomicStore, Barrier, Block, PtrTo, SmemAddr
from .warp_specialize import SETS, region_barriers

# (written, read) shared buffers since the last barrier; in a kernel with T.ws regions, those a
# region of warpgroups ids accessed are (ids, buffer) pairs (see `_Sync.region`)
State = tuple[frozenset[Any], frozenset[Any]]
EMPTY: State = (frozenset(), frozenset())


def accesses(s: Stmt, private: frozenset[int] = frozenset()) -> tuple[set[int], set[int], bool]:
    """Shared buffers written and read by ``s`` (but the warp-private ones, ``private``), and
    whether it contains a barrier."""
    w: set[int] = set()
    r: set[int] = set()
    barrier = False
    for n in walk(s):
        if isinstance(n, Barrier):
            barrier = True
        buf = getattr(n, "buffer", None)
        if not isinstance(buf, Buffer) or buf.scope != "shared" or id(buf.storage) in private:
            continue
        key = id(buf.storage)  # an access through a view is one to the tile owning its memory
        if isinstance(n, (Store, AtomicStore)):
            w.add(key)
        elif isinstance(n, (Load, AtomicLoad)):
            r.add(key)
        elif isinstance(n, (SmemAddr, PtrTo)):
            if n.mode == "async":
                continue
            (r if n.mode == "r" else w).add(key)
            if n.mode == "rw":
                r.add(key)
    return w, r, barrier


def _merge(a: State, *more: State) -> State:
    for b in more:
        a = a[0] | b[0], a[1] | b[1]
    return a


class _Sync:
    def __init__(self, private: frozenset[int], sets: dict[tuple[int, ...], int] | None = None) -> None:
        self.private = private
        self.sets = sets or {}  # a manual kernel's named barriers of several warpgroups (see `region`)
        # per enclosing loop, innermost last: the states at its `continue`s and at its `break`s
        self.jumps: list[tuple[list[State], list[State]]] = []

    def stmt(self, s: Stmt, st: State) -> tuple[Stmt, State]:
        if isinstance(s, Seq):
            out = []
            for c in s.stmts:
                c2, st = self.stmt(c, st)
                if isinstance(c2, Seq) and isinstance(c, Seq) is False and c2 is not c and c2.stmts and \
                        isinstance(c2.stmts[0], Barrier):
                    out.extend(c2.stmts)
                else:
                    out.append(c2)
            return Seq(tuple(out), s.loc), st
        if isinstance(s, Kernel):
            body, st = self.stmt(s.body, EMPTY)
            return dataclasses.replace(s, body=body), st
        if isinstance(s, Barrier):
            return s, EMPTY
        if isinstance(s, Jump):
            continues, breaks = self.jumps[-1]
            (breaks if s.kind == "break" else continues).append(st)
            return s, EMPTY  # nothing after it in its block runs
        if isinstance(s, WarpSpecialize):
            return self.region(s, st)
        if isinstance(s, (For, While)):
            return self.loop(s, st)
        if isinstance(s, If) and _one_thread(s.cond):
            return self.leaf(s, st)  # not every thread would reach a barrier in it: one goes before it
        if isinstance(s, If):
            then, s1 = self.stmt(s.then, st)
            other, s2 = (None, st) if s.otherwise is None else self.stmt(s.otherwise, st)
            return dataclasses.replace(s, then=then, otherwise=other), _merge(s1, s2)
        return self.leaf(s, st)

    def loop(self, s: For | While, st: State) -> tuple[Stmt, State]:
        """A hazard between what precedes the loop and its body gets one barrier before the loop,
        not one in every iteration (which would also keep warpgroups in lockstep); hazards carried
        from one iteration to the next are found by walking the body twice. A ``continue`` carries
        its state to the next iteration, a ``break`` to the loop's exit."""
        w, r, _ = accesses(s.body, self.private)
        hoisted = _conflict(_untagged(st), w, r)  # not for T.ws regions' accesses: see `region`
        if hoisted:
            st = EMPTY
        _, end, continues, _ = self.body(s.body, st)
        body, end2, continues2, breaks = self.body(s.body, _merge(st, end, *continues))
        out: Stmt = dataclasses.replace(s, body=body)
        return (Seq((Barrier(), out), s.loc) if hoisted else out), _merge(st, end2, *continues2, *breaks)

    def body(self, s: Stmt, st: State) -> tuple[Stmt, State, list[State], list[State]]:
        """A loop body from entry state ``st``: the new body, its end state, and the states at its
        ``continue``s and ``break``s."""
        self.jumps.append(([], []))
        try:
            out, end = self.stmt(s, st)
        finally:
            continues, breaks = self.jumps.pop()
        return out, end, continues, breaks

    def region(self, s: WarpSpecialize, st: State) -> tuple[Stmt, State]:
        """A ``T.ws`` region (warp_specialize.py): a barrier of the block before it only for a
        hazard with what the block did outside the regions (regions run side by side, ordered by
        the kernel's mbarriers: a block barrier between two would hang them); inside it, barriers
        for hazards with the region's own earlier accesses, made its warpgroups' named barrier.
        Its accesses stay in the state tagged ``(ids, buffer)``."""
        ids = s.ids
        w, r, _ = accesses(s.body, self.private)
        pre: tuple[Stmt, ...] = ()
        if _conflict(_untagged(st), w, r):
            pre, st = (Barrier(),), EMPTY
        own: State = (frozenset(k[1] for k in st[0] if isinstance(k, tuple) and k[0] == ids),
                      frozenset(k[1] for k in st[1] if isinstance(k, tuple) and k[0] == ids))
        body, _ = self.stmt(s.body, own)
        out = region_barriers(WarpSpecialize(ids, body, s.loc), self.sets)
        tagged = frozenset((ids, k) for k in w), frozenset((ids, k) for k in r)
        return (Seq((*pre, out), s.loc) if pre else out), _merge(st, tagged)  # type: ignore[arg-type]

    def leaf(self, s: Stmt, st: State) -> tuple[Stmt, State]:
        w, r, has_barrier = accesses(s, self.private)
        written, read = st
        if _conflict(st, w, r):
            out: Stmt = Seq((Barrier(), s))
            written, read = frozenset(), frozenset()
        else:
            out = s
        if has_barrier:
            written, read = frozenset(), frozenset()
        return out, (written | frozenset(w), read | frozenset(r))


def _one_thread(cond: Any) -> bool:
    """Whether ``cond`` is ``tx == 0`` (``lir.by_thread_0``: a statement one thread runs for the block)."""
    return isinstance(cond, BinOp) and cond.op == "==" and cond.a is THREAD and as_int(cond.b) == 0


def _untagged(st: State) -> State:
    """The accesses of ``st`` made outside the T.ws regions."""
    written, read = (frozenset(k for k in keys if not isinstance(k, tuple)) for keys in st)
    return written, read


def _conflict(st: State, w: set[int], r: set[int]) -> bool:
    written, read = (frozenset(k[1] if isinstance(k, tuple) else k for k in keys) for keys in st)  # see `region`
    return bool((r & written) or (w & (written | read)))


def sync_stage(func: PrimFunc, ctx: Any) -> PrimFunc:
    lc = ctx.data.get("cuda.lower")
    body, _ = _Sync(frozenset(getattr(lc, "warp_private", ())), ctx.data.get(SETS)).stmt(func.body, EMPTY)
    return dataclasses.replace(func, body=body)


__all__ = ["sync_stage", "Block"]
