"""The verifier's rules for warp-specialized regions (``T.ws``) and mbarriers.

A ``WarpSpecialize`` region runs on its warpgroups only (``WARPGROUP`` threads each), so:
- the kernel launches whole warpgroups and names only warpgroups it has;
- regions do not nest and stay out of ``T.Parallel`` bodies, as do barrier operations;
- a fragment is spread over the threads of the code that uses it, so a fragment used in a region
  belongs to that region's warpgroups: it is not used outside regions, nor in a region of other
  warpgroups (``var`` and ``local`` buffers are per thread, hence free to use anywhere);
- per-thread code (thread queries, warp operations) does not mix with regions or barriers, nor
  ``T.sync_grid()`` or the cluster barrier with regions;
- a barrier buffer is only named by barrier operations, never used as data (read, stored, copied).
"""

from __future__ import annotations

from .buffer import Buffer, Region
from .errors import VerificationError
from .expr import AtomicFetch, Load, ThreadIndex, WarpOp
from .source import SourceLoc
from .stmt import (
    CLUSTER_SCOPES,
    Alloc,
    BarrierArrive,
    BarrierExpectTx,
    BarrierWait,
    CpAsyncGroup,
    For,
    Kernel,
    NamedBarrier,
    PrimFunc,
    Stmt,
    Store,
    Sync,
    WarpSpecialize,
    ws_call,
)
from .tileops import AsyncCopy, TmaCopy
from .uniformity import Uniformity
from .visit import buffers_used, children, walk

__all__ = ["BARRIER_OPS", "WARPGROUP", "has_regions", "uses_barriers", "verify_ws"]

#: Threads per warpgroup: the unit ``T.ws`` ids count in.
WARPGROUP = 128
#: The statements that make a kernel manage its own barriers (and asynchronous copies).
BARRIER_OPS = (WarpSpecialize, BarrierArrive, BarrierWait, BarrierExpectTx, TmaCopy, AsyncCopy, CpAsyncGroup)


def has_regions(node: Stmt) -> bool:
    """Whether ``node`` holds a ``T.ws`` region."""
    return any(isinstance(n, WarpSpecialize) for n in walk(node))


def uses_barriers(node: Stmt) -> bool:
    """Whether ``node`` holds a ``T.ws`` region or an explicit barrier operation (a TMA store,
    which completes on bulk groups, is none)."""
    return any(isinstance(n, BARRIER_OPS) and not (isinstance(n, TmaCopy) and n.is_store) for n in walk(node))


def _first_per_thread(body: Stmt) -> SourceLoc | None:
    """The line of the first statement whose own operands query the thread or the warp."""
    for s in walk(body):
        if isinstance(s, Stmt) and any(isinstance(n, (ThreadIndex, WarpOp)) for c in children(s)
                                       if not isinstance(c, Stmt) for n in walk(c)):
            return s.loc
    return None


def verify_ws(func: PrimFunc) -> None:
    """Raise ``VerificationError`` where ``func`` breaks a rule of the module docstring."""
    for node in walk(func.body):
        if isinstance(node, (Load, Store, Region)) and node.buffer.scope == "barrier":
            _fail(func, f"barrier `{node.buffer.name}` is used as data", getattr(node, "loc", None),
                  "name a barrier only in T.barrier_arrive / T.barrier_wait")
        if isinstance(node, Kernel) and uses_barriers(node.body):
            _Checker(func, node).run()


def _fail(func: PrimFunc, message: str, loc: SourceLoc | None, hint: str) -> None:
    raise VerificationError(f"in kernel `{func.name}`: {message}", loc=loc or func.loc, hint=hint)


