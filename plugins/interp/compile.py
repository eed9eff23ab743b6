"""Compiling a ``PrimFunc`` into a tree of Python closures the interpreter runs.

Each expression becomes ``fn(env) -> value`` and each statement ``fn(env) -> None`` over one flat
environment list (see ``runtime``). Values are numpy scalars of the IR dtype's storage type, so
numpy's own arithmetic gives the IR's semantics (float16 computed in float16, int32 wrapping
like C), plus the few rules numpy lacks (rounding to bfloat16/float8 after every operation,
truncating integer ``/``, division-by-zero errors).

``T.Parallel`` nests are vectorized: a parallel loop binds its variable to a numpy index grid
(``np.arange`` shaped to broadcast against the other loops of the nest), so its body runs once for
all iterations. Loads become gathers, stores scatters, and an ``If`` whose condition differs per
lane narrows the active-lane mask (``env[0]``) that loads, stores and nested loops honour.
Sequential loops inside a parallel body still run in Python, once per iteration, for all lanes.

Statements are compiled here, expressions in ``compile_expr``; ``lanes`` holds the gathers,
scatters and per-lane bounds checks under the active-lane mask.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.allreduce import ThreadAllreduce, accumulator_dtype
from tilelang_x.core_ir.buffer import Buffer, Region
from tilelang_x.core_ir.cluster import cluster_shape, cluster_size, couples_blocks, rank_in_cluster
from tilelang_x.core_ir.errors import BackendNotImplementedError, DeviceAssertError, SpinWaitError, TileLangError
from tilelang_x.core_ir.expr import WARP_SIZE
from tilelang_x.core_ir.source import SourceLoc
from tilelang_x.core_ir.stmt import (
    CLUSTER_SCOPES,
    CUDA_SOURCE,
    Alloc,
    Annotate,
    Assert,
    BulkGroup,
    ExprStmt,
    FenceProxyAsync,
    For,
    If,
    Jump,
    Kernel,
    NamedBarrier,
    PrimFunc,
    Print,
    Seq,
    Stmt,
    Store,
    Sync,
    While,
)
from tilelang_x.core_ir.tileops import Atomic, Copy, CumSum, Fill, Gemm, GemmSp, Reduce, TileOp
from tilelang_x.core_ir.uniformity import Uniformity, written_regions
from tilelang_x.core_ir.verify_ws import uses_barriers
from tilelang_x.core_ir.visit import buffers_used, views_of, walk

from . import numerics
from .allreduce import allreduce_fn
from .cluster_run import cluster_barrier, cluster_kernel
from .compile_expr import ExprCompiler, Fn
from .grid_sync import Turns, run_blocks
from .lanes import lane_varying_loop, out_of_bounds, vec_store
from .lower import Executor, LowerContext
from .races import RACE_CHECK_KEY
from .runtime import FRAME, MASK, UNBOUND, Program, is_vec
from .views import view_binder
from .warp_regions import Regions


class Par(NamedTuple):
    """Where a statement sits in a vectorized ``T.Parallel`` nest."""

    depth: int  # how many parallel loops enclose it
    ndim: int  # how many axes the nest's index grids have
    loop_slots: tuple[int, ...]  # the env slots of the enclosing parallel loop variables


LowerOp = Callable[[TileOp], Executor | None]


class _Break(Exception):
    """A ``break`` on its way to the loop it leaves."""


class _Continue(Exception):
    """A ``continue`` on its way to the loop whose iteration it ends."""


def _iteration(body: Fn) -> Callable[[list], bool]:
    """One iteration of a loop whose body holds a ``break`` / ``continue``: False where it breaks
    (a plain body returns None, so loops stop on ``is False``)."""

    def iteration(env: list) -> bool:
        try:
            body(env)
        except _Continue:
            pass
        except _Break:
            return False
        return True

    return iteration


def _has_jump(s: Stmt) -> bool:
    return any(isinstance(n, Jump) for n in walk(s))


# ---- the compiler ------------------------------------------------------------------------------

class Compiler(ExprCompiler):
    """Turns a kernel body into closures: statements here, expressions in ``ExprCompiler``."""

    def __init__(self, func: PrimFunc, lower_op: LowerOp) -> None:
        super().__init__(func)
        self.lower_op = lower_op
        self.views = views_of(func.body)
        self.uni: Uniformity | None = None  # of a kernel that runs one lane per thread (see ``threads``)
        self.thread_par: Par | None = None  # the lanes of such a kernel, for its per-thread buffers
        self.divergence = 0  # divergent ``if`` / loops around the statement being compiled
        self.regions: Regions | None = None  # of a kernel with T.ws regions or barriers (``warp_regions``)
        self.block_threads: tuple[int, ...] = ()  # T.Kernel's threads= of a kernel that runs one lane per thread
        self.cluster_shape = (1, 1, 1)  # of the kernel being compiled
        self.cluster_size = 1  # blocks run side by side (couples_blocks; 1: each on its own)
        self.race_candidates = self.race_tracked()

    def written_params(self) -> set[int]:
        """Indices of the buffer parameters the kernel may write (through a view too)."""
        written: set[int] = set()
        for node in walk(self.func.body):
            if isinstance(node, (Store, E.AtomicFetch)):
                written.add(id(node.buffer.storage))
            elif isinstance(node, (Copy, Fill, Reduce, CumSum, Atomic)):
                written.add(id(node.dst.buffer.storage))
            elif isinstance(node, (Gemm, GemmSp)):
                written.add(id(node.C.buffer.storage))
            elif isinstance(node, TileOp):
                written.update(id(r.buffer.storage) for r in node.regions())
        return {i for i, p in enumerate(self.func.params) if id(p) in written}

    def race_tracked(self) -> set[int]:
        """Ids of the storage buffers of the global tensors the race check follows: those the kernel
        writes; none in a kernel that reads ``T.atomic_load``: its blocks may order themselves through
        flags, which the check does not model."""
        if any(isinstance(n, E.AtomicLoad) for n in walk(self.func.body)):
            return set()
        written = self.written_params()
        return {id(p.storage) for i, p in enumerate(self.func.params)
                if i in written and isinstance(p, Buffer) and p.scope == "global"}

    def param_views(self) -> list[Fn]:
        """Binders of the views of buffer parameters (run once the arguments are bound)."""
        binders = (view_binder(self, p, 0) for p in self.func.params if isinstance(p, Buffer))
        return [b for b in binders if b is not None]

    # ---- statements -----------------------------------------------------------------------------
    def stmt(self, s: Stmt, par: Par | None = None) -> Fn | None:
        """Compile statement ``s``; ``par`` describes the vectorized parallel nest around it."""
        regions = self.regions
        if regions is None or par is not None:
            return self._stmt(s, par)
        fn = regions.stmt(s)
        return regions.wrap(s, self._stmt(s, par) if fn is None else fn)

    def _stmt(self, s: Stmt, par: Par | None) -> Fn | None:
        if isinstance(s, Seq):
            fns = [f for f in (self.stmt(c, par) for c in s.stmts) if f is not None]
            if not fns:
                return None
            if len(fns) == 1:
                return fns[0]

            def seq(env: list) -> None:
                for f in fns:
                    f(env)

            return seq
        if isinstance(s, Sync) and s.scope == "grid":
            return self._sync_grid(s)
        if isinstance(s, Sync) and s.scope in CLUSTER_SCOPES and self.cluster_size > 1:
            return cluster_barrier(s)
        if isinstance(s, (Annotate, Sync, FenceProxyAsync, BulkGroup)):  # run in order, for the whole block at once
            return None
        if isinstance(s, For):
            return self._for(s, par)
        if isinstance(s, If):
            return self._if(s, par)
        if isinstance(s, While):
            return self._while(s, par)
        if isinstance(s, Store):
            return self._store(s)
        if isinstance(s, Alloc):
            return self._alloc(s, par)
        if isinstance(s, Kernel):
            return self._kernel(s)
        if isinstance(s, Print):
            return self._print(s)
        if isinstance(s, Assert):
            return self._assert(s, par)
        if isinstance(s, ExprStmt):
            return self._expr_stmt(s)
        if isinstance(s, Jump):
            return self._jump(s)
        if isinstance(s, TileOp):
            return self._tileop(s)
        if isinstance(s, ThreadAllreduce):
            return self._allreduce(s)
        raise BackendNotImplementedError(
            f"the interpreter cannot run statement {type(s).__name__}", loc=getattr(s, "loc", None)
        )

    def _for(self, s: For, par: Par | None) -> Fn | None:
        if s.kind == "parallel":
            return self._parallel(s, par)
        slot = self.var_slot(s.var)
        vt = numerics.storage_dtype(s.var.dtype).type
        fs = None if s.start is None else self.expr(s.start, s.loc)
        fe = self.expr(s.extent, s.loc)
        body = self.nested(s, s.body, par)
        if body is None:
            return None
        step = _iteration(body) if _has_jump(s.body) else body

        def serial(env: list) -> None:
            lo = 0 if fs is None else fs(env)
            n = fe(env)
            if is_vec(lo) or is_vec(n):  # inside T.Parallel, where no loop jumps (the verifier checks)
                return lane_varying_loop(env, slot, vt, lo, n, body)
            lo = int(lo)
            for k in range(lo, lo + int(n)):
                env[slot] = vt(k)
                if step(env) is False:  # a `break`
                    break

        return serial

    def _parallel(self, s: For, par: Par | None) -> Fn | None:
        depth, ndim, outer = (0, _parallel_depth(s), ()) if par is None else par
        slot = self.var_slot(s.var)
        vdt = numerics.storage_dtype(s.var.dtype)
        fs = None if s.start is None else self.expr(s.start, s.loc)
        fe = self.expr(s.extent, s.loc)
        body = self.stmt(s.body, Par(depth + 1, ndim, (*outer, slot)))
        if body is None:
            return None
        shape = [1] * ndim

        def parallel(env: list) -> None:
            lo = 0 if fs is None else fs(env)
            n = fe(env)
            frame = env[FRAME]
            old = env[MASK]
            if is_vec(lo) or is_vec(n):  # bounds that differ per lane of an outer loop: mask
                m_all = old if old is not None else np.True_
                lo_b, hi_b = np.broadcast_arrays(lo, lo + n, m_all)[:2]
                act = np.broadcast_to(m_all, lo_b.shape)
                if not act.any():
                    return
                a, b = int(lo_b[act].min()), int(hi_b[act].max())
                if b <= a:
                    return
                shape[depth] = b - a
                grid = np.arange(a, b, dtype=vdt).reshape(shape)
                m = (grid >= lo) & (grid < lo + n)
                env[MASK] = m if old is None else old & m
            else:
                lo, n = int(lo), int(n)
                if n <= 0:
                    return
                shape[depth] = n
                grid = np.arange(lo, lo + n, dtype=vdt).reshape(shape)
            env[slot] = grid
            frame.parallel_depth += 1
            frame.grids.append(grid)
            try:
                body(env)
            finally:
                frame.parallel_depth -= 1
                frame.grids.pop()
                env[MASK] = old

        return parallel

    def _if(self, s: If, par: Par | None) -> Fn | None:
        fc = self.expr(self.coerce(s.cond, dtypes.bool_), s.loc)
        then = self.nested(s, s.then, par)
        other = None if s.otherwise is None else self.nested(s, s.otherwise, par)
        if then is None and other is None:
            return None

        def branch(env: list) -> None:
            c = fc(env)
            if not is_vec(c):
                if c:
                    if then is not None:
                        then(env)
                elif other is not None:
                    other(env)
                return
            old = env[MASK]
            try:
                for lanes, fn in ((c, then), (None, other)):
                    if fn is None:
                        continue
                    if lanes is None:
                        lanes = ~c
                    m = lanes if old is None else old & lanes
                    if m.any():
                        env[MASK] = m
                        fn(env)
            finally:
                env[MASK] = old

        return branch

    def _while(self, s: While, par: Par | None) -> Fn:
        fc = self.expr(self.coerce(s.cond, dtypes.bool_), s.loc)
        body = self.nested(s, s.body, par)
        spin = self._spin_guard(s)
        step = _iteration(body) if body is not None and _has_jump(s.body) else body

        def loop(env: list) -> None:
            old = env[MASK]
            active = old
            seen: set[bytes] = set()
            try:
                while True:
                    c = fc(env)
                    if is_vec(c):
                        active = c if active is None else active & c
                        if not active.any():
                            break
                        env[MASK] = active
                    elif not c:
                        break
                    if spin is not None:
                        spin(env, seen)
                    if step is not None and step(env) is False:  # a `break`
                        break
            finally:
                env[MASK] = old

        return loop

    def nested(self, s: Stmt, body: Stmt, par: Par | None) -> Fn | None:
        """Compile the body of ``s``, counting ``s`` as divergent when its threads may part ways."""
        div = self.uni is not None and par is None and self.uni.divergent(s)
        self.divergence += div
        try:
            return self.stmt(body, par)
        finally:
            self.divergence -= div

    def _jump(self, s: Jump) -> Fn:
        signal = _Break if s.kind == "break" else _Continue

        def jump(env: list) -> None:
            raise signal

        return jump

    def _spin_guard(self, s: While) -> Callable[[list, set[bytes]], None] | None:
        """For a loop that reads ``T.atomic_load`` (a spin-wait): a check, before each iteration,
        that the state the loop can see (its variables, the buffers it uses but does not allocate,
        the lane mask) was not seen before. The interpreter is deterministic, so a repeated state
        repeats forever: raise ``SpinWaitError`` instead of hanging."""
        nodes = list(walk(s))
        if not any(isinstance(n, E.AtomicLoad) for n in nodes):
            return None
        local = {id(n.buffer) for n in nodes if isinstance(n, Alloc)}
        slots = sorted({self.buffer_slot(b) for b in buffers_used(s) if id(b) not in local}
                       | {self.var_slot(n) for n in nodes if isinstance(n, E.Var)} | {MASK})
        loc = s.loc

        def guard(env: list, seen: set[bytes]) -> None:
            h = hashlib.blake2b(digest_size=16)
            for k in slots:
                v = env[k]
                h.update(b"-" if v is UNBOUND or v is None else np.ascontiguousarray(v).tobytes())
            key = h.digest()
            if key in seen:
                raise SpinWaitError(
                    f"this while loop waits on T.atomic_load in block {env[FRAME].block}, but nothing it reads can "
                    "change any more: the interpreter runs the blocks one after another, so no other block runs "
                    "while it waits", loc=loc,
                    hint="wait only for what blocks launched before this one publish (a smaller linear block "
                    "index); waiting for a later block can deadlock a GPU too, which does not promise to run "
                    "all blocks at once")
            seen.add(key)

        return guard

    def _store(self, s: Store) -> Fn:
        buf = s.buffer
        bk = self.buffer_slot(buf)
        fidx = [self.expr(i, s.loc) for i in s.indices]
        fv = self.expr(self.coerce(s.value, buf.dtype), s.loc)
        where = s.loc
        name = buf.name
        if len(fidx) != buf.ndim:
            raise TileLangError(f"{len(fidx)} indices for {buf.ndim}-d buffer `{name}`", loc=where)
        lane_slot = self.private.get(id(buf))
        race = buf if id(buf.storage) in self.race_candidates else None
        if lane_slot is not None:
            def private_store(env: list) -> None:
                lanes = env[lane_slot]
                idx = lanes + tuple(f(env) for f in fidx)
                vec_store(env, env[bk], idx, fv(env), name, where, len(lanes))

            return private_store

        def store(env: list) -> None:
            arr = env[bk]
            idx = tuple(f(env) for f in fidx)
            v = fv(env)
            if arr is UNBOUND:
                raise TileLangError(f"buffer `{name}` is written before it is allocated", loc=where)
            if env[MASK] is not None or is_vec(v):
                return vec_store(env, arr, idx, v, name, where, race=race)
            for i, n in zip(idx, arr.shape):
                if is_vec(i):
                    return vec_store(env, arr, idx, v, name, where, race=race)
                if not 0 <= i < n:
                    out_of_bounds("write to", name, idx, arr.shape, where)
            if race is not None and env[FRAME].races is not None:
                frame = env[FRAME]
                frame.races.store(buf, arr, idx, v, frame.block_id, where)
            arr[idx] = v

        return store

    def _alloc(self, s: Alloc, par: Par | None) -> Fn:
        buf = s.buffer
        bk = self.buffer_slot(buf)
        fshape = [self.expr(d, s.loc) for d in buf.shape]
        sdt = numerics.storage_dtype(buf.dtype)
        finit = None if s.init is None else self.expr(self.coerce(s.init, buf.dtype), s.loc)
        if par is not None:
            return self._private_alloc(s, par, bk, fshape, sdt, finit)
        if self.thread_par is not None and self.uni is not None and self.uni.varying_buffer(buf):
            return self._private_alloc(s, self.thread_par, bk, fshape, sdt, finit)
        bind_views = view_binder(self, buf, 0)

        def alloc(env: list) -> None:
            arr = np.zeros(tuple(int(f(env)) for f in fshape), dtype=sdt)
            if finit is not None:
                arr[...] = finit(env)
            env[bk] = arr
            if bind_views is not None:
                bind_views(env)

        return alloc

    def _private_alloc(self, s: Alloc, par: Par, bk: int, fshape: list[Fn], sdt: np.dtype, finit: Fn | None) -> Fn:
        """A buffer allocated inside a ``T.Parallel`` body: one copy per lane of the enclosing
        parallel loops. Its storage has the lane axes first; ``env[lane_slot]`` holds the index
        grids that select each lane's copy."""
        lane_slot = len(self.objects)
        self.objects.append(("lanes", s.buffer))
        self.private[id(s.buffer)] = lane_slot
        depth, ndim, loop_slots = par
        ndim_buf = s.buffer.ndim
        for v in self.views.get(s.buffer, ()):
            self.private[id(v)] = lane_slot
        bind_views = view_binder(self, s.buffer, ndim)

        def alloc(env: list) -> None:
            lane_shape = [1] * ndim
            lanes: list[Any] = []
            for axis, slot in enumerate(loop_slots):
                n = env[slot].shape[axis]
                lane_shape[axis] = n
                shape = [1] * ndim
                shape[axis] = n
                lanes.append(np.arange(n).reshape(shape))
            lanes += [0] * (ndim - depth)
            arr = np.zeros(tuple(lane_shape) + tuple(int(f(env)) for f in fshape), dtype=sdt)
            env[bk] = arr
            env[lane_slot] = tuple(lanes)
            if bind_views is not None:
                bind_views(env)
            if finit is not None:
                vec_store(env, arr, tuple(lanes) + (0,) * ndim_buf, finit(env), s.buffer.name, s.loc, ndim)

        return alloc

    def _kernel(self, s: Kernel) -> Fn:
        if CUDA_SOURCE in s.ann():
            raise BackendNotImplementedError(
                "T.CUDASourceCodeKernel launches external CUDA code, which the interpreter cannot run", loc=s.loc,
                hint='compile it with target="cuda"')
        if "prelude" in s.ann():
            raise BackendNotImplementedError(
                "T.Kernel(prelude=...) is not supported by the interpreter (it is raw CUDA code)", loc=s.loc,
                hint='compile it with target="cuda", or drop prelude= and the T.call_extern calls that need it')
        fgrid = [self.expr(g, s.loc) for g in s.grid]
        slots = [self.var_slot(v) for v in s.block_vars]
        types = [numerics.storage_dtype(v.dtype).type for v in s.block_vars]
        uni = Uniformity(s.body)
        named = any(isinstance(n, NamedBarrier) for n in walk(s.body))
        if named:
            self._check_warp_team(s)
        self.cluster_shape = cluster_shape(s)
        self.cluster_size = cluster_size(s) if couples_blocks(s.body) else 1
        bind_threads = self._threads(s, uni, named) if uni.simt else None
        regions = self.regions = Regions(self, s, bind_threads if named else None) \
            if named or uses_barriers(s.body) else None
        try:
            body = self.stmt(s.body)
        finally:
            self.regions = None
        grid = any(isinstance(n, Sync) and n.scope == "grid" for n in walk(s.body))
        if body is not None and self.cluster_size > 1:
            if grid:
                raise BackendNotImplementedError(
                    "the interpreter does not run a kernel with both T.sync_grid() and cluster barriers", loc=s.loc,
                    hint="split the kernel at the grid barrier")
            return cluster_kernel(fgrid, slots, types, bind_threads, body, regions, self.cluster_shape, s.loc)
        if body is not None and grid:
            return self._grid_kernel(fgrid, slots, types, bind_threads, body, self.cluster_shape, s.loc)

        shape = self.cluster_shape

        def kernel(env: list) -> None:
            dims = [int(f(env)) for f in fgrid]
            frame = env[FRAME]
            if body is None:
                return
            if bind_threads is not None:
                bind_threads(env)
            if frame.races is not None:
                frame.races.launch(dims)
            for block_id, rev in enumerate(itertools.product(*[range(n) for n in reversed(dims)])):
                block = rev[::-1]
                for k, t, b in zip(slots, types, block):
                    env[k] = t(b)
                frame.block = block
                frame.block_id = block_id
                frame.rank = rank_in_cluster(block, shape)
                frame.first_block = not any(block)
                if regions is not None:
                    regions.run_block(env, block, body)
                else:
                    body(env)
            frame.first_block = True

        return kernel

    @staticmethod
    def _check_warp_team(s: Kernel) -> None:
        """A kernel with named barriers runs as a team of whole warps, one block at a time."""
        grid = any(isinstance(n, Sync) and n.scope == "grid" for n in walk(s.body))
        vote = next((n for n in walk(s.body) if isinstance(n, E.WarpOp) and n.op in E.BLOCK_VOTE_OPS), None)
        if vote is not None:
            raise BackendNotImplementedError(
                f"the interpreter does not run T.{vote.op} in a kernel with named barriers (it runs such a kernel "
                "as a team of warps)", loc=s.loc, hint="vote with T.any_sync / T.all_sync per warp, or drop the "
                "named barriers")
        if s.num_threads % WARP_SIZE or grid:
            what = "T.sync_grid()" if grid else f"{s.num_threads} threads, not whole warps"
            raise BackendNotImplementedError(
                f"the interpreter runs a kernel with named barriers as a team of whole warps; this one has {what}",
                loc=s.loc, hint="launch a multiple of 32 threads; split the kernel at the grid barrier")

    def _clusterrank(self, e: E.ClusterRank, loc: SourceLoc | None) -> Fn:
        out = numerics.storage_dtype(e.dtype).type
        return lambda env: out(env[FRAME].rank)

    def _grid_kernel(self, fgrid: list[Fn], slots: list[int], types: list[Any], bind_threads: Fn | None, body: Fn,
                     shape: tuple[int, int, int], loc: SourceLoc | None) -> Fn:
        """A kernel with ``T.sync_grid()``: its blocks run side by side (``grid_sync``)."""

        def kernel(env: list) -> None:
            dims = [int(f(env)) for f in fgrid]
            if bind_threads is not None:
                bind_threads(env)
            launch = env[FRAME]
            races = launch.races
            if races is not None:
                races.launch(dims)

            def start(block: tuple[int, ...], turns: Turns, i: int) -> Callable[[], None]:
                frame = launch.fork(block, turns, i, block_id=i)
                frame.rank = rank_in_cluster(block, shape)
                benv = frame.env
                for k, t, b in zip(slots, types, block):
                    benv[k] = t(b)
                return lambda: body(benv)

            run_blocks(dims, start, loc, None if races is None else races.barrier)

        return kernel

    def _sync_grid(self, s: Sync) -> Fn:
        loc = s.loc

        def sync_grid(env: list) -> None:
            frame = env[FRAME]
            frame.turns.arrive(frame.turn, loc)

        return sync_grid

    def _threads(self, s: Kernel, uni: Uniformity, warps: bool = False) -> Callable[[list, int], None]:
        """Set up a kernel that uses thread queries, warp operations or named barriers: its
        statements run with one lane per thread (the linear thread index), its per-thread buffers
        hold one copy per lane; with ``warps`` (named barriers) one lane per thread of one warp,
        each warp a member of the block's team (``warp_regions``). Returns the binder of the lanes'
        thread indices: ``bind(env, i)`` gives them warp ``i``'s threads (with ``warps``) or the
        block's."""
        self.uni = uni
        self.nthreads = lanes = WARP_SIZE if warps else s.num_threads
        self.block_threads = () if warps else s.threads
        slot = len(self.objects)
        self.objects.append(("threads", s))
        self.thread_par = Par(1, 1, (slot,))
        for d in range(len(s.threads)):
            self.thread_slots[d] = len(self.objects)
            self.objects.append(("thread", d))
        dims = [(self.thread_slots[d], math.prod(s.threads[:d]), extent) for d, extent in enumerate(s.threads)]

        def bind(env: list, i: int = 0) -> None:
            linear = np.arange(i * lanes, (i + 1) * lanes, dtype=np.int32)
            env[slot] = linear
            for k, stride, extent in dims:
                env[k] = linear // stride % extent

        return bind

    def _print(self, s: Print) -> Fn:
        value = s.value
        prefix = f"{s.loc}: " if s.loc is not None else ""
        msg = f"{s.msg}: " if s.msg else ""

        def show(env: list) -> None:
            frame = env[FRAME]
            if not frame.first_block:
                return
            if isinstance(value, Buffer):
                text = f"{value.name} =\n{np.array(frame.array(value))}"
            elif isinstance(value, Region):
                text = f"{value} =\n{np.array(frame.read(value, s.loc))}"
            elif isinstance(value, (E.Expr, int, float, bool)):
                text = f"{value} = {frame.eval(value)}"
            else:
                text = str(value)
            print(f"{prefix}{msg}{text}", flush=True)

        return show

    def _allreduce(self, s: ThreadAllreduce) -> Fn:
        """The group reductions of all lanes (``allreduce``), stored to each thread's ``out``."""
        if not self.block_threads or self.regions is not None:
            raise BackendNotImplementedError(
                "the interpreter runs T.tvm_thread_allreduce only in a kernel without T.ws regions, mbarriers or "
                "named barriers", loc=s.loc)
        result = E.Var("allreduce", accumulator_dtype(s.value.dtype))
        slot = self.var_slot(result)
        reduce = allreduce_fn(s, self.expr(s.value, s.loc), self.expr(self.coerce(s.cond, dtypes.bool_), s.loc),
                              self.expr(s.identity, s.loc), self.block_threads)
        store = self._store(Store(s.out, s.index, result, s.loc))

        def allreduce(env: list) -> None:
            env[slot] = reduce(env)
            store(env)

        return allreduce

    def _expr_stmt(self, s: ExprStmt) -> Fn:
        """``T.evaluate(value)``: ``value`` computed (its errors raised), the result dropped."""
        value = self.expr(s.value, s.loc)

        def evaluate(env: list) -> None:
            value(env)

        return evaluate

    def _assert(self, s: Assert, par: Par | None) -> Fn:
        """Raises ``DeviceAssertError`` with the block and, in a parallel nest, the loop variables of
        the first iteration whose condition is false."""
        fc = self.expr(self.coerce(s.cond, dtypes.bool_), s.loc)
        loops = [(slot, self.objects[slot].name) for slot in (par.loop_slots if par else ())]
        what = "T.device_assert failed" + (f": {s.msg}" if s.msg else "")

        def check(env: list) -> None:
            c = fc(env)
            where = ""
            if not is_vec(c):
                if c:
                    return
            else:
                bad = ~np.asarray(c, dtype=bool)
                if env[MASK] is not None:
                    bad = bad & env[MASK]
                if not bad.any():
                    return
                first = tuple(np.argwhere(bad)[0])
                values = [(name, np.broadcast_to(env[slot], bad.shape)[first]) for slot, name in loops]
                where = "".join(f", {name}={int(v)}" for name, v in values)
            block = ", ".join(str(b) for b in env[FRAME].block)
            raise DeviceAssertError(f"{what} (block ({block}){where})", loc=s.loc)

        return check

    def _tileop(self, s: TileOp) -> Fn:
        executor = self.lower_op(s)
        if executor is None:
            raise BackendNotImplementedError(
                f"no executor for tile op `{getattr(s, 'name', type(s).__name__)}` on the interpreter",
                loc=s.loc,
                hint="a plugin that defines this op must answer tlx_lower_op for target 'interp'",
            )
        loc = s.loc
        if self.uni is not None:
            executor = self._per_thread(s, executor)

        def tileop(env: list) -> None:
            frame = env[FRAME]
            frame.loc = loc
            try:
                executor(frame)
            except TileLangError as err:
                raise err.with_loc(loc) from None
            finally:
                frame.loc = None

        return tileop

    def _per_thread(self, s: TileOp, executor: Executor) -> Executor:
        """In a kernel with one lane per thread: an element atomic that differs between threads (or
        runs under divergent control flow) runs once per active lane, as inside ``T.Parallel``; a
        tile op writing per-thread buffers runs once per thread, on that thread's copies."""
        uni = self.uni
        assert uni is not None
        if isinstance(s, Atomic) and isinstance(s.value, E.Expr) and all(E.as_int(x) == 1 for x in s.dst.extents):
            if self.divergence or uni.varying(s.value) or uni.varying_region(s.dst):
                def lanes(frame: Any) -> None:
                    frame.parallel_depth += 1
                    try:
                        executor(frame)
                    finally:
                        frame.parallel_depth -= 1

                return lanes
            return executor
        slots = [self.buffer_slot(r.buffer) for r in written_regions(s) if uni.varying_buffer(r.buffer)]
        if not slots:
            return executor
        n = self.nthreads

        def per_thread(frame: Any) -> None:
            env = frame.env
            arrays = [env[k] for k in slots]
            try:
                for t in range(n):
                    for k, arr in zip(slots, arrays):
                        env[k] = arr[t]
                    executor(frame)
            finally:
                for k, arr in zip(slots, arrays):
                    env[k] = arr

        return per_thread


