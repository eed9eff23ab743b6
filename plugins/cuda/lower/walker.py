"""Walks a kernel body, replacing tile ops, parallel nests and fragment accesses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.allreduce import ThreadAllreduce
from ....core_ir.buffer import Buffer, Region
from ....core_ir.errors import LayoutError
from ....core_ir.registers import SET_MAX_NREG
from ....core_ir.stmt import (
    CLUSTER_SCOPES,
    Alloc,
    Annotate,
    Assert,
    BarrierExpectTx,
    BulkGroup,
    CpAsyncGroup,
    ExprStmt,
    FenceProxyAsync,
    For,
    If,
    Kernel,
    NamedBarrier,
    Print,
    Seq,
    Stmt,
    Store,
    Sync,
    While,
)
from ....core_ir.tileops import AsyncCopy, Atomic, TileOp, TmaCopy
from ....core_ir.uniformity import Uniformity, written_regions
from ....core_ir.visit import rewrite, walk
from ..analysis import bounds
from ..cluster_sync import lower_cluster_sync
from ..grid_sync import lower_sync
from ..launch_bounds import MIN_BLOCKS
from ..layout import spread_over_threads
from ..lir import AtomicStore, Barrier, Block, DeviceAssert, DevicePrint, Evaluate, Intrin, PtrTo, by_thread_0
from ..named_barriers import named_barrier
from ..nests import element_atomic
from ..registers import lower_set_max_nreg
from ..warp_specialize import leader_only, lower_ws
from .allreduce import lower_allreduce
from .atomic import tile_atomic, tile_red
from .atomic_load import Fetched, fetch_store, uniform_atomic_loads
from .parallel import lower_nest
from .tma_copy import (
    arrive_after,
    async_copy_parts,
    fence,
    lower_bulk_group,
    lower_expect,
    lower_group,
    lower_tma_copy,
    plain_copy,
)
from .transposed_epilogue import lower_transposed_store, transposed_plan
from .vector_loop import vector_unit

# Calls on a whole fragment, named by a pointer to it (hopper/rotate.py, hopper/stream_k.py): they
# get the pointer to the thread's registers and their count, then their other arguments.
# ``tlx_sched_pin`` only pins fragments of at most PIN_REGS registers per thread (per-row
# statistics, which depend on every element of their rows).
FRAGMENT_CALLS = ("tlx_fence_regs", "tlx_sched_pin", "tlx_sk_store", "tlx_sk_add")
PIN_REGS = 8


def lower_body(s: Stmt, lc: Any, dispatch: Callable[[Stmt], Stmt | None]) -> Stmt:
    return _Walker(lc, dispatch).stmt(s)


class _Walker:
    def __init__(self, lc: Any, dispatch: Callable[[Stmt], Stmt | None]) -> None:
        self.lc = lc
        self.dispatch = dispatch
        self.uni: Uniformity | None = None  # of the kernel, when it uses thread queries or warp ops
        self.div = 0  # divergent `if` / loops around the statement being lowered
        self.region: tuple[int, ...] | None = None  # the T.ws region being lowered (warp_specialize.py)
        self.block: tuple[int, ...] = ()  # the kernel's threads= (x, y, z)

    def per_thread_load(self, ld: Fetched) -> bool:
        """Whether each thread makes atomic load ``ld`` itself (see ``uniform_atomic_loads``)."""
        return self.uni is not None and (self.div > 0 or self.uni.varying(ld))

    def stmt(self, s: Stmt) -> Stmt:
        lc = self.lc
        if isinstance(s, Seq):
            return Seq(tuple(self.stmt(c) for c in s.stmts), s.loc)
        if isinstance(s, (TmaCopy, BarrierExpectTx, FenceProxyAsync, AsyncCopy, CpAsyncGroup, BulkGroup)):
            return self.user_async(s)
        if lc.manual:
            out = lower_ws(s, lc, self.lower_region)
            if out is not None:
                return out
            if self.shared_by_warpgroups() and (isinstance(s, Print) or _block_write(s)):
                return Seq((leader_only(self.lower(s), s.loc, self.first_warpgroup()), Barrier(s.loc)), s.loc)
        return self.lower(s)

    def user_async(self, s: TmaCopy | BarrierExpectTx | FenceProxyAsync | AsyncCopy | CpAsyncGroup | BulkGroup) -> Stmt:
        """The kernel's own asynchronous copies, transaction counts and proxy fences
        (lower/tma_copy.py): what the threads running them issue once, the first warpgroup's
        thread 0 issues."""
        lc, g = self.lc, self.first_warpgroup()
        if isinstance(s, FenceProxyAsync):
            return fence(s)
        if isinstance(s, CpAsyncGroup):
            return lower_group(s, self.div > 0)
        if isinstance(s, BulkGroup):
            return lower_bulk_group(s, lc, g, self.div > 0)
        if isinstance(s, AsyncCopy):
            before, copy, after = async_copy_parts(s, self.div > 0)
            return Seq((before, self.stmt(copy), after), s.loc)
        if isinstance(s, BarrierExpectTx):
            return lower_expect(s, lc, g)
        if lc.user_tma:
            return lower_tma_copy(s, lc, g)
        return Seq((self.stmt(plain_copy(s)), *arrive_after(s, lc, g)), s.loc)

    def lower_region(self, ids: tuple[int, ...], body: Stmt) -> Stmt:
        self.region = ids
        try:
            return self.stmt(body)
        finally:
            self.region = None

    def shared_by_warpgroups(self) -> bool:
        """Whether the statement being lowered in a manual kernel is one several warpgroups execute
        together (outside the regions, or in a region of several): their first runs it for all, and
        a barrier of all of them follows (the interpreter's meeting: none goes on before it is done)."""
        if self.lc.manual < 2:  # one warpgroup: it is the block
            return False
        return self.region is None or len(self.region) > 1

    def first_warpgroup(self) -> int:
        return 0 if self.region is None else self.region[0]

    def lower(self, s: Stmt) -> Stmt:
        lc = self.lc
        if not isinstance(s, Kernel) and not (isinstance(s, For) and s.kind == "parallel"):
            uniform = uniform_atomic_loads(s, lc, self.stmt, self.fix, self.per_thread_load)
            if uniform is not None:
                return uniform
        if isinstance(s, Kernel):
            uni = Uniformity(s.body)
            self.uni = uni if uni.simt else None
            self.block = s.threads
            body = self.stmt(s.body)
            allocs = tuple(Alloc(b) for b in lc.workspaces)
            return Kernel(s.grid, s.block_vars, s.threads, Seq(allocs + (body,)), s.annotations, s.loc)
        if isinstance(s, Alloc) and isinstance(s.init, E.AtomicFetch):  # each thread's own update
            own = Seq((Alloc(s.buffer, None, s.loc), Block(fetch_store(self.fix(s.init), s.buffer), "atomic", s.loc)))
            return own if self.div else Seq((own, Barrier(s.loc)), s.loc)
        if isinstance(s, Alloc):
            if s.buffer.scope == "fragment":
                return Alloc(lc.local_of(s.buffer), None, s.loc)
            return s
        if isinstance(s, For):
            if s.kind == "parallel":
                tile = tile_atomic(s) if lc.vector_red else None
                vector = tile_red(tile, lc) if tile is not None else None
                if vector is not None:
                    return vector
                transposed = transposed_plan(s, lc)
                if transposed is not None:
                    return lower_transposed_store(transposed, s.loc, lc)
                entry = lc.loops.get(id(s))
                return lower_nest(device_prints(s), entry[0] if entry else None, lc)
            ext = E.as_int(s.extent)
            st = E.as_int(s.start) if s.start is not None else 0
            if ext is not None and st is not None:
                lc.ranges[s.var] = (st, st + max(ext, 1) - 1)
            if not self.div and vector_unit(s, self.uni):
                return self.vector_loop(s)
            return self.divergent(s, lambda: self.loop(s))
        if isinstance(s, If):
            return self.divergent(s, lambda: self.branch(s))
        if isinstance(s, While):
            return self.divergent(s, lambda: While(self.fix(s.cond), self.stmt(s.body), s.loc))
        if isinstance(s, Atomic) and isinstance(s.value, E.Expr) and self.per_thread(s):
            atomic = Block(element_atomic(s, s.dst.starts, self.fix(s.value)), s.name, s.loc)
            return atomic if self.div else Seq((atomic, Barrier(s.loc)), s.loc)
        if isinstance(s, TileOp):
            out = self.dispatch(s)
            if out is None:
                raise LayoutError(f"the CUDA backend cannot lower T.{s.name} here", loc=s.loc)
            return out if isinstance(out, Block) else Block(out, s.name, s.loc)
        if isinstance(s, ThreadAllreduce):
            return lower_allreduce(self.fix(s), lc, self.block)
        if isinstance(s, Annotate) and s.kind == SET_MAX_NREG:
            return lower_set_max_nreg(s, lc.setmaxnreg)
        if isinstance(s, Annotate):
            return s if s.kind in ("swizzle", "non_restrict", MIN_BLOCKS) else Seq(())
        if isinstance(s, Store):
            out = self.fix(s)
            if s.buffer.scope in ("global", "shared") and self.per_thread(s):
                # every thread makes its own store; outside divergent code the barrier lets the block see
                # it (inside, the barrier follows the divergent statement: see `divergent`)
                return out if self.div else Seq((out, Barrier(s.loc)), s.loc)
            if s.buffer.scope in ("global", "shared"):
                # a statement of the whole block: one thread stores, and the barrier lets the block
                # see it (every thread storing would race with a read-modify-write such as
                # `S[0] = S[0] + 1`, or with another thread's later read)
                one = by_thread_0(out, s.loc)
                if lc.manual and self.shared_by_warpgroups():
                    one = leader_only(one, s.loc, self.first_warpgroup())
                return Seq((one, Barrier(s.loc)), s.loc)
            return out
        if isinstance(s, AtomicStore):
            return by_thread_0(self.fix(s), s.loc)
        if isinstance(s, Print):
            return self.print_tile(s) if isinstance(s.value, (Buffer, Region)) else self.fix(device_print(s))
        if isinstance(s, Assert):
            return self.fix(device_assert(s))
        if isinstance(s, ExprStmt):
            return self.fix(Evaluate(s.value, s.loc))
        if isinstance(s, NamedBarrier):
            return self.fix(named_barrier(s))
        if isinstance(s, Sync):
            if s.scope == "block":
                return Barrier(s.loc)
            if s.scope in CLUSTER_SCOPES:
                return lower_cluster_sync(s)
            return Evaluate(Intrin("__syncwarp", ()), s.loc) if s.scope == "warp" else lower_sync(s)
        if isinstance(s, Evaluate) and isinstance(s.value, Intrin) and s.value.fn in FRAGMENT_CALLS \
                and s.value.args and isinstance(s.value.args[0], PtrTo):
            return self.fragment_call(s.value.fn, s.value.args[0], s.value.args[1:], s)
        return self.fix(s)

    def branch(self, s: If) -> Stmt:
        lc = self.lc
        saved = dict(lc.ranges)
        lc.ranges.update(implied_ranges(s.cond, lc.ranges))  # e.g. a pipeline's `k + 2 < n`
        then = self.stmt(s.then)
        lc.ranges.clear()
        lc.ranges.update(saved)
        return If(self.fix(s.cond), then, None if s.otherwise is None else self.stmt(s.otherwise), s.loc)

    def divergent(self, s: Stmt, lower: Callable[[], Stmt]) -> Stmt:
        """Lower ``s``, counting it as divergent when the threads may take different paths through
        it. A divergent statement is a ``Block``, which barrier insertion (sync.py) never puts a
        barrier into (not every thread would reach it); the outermost one that stores to global or
        shared memory is followed by a barrier of the block."""
        if self.uni is None or not self.uni.divergent(s):
            return lower()
        self.div += 1
        try:
            out: Stmt = Block(lower(), "divergent", s.loc)
        finally:
            self.div -= 1
        if self.div or not any(isinstance(n, (Store, TileOp, E.AtomicFetch)) and _shared_write(n) for n in walk(s)):
            return out
        return Seq((out, Barrier(s.loc)), s.loc)

    def vector_loop(self, s: For) -> Stmt:
        """A ``T.vectorized`` loop of per-thread stores (vector_loop.py): its stores lowered as a
        divergent statement's, without barriers, and one barrier of the block after it."""
        self.div += 1
        try:
            out = Block(self.loop(s), "vectorized", s.loc)
        finally:
            self.div -= 1
        return Seq((out, Barrier(s.loc)), s.loc)

    def per_thread(self, s: Store | Atomic) -> bool:
        """Whether every thread makes this store / element atomic itself: its index or value is
        per-thread, or it runs under divergent control flow."""
        uni = self.uni
        if uni is None:
            return False
        if self.div:
            return True
        if isinstance(s, Store):
            return uni.varying(s.value) or any(uni.varying(i) for i in s.indices)
        return uni.varying(s.value) or uni.varying_region(s.dst)

    def fragment_call(self, fn: str, ptr: PtrTo, rest: tuple[Any, ...], s: Evaluate) -> Stmt:
        assert ptr.buffer.scope == "fragment", s
        regs = self.lc.local_of(ptr.buffer)
        count = regs.shape[0].value
        if fn == "tlx_sched_pin" and count > PIN_REGS:
            return Seq(())
        return Evaluate(Intrin(fn, (PtrTo(regs, (E.const(0),), ptr.mode), E.const(count), *rest)), s.loc)

    def print_tile(self, s: Print) -> Stmt:
        """``T.print`` of a buffer or region: loops printing one element per line (codegen lets
        one thread of block 0 print each ``Print`` of an element)."""
        region = s.value if isinstance(s.value, Region) else Region.full(s.value)
        buf = region.buffer
        if buf.scope == "fragment":
            lay = self.lc.frag(buf)
            if spread_over_threads(lay):
                raise LayoutError(
                    f"T.print of fragment `{buf.name}`: it is spread over the threads ({lay.describe()}), so no "
                    "thread can print it whole on CUDA", loc=s.loc,
                    hint=f"T.copy `{buf.name}` into a T.alloc_shared tile and print that, or print elements "
                    "inside a T.Parallel loop")
        vars_ = [E.Var(self.lc.fresh("p")) for _ in region.extents]
        idx = tuple(v if E.as_int(st) == 0 else st + v for st, v in zip(region.starts, vars_))
        label = f"{printf_escape(buf.name)}[{', '.join(_int_format(i) for i in idx)}]"
        casts = tuple(E.cast(i, dtypes.int64) if i.dtype.bits == 64 else i for i in idx)
        body: Stmt = self.fix(DevicePrint(E.Load(buf, idx, s.loc), print_prefix(s) + label + " = ", casts, s.loc))
        for v, ext in reversed(list(zip(vars_, region.extents))):
            body = For(v, ext, "serial", body, None, (), s.loc)
        return Block(body, "print", s.loc)

    def loop(self, s: For) -> Stmt:
        """A serial/unrolled loop: hoisted gemm fragments before it (lower/hoist.py), the
        double-buffered gemm pipeline when the pipeline stage marked it (lower/mainloop.py)."""
        lc = self.lc
        pre: list[Stmt] = []
        if lc.hoist_fragments:
            from .hoist import hoist_fragments

            pre = hoist_fragments(s, lc)
        if lc.prefetch_fragments and s.ann().get("tlx.prefetch_fragments"):
            from .mainloop import lower_mainloop

            out = lower_mainloop(s, lc, self.stmt)
            if out is not None:
                return Seq((*pre, out)) if pre else out
        body = self.stmt(s.body)
        out = For(s.var, s.extent, s.kind, body, s.start, s.annotations, s.loc)
        return Seq((*pre, out)) if pre else out

    def fix(self, node: Any) -> Any:
        """Fragment accesses outside parallel loops: allowed when every thread holds the whole
        fragment (no thread digits), at a computed register slot."""
        lc = self.lc

        def fn(n: Any) -> Any:
            buf = getattr(n, "buffer", None)
            if buf is None or getattr(buf, "scope", None) != "fragment" or not isinstance(n, (E.Load, Store)):
                return None
            slot = whole_slot(lc, buf, n.indices, getattr(n, "loc", None))
            if isinstance(n, E.Load):
                return E.Load(lc.local_of(buf), (slot,), n.loc)
            return Store(lc.local_of(buf), (slot,), n.value, n.loc)

        return rewrite(node, fn)


def printf_escape(text: str) -> str:
    """``text`` inside a C string literal used as a printf format."""
    out = text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return "".join(ch if 32 <= ord(ch) < 127 else f"\\x{ord(ch):02x}\"\"" for ch in out)


def _int_format(e: E.Expr) -> str:
    return "%lld" if e.dtype.bits == 64 else "%d"


def print_prefix(s: Print) -> str:
    """What the interpreter prints before a value: ``file:line: msg: `` (escaped for printf)."""
    where = f"{s.loc}: " if s.loc is not None else ""
    return printf_escape(where + (f"{s.msg}: " if s.msg else ""))


def device_print(s: Print) -> DevicePrint:
    """A scalar ``T.print`` (``file:line: msg: <expression> = <value>``)."""
    if not isinstance(s.value, E.Expr):
        raise LayoutError(f"T.print of {type(s.value).__name__} is not supported on CUDA", loc=s.loc)
    return DevicePrint(s.value, print_prefix(s) + printf_escape(repr(s.value)) + " = ", (), s.loc)


def device_assert(s: Assert) -> DeviceAssert:
    where = f"{s.loc}: " if s.loc is not None else ""
    return DeviceAssert(s.cond, printf_escape(f"{where}T.device_assert failed" + (f": {s.msg}" if s.msg else "")),
                        s.loc)


def device_prints(nest: For) -> For:
    """The ``T.print`` and ``T.device_assert`` statements of a parallel loop body as ``DevicePrint``s
    and ``DeviceAssert``s (every iteration prints, and checks)."""
    def fn(n: Any) -> Any:
        if isinstance(n, Assert):
            return device_assert(n)
        if not isinstance(n, Print):
            return None
        if isinstance(n.value, (Buffer, Region)):
            raise LayoutError("T.print of a whole buffer or region inside a T.Parallel loop is not supported on "
                              "CUDA", loc=n.loc, hint="print it outside the loop, or print elements: T.print(A[i, j])")
        return device_print(n)

    return rewrite(nest, fn)


def implied_ranges(cond: E.Expr, ranges: dict[E.Var, tuple[int, int]]) -> dict[E.Var, tuple[int, int]]:
    """Tighter ranges of loop variables inside ``if (cond)``: from ``v + c < b`` (and ``<=``,
    conjunctions) with ``b`` bounded above."""
    out: dict[E.Var, tuple[int, int]] = {}
    if not isinstance(cond, E.BinOp):
        return out
    if cond.op == "and":
        out.update(implied_ranges(cond.a, ranges))
        out.update(implied_ranges(cond.b, {**ranges, **out}))
        return out
    if cond.op not in ("<", "<="):
        return out
    lhs, c = cond.a, 0
    if isinstance(lhs, E.BinOp) and lhs.op in ("+", "-") and E.as_int(lhs.b) is not None:
        c = E.as_int(lhs.b) if lhs.op == "+" else -E.as_int(lhs.b)  # type: ignore[operator]
        lhs = lhs.a
    if not isinstance(lhs, E.Var) or lhs not in ranges:
        return out
    rb = bounds(cond.b, ranges)
    if rb is None:
        return out
    hi = rb[1] - c - (1 if cond.op == "<" else 0)
    lo, old_hi = ranges[lhs]
    if hi < old_hi:
        out[lhs] = (lo, max(hi, lo))
    return out


def whole_slot(lc: Any, buf: Any, indices: tuple[E.Expr, ...], loc: Any) -> E.Expr:
    lay = lc.frag(buf)
    if spread_over_threads(lay):
        where = f"`{buf.name}[{', '.join(str(i) for i in indices)}]`"
        raise LayoutError(
            f"fragment `{buf.name}` is spread over threads ({lay.describe()}), but {where} is outside a "
            f"T.Parallel loop or does not index it by the loop's variables", loc=loc,
            hint="access a fragment inside `for i, j in T.Parallel(...)` as frag[i, j]; for other indexing "
            "(e.g. two values per element, frag[i, j // 2]) read a T.alloc_shared or T.alloc_local copy")
    slot: E.Expr = E.const(0)
    for dim, i in zip(lay.dims, indices):
        place = 1
        for d in dim:
            place *= d.extent
        for d in dim:
            place //= d.extent
            x = i // place if place != 1 else i
            term = x % d.extent if d.extent != 1 else E.const(0)
            slot = slot + term * d.stride
    return slot


def _shared_write(n: Stmt | E.AtomicFetch) -> bool:
    """Whether ``n`` (a store, tile op or atomic update) writes global or shared memory."""
    if isinstance(n, E.AtomicFetch):
        return True
    if isinstance(n, Store):
        return n.buffer.scope in ("global", "shared")
    return any(r.buffer.scope in ("global", "shared") for r in written_regions(n))  # type: ignore[arg-type]


def _block_write(s: Stmt) -> bool:
    """Whether ``s``, a tile op or ``T.Parallel`` loop, writes memory beyond the thread's own
    (what warpgroup 0 does for the block in a kernel with T.ws regions)."""
    if not isinstance(s, TileOp) and not (isinstance(s, For) and s.kind == "parallel"):
        return False
    return any(isinstance(n, Store) and n.buffer.scope in ("global", "shared", "fragment")
               or isinstance(n, TileOp) and any(r.buffer.scope in ("global", "shared", "fragment")
                                                for r in written_regions(n)) for n in walk(s))