class _Checker:
    def __init__(self, func: PrimFunc, kernel: Kernel) -> None:
        self.func = func
        self.kernel = kernel
        self.owner: dict[int, tuple[tuple[int, ...] | None, SourceLoc | None]] = {}  # fragment -> first user

    def fail(self, message: str, loc: SourceLoc | None, hint: str) -> None:
        _fail(self.func, message, loc or self.kernel.loc, hint)

    def run(self) -> None:
        k = self.kernel
        fetch = next((n for n in walk(k.body) if isinstance(n, AtomicFetch)), None)
        if fetch is not None and has_regions(k.body):
            self.fail(f"T.atomic_{fetch.kind}(..., return_prev=True) in a kernel with T.ws regions is not supported",
                      fetch.loc, "update without return_prev=True, or read the element with T.atomic_load after a "
                      "barrier")
        named = next((n for n in walk(k.body) if isinstance(n, NamedBarrier)), None)
        if named is not None:
            self.fail(f"{named.call} in a kernel with T.ws regions or barriers: the backend synchronizes the regions "
                      "with named barriers of its own", named.loc,
                      "order the regions with T.alloc_barrier's mbarriers (T.barrier_arrive / T.barrier_wait)")
        if Uniformity(k.body).simt:
            self.fail("thread queries and warp operations are not supported in a kernel with T.ws regions or "
                      "barriers (an `if` on whole warpgroups of the thread index that holds tile ops or barrier "
                      "operations is a pair of regions; the thread index may appear only in its condition)",
                      _first_per_thread(k.body), "compute per-warpgroup work with tile ops inside T.ws regions")
        if has_regions(k.body) and k.num_threads % WARPGROUP:
            self.fail(f"T.ws needs whole warpgroups of {WARPGROUP} threads, but the block has {k.num_threads}", k.loc,
                      f"launch a multiple of {WARPGROUP} threads")
        self.walk(k.body, None, 0)

    def walk(self, s: Stmt, region: tuple[int, ...] | None, parallel: int) -> None:
        if isinstance(s, WarpSpecialize):
            self.region(s, region, parallel)
            return
        if isinstance(s, (BarrierArrive, BarrierWait, BarrierExpectTx, TmaCopy, AsyncCopy, CpAsyncGroup)) and parallel:
            self.fail("a barrier operation inside a T.Parallel loop", s.loc,
                      "a T.Parallel body runs once per element; arrive or wait before or after the loop")
        if isinstance(s, Sync) and s.scope == "grid" and has_regions(self.kernel.body):
            self.fail("T.sync_grid() in a kernel with T.ws regions is not supported", s.loc,
                      "split the kernel in two at the grid barrier")
        if isinstance(s, Sync) and s.scope in CLUSTER_SCOPES and has_regions(self.kernel.body):
            self.fail(f"{s.call} in a kernel with T.ws regions is not supported", s.loc,
                      "synchronize the cluster in a kernel without T.ws regions")
        if not any(isinstance(c, Stmt) for c in children(s)):
            self.uses(s, region)
        else:
            self.uses_of_own_operands(s, region)
        inner = parallel + (isinstance(s, For) and s.kind == "parallel")
        for c in children(s):
            if isinstance(c, Stmt):
                self.walk(c, region, inner)

    def region(self, s: WarpSpecialize, region: tuple[int, ...] | None, parallel: int) -> None:
        k = self.kernel
        if region is not None:
            self.fail(f"{s.call} is nested in the {ws_call(region)} region", s.loc,
                      "close the outer region first")
        if parallel:
            self.fail("a T.ws region inside a T.Parallel loop", s.loc, "open the region outside the loop")
        groups = k.num_threads // WARPGROUP
        bad = [g for g in s.ids if not 0 <= g < groups]
        if not s.ids or bad or len(set(s.ids)) != len(s.ids):
            self.fail(f"{s.call}: the block's {k.num_threads} threads make warpgroups 0..{groups - 1}", s.loc,
                      "name each warpgroup once, each below the number of warpgroups")
        self.walk(s.body, s.ids, parallel)

    def uses_of_own_operands(self, s: Stmt, region: tuple[int, ...] | None) -> None:
        """The buffers a compound statement (loop, if) names in its own expressions."""
        for c in children(s):
            if not isinstance(c, Stmt):
                for b in buffers_used(c):
                    self.use(b, region, s.loc)

    def uses(self, s: Stmt, region: tuple[int, ...] | None) -> None:
        if isinstance(s, Alloc):
            return
        for b in buffers_used(s):
            self.use(b, region, s.loc)

    def use(self, b: Buffer, region: tuple[int, ...] | None, loc: SourceLoc | None) -> None:
        if b.storage.scope != "fragment":
            return
        first = self.owner.setdefault(id(b.storage), (region, loc))
        if first[0] == region:
            return
        here, there = (_place(r) for r in (region, first[0]))
        self.fail(f"fragment `{b.storage.name}` is used {here}, but also {there} (line {first[1]})", loc,
                  "a fragment is spread over the threads of the warpgroups that use it: use each fragment in "
                  "regions of one set of warpgroups only (copy it through shared memory to hand it over)")


def _place(region: tuple[int, ...] | None) -> str:
    return "outside the T.ws regions" if region is None else f"in {ws_call(region)}"