def _parallel_depth(s: Stmt) -> int:
    """How many parallel loops nest inside ``s`` (``s`` included), at most."""
    if isinstance(s, For):
        inner = _parallel_depth(s.body)
        return inner + 1 if s.kind == "parallel" else inner
    if isinstance(s, Seq):
        return max((_parallel_depth(c) for c in s.stmts), default=0)
    if isinstance(s, If):
        return max(_parallel_depth(s.then), 0 if s.otherwise is None else _parallel_depth(s.otherwise))
    if isinstance(s, While):
        return _parallel_depth(s.body)
    return 0


# ---- entry point -------------------------------------------------------------------------------

def build_program(func: PrimFunc, target: Any, lower_op: Callable[..., Any] | None = None,
                  options: dict[str, Any] | None = None) -> Program:
    """Compile ``func`` for the interpreter. ``lower_op(target=, op=, ctx=)`` answers the
    executor of each tile op (the plugin hook relay's ``tlx_lower_op``); by default the registry's
    hook is asked."""
    ctx = LowerContext(target=target, func=func, options=dict(options or {}))
    if lower_op is None:
        lower_op = _registry_lower_op()

    def lower(op: TileOp) -> Executor | None:
        return lower_op(target=target, op=op, ctx=ctx)

    comp = Compiler(func, lower)
    for p in func.params:  # parameters take the first slots, in order
        if isinstance(p, Buffer):
            comp.buffer_slot(p)
        else:
            comp.var_slot(p)
    comp.shape_var_slots()
    body = comp.stmt(func.body)
    race_check = (ctx.options.get("pass_configs") or {}).get(RACE_CHECK_KEY)
    return Program(func, comp, body if body is not None else (lambda env: None),
                   None if race_check is None else bool(race_check))


def _registry_lower_op() -> Callable[..., Any]:
    from tilelang_x.registry import hook

    return hook().tlx_lower_op
