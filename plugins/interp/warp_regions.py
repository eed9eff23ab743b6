"""Compiling a kernel with ``T.ws`` regions, explicit mbarriers or named barriers for the
interpreter.

Each block runs as a ``team.Team`` of members, one per warpgroup (one member when the kernel has
barriers but no regions). Every member runs the whole body; ``WarpSpecialize`` runs its body on
the members it names. Statements that the threads of a region (or, outside regions, of the block)
execute together become meetings (``Team.meet``): tile ops, ``T.Parallel`` loops, allocations and
stores of shared or fragment memory, ``T.print``, ``T.sync_threads()``. What belongs to each
thread runs in every member on its own copy: control flow, ``var`` / ``local`` buffers, barrier
arrivals and waits. Each member arrives at a barrier with its warpgroup's threads.

A kernel with named barriers (``T.sync_threads(id, count)``) runs as a team of warps instead, each
member with the 32 lanes of its threads, so that a warp can wait at a barrier while others go on.
Outside control flow that differs between threads, what the block does together is a meeting as
above; a statement each thread makes for itself (a store at a per-thread index, a per-thread
atomic, a branch on the thread index) that writes shared or global memory runs in each member
and is followed by a meeting with nothing to run: the barrier of the block CUDA puts there. Inside
such control flow every statement is each thread's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.errors import TileLangError
from tilelang_x.core_ir.expr import WARP_SIZE
from tilelang_x.core_ir.stmt import (
    NAMED_BARRIER_IDS,
    Alloc,
    Assert,
    BarrierArrive,
    BarrierExpectTx,
    BarrierInit,
    BarrierWait,
    CpAsyncGroup,
    ExprStmt,
    FenceProxyAsync,
    For,
    If,
    Jump,
    Kernel,
    NamedBarrier,
    Seq,
    Stmt,
    Store,
    Sync,
    WarpSpecialize,
    While,
)
from tilelang_x.core_ir.tileops import AsyncCopy, Atomic, Copy, TileOp, TmaCopy
from tilelang_x.core_ir.uniformity import written_regions
from tilelang_x.core_ir.verify_ws import WARPGROUP, has_regions
from tilelang_x.core_ir.visit import walk

from .compile_expr import Fn
from .multicast import multicast_copy, peer_barriers
from .runtime import FRAME, MASK
from .team import MBarriers, PendingWrite, Team, run_team

if TYPE_CHECKING:
    from .compile import Compiler

__all__ = ["Regions"]

_PRIVATE = ("var", "local")
#: Statements every member runs for itself (control flow, per-thread work, barrier operations).
_OWN = (Seq, If, While, Jump, Assert, ExprStmt, WarpSpecialize, BarrierArrive, BarrierWait, NamedBarrier,
        FenceProxyAsync)


def _team(env: list) -> tuple[Team, int]:
    frame = env[FRAME]
    return frame.turns, frame.turn


def _shared_write(n: Any) -> bool:
    """Whether ``n`` writes global or shared memory (a store, a tile op, an atomic update)."""
    if isinstance(n, Store):
        return n.buffer.storage.scope in ("global", "shared")
    if isinstance(n, TileOp):
        return any(r.buffer.storage.scope in ("global", "shared") for r in written_regions(n))
    return isinstance(n, E.AtomicFetch)


def _private(s: Stmt) -> bool:
    """Whether ``s`` writes only per-thread (``var`` / ``local``) buffers."""
    written = []
    for n in walk(s):
        if isinstance(n, (Store, Alloc)):
            written.append(n.buffer)
        elif isinstance(n, TileOp):
            written += [r.buffer for r in written_regions(n)]
    return bool(written) and all(b.storage.scope in _PRIVATE for b in written)


class Regions:
    """The compile-time state of one kernel with regions or barriers (see the module docstring)."""

    def __init__(self, comp: Compiler, kernel: Kernel, bind: Callable[[list, int], None] | None = None) -> None:
        """``bind``: a kernel with named barriers, one member per warp; ``bind(env, i)`` gives member
        ``i`` its threads."""
        self.comp = comp
        self.bind = bind
        group = WARP_SIZE if bind is not None else WARPGROUP
        self.members = kernel.num_threads // group if bind is not None or has_regions(kernel.body) else 1
        self.threads = kernel.num_threads // self.members  # each member's threads
        self.everyone = tuple(range(self.members))
        self.region: tuple[int, ...] = self.everyone  # the members of the region being compiled

    # ---- the launch -----------------------------------------------------------------------------
    def run_block(self, env: list, block: tuple[int, ...], body: Fn) -> None:
        """Run one block (its variables already bound in ``env``) as a team."""
        frame = env[FRAME]
        bind = self.bind
        cluster, rank = frame.cluster, frame.rank

        def fork(team: Team, i: int) -> list[Any]:
            env = frame.fork(block, team, i).env
            if bind is not None:
                bind(env, i)
            return env

        def stuck(ready: Callable[[], bool], what: Callable[[], str], loc: Any) -> None:
            cluster.block_waits(rank, ready, what, loc)

        run_team(self.members, block, fork, body, "warp" if bind is not None else "warpgroup",
                 None if cluster is None else stuck)

    # ---- statements -----------------------------------------------------------------------------
    def stmt(self, s: Stmt) -> Fn | None:
        """The closure of a region or barrier statement, or ``None`` for another kind."""
        if isinstance(s, WarpSpecialize):
            return self._region(s)
        if isinstance(s, Alloc) and s.buffer.scope == "barrier":
            return lambda env: None
        if isinstance(s, BarrierInit):
            return self._init(s)
        if isinstance(s, BarrierArrive):
            return self._arrive(s)
        if isinstance(s, BarrierWait):
            return self._wait(s)
        if isinstance(s, BarrierExpectTx):
            return self._expect(s)
        if isinstance(s, TmaCopy) and not s.is_store:
            return self._tma_copy(s)
        if isinstance(s, FenceProxyAsync):
            return lambda env: None
        if isinstance(s, AsyncCopy):
            return self._async_copy(s)
        if isinstance(s, CpAsyncGroup):
            return self._group(s)
        if isinstance(s, NamedBarrier):
            return self._named(s)
        return None

    def wrap(self, s: Stmt, fn: Fn | None) -> Fn | None:
        """``fn``, the closure of ``s`` outside ``T.Parallel``, made a meeting of the region's
        members when they execute ``s`` together."""
        if isinstance(s, Sync) and (s.scope == "block" or fn is None and s.scope in ("cluster_wait", "cluster_sync")):
            fn = lambda env: None  # noqa: E731 - a meeting with nothing to run (a cluster of one block: the block's)
        if fn is None:
            return None
        if self.bind is not None:
            if self.comp.divergence:  # each thread's own, where the others may never come
                return fn
            if self._own_shared_write(s):
                return self._then_meet(s, fn)
            if isinstance(s, Alloc) and isinstance(s.init, E.AtomicFetch):  # the block's one update
                return self._meeting(s, fn, copy=True)
        if isinstance(s, _OWN) or isinstance(s, For) and s.kind != "parallel" or _private(s) \
                or isinstance(s, Alloc) and s.buffer.scope == "barrier":
            return fn
        return self._meeting(s, fn)

    def _meeting(self, s: Stmt, fn: Fn, copy: bool = False) -> Fn:
        """``fn`` run once by the last of the region's members to reach ``s``; ``copy``: the slots it
        binds are per-thread buffers, which each member gets a copy of."""
        members = self.region
        binds = self._binds(s)
        what = f"`{type(s).__name__}`" if not isinstance(s, TileOp) else f"T.{s.name}"
        loc = s.loc
        key = id(s)

        def meeting(env: list) -> None:
            team, i = _team(env)

            def run() -> None:
                fn(env)
                for j in members:
                    for k in binds:
                        team.envs[j][k] = env[k].copy() if copy and j != i else env[k]

            team.meet(i, key, members, run, loc, what)

        return meeting

    def _then_meet(self, s: Stmt, fn: Fn) -> Fn:
        """``fn`` run by each member, then a meeting of all with nothing to run."""
        members, loc, key = self.everyone, s.loc, id(s)
        what = f"the barrier after `{type(s).__name__}`"

        def own_then_meet(env: list) -> None:
            fn(env)
            team, i = _team(env)
            team.meet(i, key, members, lambda: None, loc, what)

        return own_then_meet

    def _own_shared_write(self, s: Stmt) -> bool:
        """Whether each thread makes ``s`` itself (a per-thread index or value, or a branch on the
        thread index) and it writes shared or global memory."""
        uni = self.comp.uni
        assert uni is not None
        if isinstance(s, (If, While)) or isinstance(s, For) and s.kind != "parallel":
            return uni.divergent(s) and any(_shared_write(n) for n in walk(s))
        if isinstance(s, Store):
            return _shared_write(s) and (uni.varying(s.value) or any(uni.varying(i) for i in s.indices))
        if isinstance(s, Atomic):
            return isinstance(s.value, E.Expr) and (uni.varying(s.value) or uni.varying_region(s.dst))
        return isinstance(s, Alloc) and isinstance(s.init, E.AtomicFetch) and uni.varying_buffer(s.buffer)

    def _binds(self, s: Stmt) -> list[int]:
        """The slots that running ``s`` binds, which every member must see."""
        if isinstance(s, (Alloc, BarrierInit)):
            comp = self.comp
            return [comp.buffer_slot(s.buffer)] + [comp.buffer_slot(v) for v in comp.views.get(s.buffer, ())]
        return []

    def _region(self, s: WarpSpecialize) -> Fn | None:
        outer, self.region = self.region, s.ids
        try:
            body = self.comp.stmt(s.body)
        finally:
            self.region = outer
        if body is None:
            return None
        ids = frozenset(s.ids)

        def region(env: list) -> None:
            if env[FRAME].turn in ids:
                body(env)

        return region

    def _init(self, s: BarrierInit) -> Fn:
        slot = self.comp.buffer_slot(s.buffer)
        counts = s.counts

        def init(env: list) -> None:
            env[slot] = MBarriers(counts)
            frame = env[FRAME]
            if frame.cluster is not None:  # for peers' arrivals and multicast loads
                frame.cluster.envs.setdefault(frame.rank, env)

        return init

    def _which(self, buffer: Any, index: E.Expr, loc: Any) -> Callable[[list], tuple[MBarriers, int]]:
        slot = self.comp.buffer_slot(buffer)
        findex = self.comp.expr(index, loc)
        name = buffer.name

        def which(env: list) -> tuple[MBarriers, int]:
            bars = env[slot]
            k = int(findex(env))
            if not isinstance(bars, MBarriers):
                raise TileLangError(f"barrier `{name}` is used before T.alloc_barrier", loc=loc)
            if not 0 <= k < len(bars.counts):
                raise TileLangError(f"barrier index {k} is out of range for `{name}`, which holds {len(bars.counts)}",
                                    loc=loc)
            return bars, k

        return which

    def _arrive(self, s: BarrierArrive) -> Fn:
        which = self._which(s.buffer, s.index, s.loc)
        threads, name, loc = self.threads, s.buffer.name, s.loc
        peer = None if s.cta is None else self._peer(s)

        def arrive(env: list) -> None:
            bars, k = which(env)
            _arrivals(bars if peer is None else peer(env, bars), k, threads, name, loc)

        return arrive

    def _peer(self, s: BarrierArrive) -> Callable[[list, MBarriers], MBarriers]:
        """The barriers ``T.barrier_arrive(bar, cta_id)`` arrives at: those of the block of rank
        ``cta_id`` in the caller's cluster, once that block has initialized them."""
        assert s.cta is not None
        fcta = self.comp.expr(s.cta, s.loc)
        slot = self.comp.buffer_slot(s.buffer)
        name, loc = s.buffer.name, s.loc

        def peer(env: list, own: MBarriers) -> MBarriers:
            frame = env[FRAME]
            c = int(fcta(env))
            if c == frame.rank:
                return own
            cluster = frame.cluster
            size = 1 if cluster is None else len(cluster.blocks)
            if c >= size:
                raise TileLangError(f"T.barrier_arrive(`{name}`, cta_id={c}): the cluster holds {size} block(s)",
                                    loc=loc, hint="name a rank of the caller's cluster (0 .. cluster size - 1)")
            return peer_barriers(cluster, c, slot, f"T.barrier_arrive(`{name}`, cta_id={c})", name, "arrival", loc)

        return peer

    def _expect(self, s: BarrierExpectTx) -> Fn:
        """Issued once by the threads running it (a meeting, ``wrap``): expected bytes, and with
        ``arrive`` one arrival."""
        which = self._which(s.buffer, s.index, s.loc)
        fbytes = self.comp.expr(s.nbytes, s.loc)
        arrive, name, loc, call = s.arrive, s.buffer.name, s.loc, s.call

        def expect(env: list) -> None:
            bars, k = which(env)
            n = fbytes(env)
            if isinstance(n, np.ndarray) or int(n) < 0:
                raise TileLangError(f"{call}: the byte count {n} is not one non-negative number", loc=loc)
            bars.expect(k, int(n))
            if arrive:
                _arrivals(bars, k, 1, name, loc)

        return expect

    def _tma_copy(self, s: TmaCopy) -> Fn | None:
        """Issued once (a meeting): the tile's bytes are expected, copied and landed at once, so
        they balance; with ``arrive`` the issue arrives once as well. A multicast copy: the
        leader's load lands in its peers as well (``multicast``)."""
        assert s.barrier is not None
        copy = self.comp._tileop(Copy(s.src, s.dst, s.annotations, s.loc))
        which = self._which(s.barrier, s.index, s.loc)
        fbytes = self.comp.expr(s.nbytes, s.loc)
        arrive, name, loc = s.arrive, s.barrier.name, s.loc
        shared = multicast_copy(s, copy, self.comp.buffer_slot(s.barrier)) if s.mask else None

        def tma_copy(env: list) -> None:
            bars, k = which(env)
            n = int(fbytes(env))
            bars.expect(k, n)
            if arrive:
                _arrivals(bars, k, 1, name, loc)
            if shared is not None and shared(env, bars, k, n):
                return
            copy(env)
            bars.complete(k, n)

        return tma_copy

    def _named(self, s: NamedBarrier) -> Fn:
        """A warp arrives at a named barrier (whole: all of its threads reach it, or none); at a
        ``T.sync_threads`` it then waits until the barrier completes."""
        fid = self.comp.expr(s.barrier_id, s.loc)
        count, arrive, loc, call = s.count, s.arrive, s.loc, s.call
        last = NAMED_BARRIER_IDS[-1]

        def named(env: list) -> None:
            mask = env[MASK]
            if mask is not None and not np.all(mask):
                raise TileLangError(f"{call}: only some threads of warp {env[FRAME].turn} reach it; a warp arrives at "
                                    "a named barrier as a whole", loc=loc,
                                    hint="branch on the warp (e.g. `if tx // 32 == 0:`), not on single threads, "
                                    "around named barriers")
            ids = np.unique(fid(env))
            if len(ids) != 1 or not 1 <= ids[0] <= last:
                raise TileLangError(f"{call}: barrier id {', '.join(str(i) for i in ids)} in warp {env[FRAME].turn}; "
                                    f"the threads of a warp name one barrier from 1 to {last}", loc=loc)
            bar = int(ids[0])
            team, i = _team(env)
            before = team.named.arrive(bar, count, call, loc)
            if not arrive:
                team.wait_until(i, lambda: team.named.completed(bar, before), loc, call)

        return named

    def _async_copy(self, s: AsyncCopy) -> Fn:
        """Issued by the region's threads together (a meeting): the source is read now, the
        values land at the first ``T.ptx_wait_group`` of a member that has waited for the group
        each member commits it in (``PendingWrite``); until then the tile keeps its old values."""
        src, dst, members, loc = s.src, s.dst, self.region, s.loc

        def async_copy(env: list) -> None:
            rt = env[FRAME]
            rt.loc = loc
            try:
                values = rt.read(src)
                starts, extents = rt.bounds(dst)
            finally:
                rt.loc = None
            arr = rt.array(dst.buffer)
            at = tuple(slice(a, a + n) for a, n in zip(starts, extents))
            vals = np.asarray(values).reshape(extents)

            def land() -> None:
                arr[at] = vals

            write = PendingWrite(land)
            team, _ = _team(env)
            for j in members:
                team.async_groups[j].append([write])

        return async_copy

    def _group(self, s: CpAsyncGroup) -> Fn:
        """Made by the region's threads together (a meeting, as CUDA's wait is followed by their
        barrier): a commit adds an empty group to each member (each ``T.async_copy`` commits its
        own); a wait lands all but each member's ``n`` newest groups."""
        n, commit, members = s.n, s.kind == "commit", self.region

        def group(env: list) -> None:
            team, _ = _team(env)
            for j in members:
                groups = team.async_groups[j]
                if commit:
                    groups.append([])
                    continue
                while len(groups) > n:
                    for write in groups.pop(0):
                        write()

        return group

    def _wait(self, s: BarrierWait) -> Fn:
        which = self._which(s.buffer, s.index, s.loc)
        fparity = self.comp.expr(s.parity, s.loc)
        loc = s.loc
        what = f"T.barrier_wait({s.buffer.name}[{s.index}], {s.parity})"

        def wait(env: list) -> None:
            bars, k = which(env)
            p = fparity(env)
            if int(p) not in (0, 1) or isinstance(p, np.ndarray):
                raise TileLangError(f"T.barrier_wait: parity {p} is neither 0 nor 1", loc=loc,
                                    hint="a phase parity is 0 or 1: write `k % 2` rather than `k`")
            if bars.completed(k, int(p)):
                return
            team, i = _team(env)
            team.wait_until(i, lambda: bars.completed(k, int(p)), loc,
                            lambda: f"{what} (its phase waits for {bars.pending(k)})")

        return wait


def _arrivals(bars: MBarriers, k: int, threads: int, name: str, loc: Any) -> None:
    extra = bars.arrive(k, threads)
    if extra:
        raise TileLangError(
            f"{extra} arrival(s) at barrier `{name}[{k}]`, whose phase has all its {bars.counts[k]} arrivals but "
            f"still waits for {bars.tx[k]} expected transaction bytes", loc=loc,
            hint="on a GPU these arrivals would corrupt the barrier: expect only the bytes the phase's copies "
            "deliver, and arrive arrive_count times per phase")
