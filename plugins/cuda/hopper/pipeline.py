"""The ``pipeline`` stage on sm_90a: ``T.Pipelined`` loops whose global → shared copies all qualify
for TMA (tma.py) become mbarrier pipelines; the others keep the sm_80 cp.async pipeline.

Warp-specialized form (the default; one such loop at the top of the kernel, its copies and trip
count computed from block indices, arguments and the loop variable only): the block gets one more
warpgroup, the producer, whose first thread issues the TMA loads of iteration k into stage k % S
after waiting for ``empty[k % S]``; the original threads (consumers) wait for ``full[k % S]``, run
the loop body and arrive on ``empty[k % S]``. With ``tlx.barrier_groups``, copies whose tiles are
used by different statements of the body get their own full/empty pairs (``_Group``: FlashAttention's
K released after QKᵀ). With ≥ 256 consumers, ``setmaxnreg`` moves registers from the producer to
the consumers (registers.py ``ws_split``: the kernel's register hints, ``tlx.producer_regs``); a
kernel that calls ``T.set_max_nreg`` itself is not warp-specialized. Everything outside the
loop runs on the consumers, except global → shared copies before it at block-level coordinates
into tiles nothing else writes (FlashAttention's Q): the producer issues them as TMA loads at the
block's start, and the consumers wait for them before their first statement that reads them
(``_prologue_loads``, ``tlx.prologue_loads``). A body that computes more than gemms
(FlashAttention's softmax) is warp-specialized when the block's shared
memory leaves no room for a second block per SM (``_owns_sm``; ``tlx.ws_compute_loops`` forces it either way); two
consumer warpgroups then take turns issuing wgmma (pingpong.py, ``tlx.pingpong``), and a
FlashAttention-shaped body is rotated so that P·V of block k-1 runs during the softmax of block k
(rotate.py, ``tlx.softmax_rotation``; K and V on their own barriers). A gemm-only
body keeps one wgmma group in flight (``wait_group 1``; iteration k releases stage k - 1; the last
iteration drains inside the loop, since ptxas moves a drain placed after the loop below the
epilogue's accumulator reads). A gemm-only kernel with more tiles than SMs walks its
tiles on a grid of one block per SM (persistent.py, ``tlx.persistent`` forces it either way; a
cluster becomes one-dimensional and walks cluster tiles). In a clustered kernel, the loads the
cluster's blocks share are multicast (multicast.py: slices, remote releases, cluster barriers after
the inits and at the end).

Plain form (warp specialization off, or the kernel does not qualify): thread 0 issues the loads
of iteration k + S - 1 at the top of iteration k, after a barrier (every thread is done with that
stage), and everyone waits on ``full[k % S]`` before the body.

Results in ``ctx.data``: ``cuda.preset_layouts`` (the panel layouts of the TMA tiles),
``cuda.tmaps`` (the tensor-map parameters), ``cuda.ws`` (consumer thread count, register split).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.cluster import cluster_ops
from ....core_ir.registers import sets_max_nreg
from ....core_ir.stmt import Alloc, Annotate, For, If, Kernel, PrimFunc, Seq, Stmt, Sync
from ....core_ir.tileops import Copy, Gemm, ReducerInit
from ....core_ir.uniformity import uses_simt
from ....core_ir.visit import flat_seq, rewrite, substitute, views_of, walk
from ..analysis import block_ranges
from ..cluster import flattened, launch_dims
from ..launch_bounds import annotated_min_blocks
from ..layout_inference import find_kernel
from ..lir import ROLLED, THREAD, Barrier, Evaluate, Intrin, SmemAddr, by_thread_0
from ..pipelining import (
    after_previous_run,
    compact_guarded,
    filled_outside,
    is_producer,
    num_stages,
    outside_uses,
    pipeline_stage,
    pipelined,
    rerun_pipelines,
    staged,
    taken_counter,
    unguard,
    written_buffers,
)
from ..rasterize import block_remap
from ..registers import ws_split
from . import rotate
from .config import hopper_config, log
from .direct_store import FREED
from .elected_release import RELEASES
from .guard import Guard, plan_guard
from .layout import TMA_ALIGN
from .multicast import Multicast, plan_multicast
from .persistent import DEFAULT_SMS, STREAM_K_MAX_ITERS, plan_persistent
from .pingpong import CONSUMER_LOOP
from .stream_k import accumulator, fixup, workspace
from .tma import TmaCopy, TmaSpec, plan_tma, tile_bytes

PRODUCER_THREADS = 128
SMEM_PER_SM = 228 * 1024  # sm_90: 228 KB per SM, of which the system reserves 1 KB per block
SMEM_PER_BLOCK_RESERVED = 1024
PRODUCER_REGS = 40


def _call(fn: str, *args: Any) -> Evaluate:
    return Evaluate(Intrin(fn, tuple(E.const(a) if isinstance(a, int) else a for a in args)))


def _body(loop: For) -> list[Stmt]:
    return list(loop.body.stmts) if isinstance(loop.body, Seq) else [loop.body]


def _computes(work: list[Stmt]) -> bool:
    """Whether a loop body without its producer copies does more than gemms (FlashAttention's
    softmax), which decides warp specialization, the persistent form and the ping-pong loop."""
    return any(not isinstance(s, Gemm) for s in work)


class _Ctx:
    def __init__(self, func: PrimFunc, kernel: Kernel, overlap: bool, ws_compute: bool | None = None,
                 persistent: bool | None = None, barrier_groups: bool = False, rotation: bool = False,
                 prologue_loads: bool = False, stream_k: bool | None = False, freed: int = 0,
                 producer_regs: int = PRODUCER_REGS, rolled_k_loop: bool = False) -> None:
        self.overlap = overlap
        self.rolled_k_loop = rolled_k_loop
        self.producer_regs = producer_regs
        self.freed = freed
        self.stream_k = stream_k
        self.prologue_loads = prologue_loads
        self.rotation = rotation
        self.ws_compute = ws_compute
        self.persistent = persistent
        self.barrier_groups = barrier_groups
        self.params = tuple(func.params)
        self.host_vars = _host_vars(func, kernel)
        self.specs: dict[tuple, TmaSpec] = {}
        self.multi: dict[Buffer, Buffer] = {}
        self.preset: dict[Buffer, Any] = {}
        self.smem_align: dict[Buffer, int] = {}  # unswizzled TMA tiles (codegen's cuda.smem_align)
        self.annotated = {id(b) for n in walk(kernel.body) if isinstance(n, Annotate) and n.kind == "layout"
                          for b, _ in n.data}
        self.viewed = {id(b) for b in views_of(kernel.body)}  # tiles read or written through T.view too

    def plan_copies(self, copies: list[Copy]) -> list[TmaCopy] | None:
        """The TMA form of every copy (their tensor maps added to ``specs``), or ``None`` when one
        does not qualify, two share a destination or a destination has an annotated layout or views
        (TMA tiles are swizzled, their views are not)."""
        trial = dict(self.specs)
        plans = [plan_tma(p, self.params, trial) for p in copies]
        dsts = [p.dst.buffer for p in copies]
        if any(p is None for p in plans) or len({id(b) for b in dsts}) != len(dsts) or \
                any(id(b) in self.annotated or id(b) in self.viewed for b in dsts):
            return None
        self.specs.update(trial)
        return plans  # type: ignore[return-value]

    def plan(self, loop: For) -> list[TmaCopy] | None:
        producers = [s for s in _body(loop) if is_producer(s)]
        if not producers:
            return None
        plans = self.plan_copies(producers)
        if plans is None:
            log.debug("T.Pipelined at line %s: a copy does not qualify for TMA; using cp.async",
                      getattr(loop.loc, "line", "?"))
        return plans

    def stage_buffers(self, plans: list[TmaCopy], stages: int) -> None:
        for p in plans:
            b = p.op.dst.buffer
            m = Buffer(b.name, (stages,) + tuple(b.shape), b.dtype, "shared", b.loc)
            self.multi[b] = m
            self.preset[m] = lay = dataclasses.replace(p.layout, shape=(stages,) + p.layout.shape)
            if lay.swizzle == "none":
                self.smem_align[m] = TMA_ALIGN


def _issue(plans: list[TmaCopy], multi: dict[Buffer, Buffer], k: E.Var, it: E.Expr, stage: E.Expr,
           bar: E.Expr, mc: Multicast | None = None) -> list[Stmt]:
    """expect_tx on ``bar`` and the loads of iteration ``it`` (value of ``k``) into ``stage``
    (this CTA's slices of the multicast ones in ``mc``)."""
    out: list[Stmt] = [_call("tlx_mbar_expect_tx", bar, tile_bytes(plans))]
    for p in plans:
        op = substitute(p.op, {k: it})
        dst = p.op.dst.buffer
        out.extend(dataclasses.replace(p, op=op).issue(stage, multi[dst], bar, mc.slices.get(dst) if mc else None))
    return out


def _bar(buf: Buffer, i: E.Expr) -> SmemAddr:
    return SmemAddr(buf, (i,), "async")


def _wait_full(full: Buffer, j: E.Expr, stages: int) -> Stmt:
    """The wait for the loads of iteration ``j`` into stage ``j % stages`` (barrier ``full``)."""
    return _call("tlx_mbar_wait", _bar(full, j % stages), (j // stages) % 2)


def _init(bars: list[tuple[Buffer, int]]) -> list[Stmt]:
    """Allocation and initialisation (one arrival count per barrier, for each of its stages)."""
    inits: list[Stmt] = [_call("tlx_mbar_init", _bar(b, E.const(s)), count) for b, count in bars
                         for s in range(E.as_int(b.shape[0]) or 1)]
    return [Alloc(b) for b, _ in bars] + [by_thread_0(Seq((*inits, _call("tlx_mbar_fence_init"))))]


def _plain_loop(loop: For, plans: list[TmaCopy], cx: _Ctx) -> Stmt:
    stages = num_stages(loop)
    cx.stage_buffers(plans, stages)
    full = Buffer("tlx_full", (stages,), dtypes.uint64, "shared")
    k, n = loop.var, loop.extent
    start = loop.start if loop.start is not None else E.const(0)
    it = E.Var(k.name + "_i", k.dtype)

    def issue(i: E.Expr, s: E.Expr) -> Stmt:
        return by_thread_0(Seq(tuple(_issue(plans, cx.multi, k, start + i, s, _bar(full, s)))), loop.loc)

    out: list[Stmt] = _init([(full, 1)]) + [Barrier()]
    for s in range(stages - 1):
        out.append(If(E.binary("<", E.const(s), n), issue(E.const(s), E.const(s)), None, loop.loc))
    nxt = it + (stages - 1)
    rest = [staged(substitute(s, {k: start + it}), cx.multi, it % stages) for s in _body(loop)
            if not is_producer(s)]
    body = [Barrier(), If(E.binary("<", nxt, n), issue(nxt, nxt % stages), None, loop.loc),
            _wait_full(full, it, stages), *rest]
    out.append(For(it, n, "serial", Seq(tuple(body)), None, (("pipelined", stages),), loop.loc))
    return Seq(tuple(out))


# ---- warp specialization -------------------------------------------------------------------------
def _host_only(exprs: list[E.Expr], allowed: set[int]) -> bool:
    for e in exprs:
        if any(isinstance(n, (E.Load, E.AtomicLoad)) for n in walk(e)):
            return False
        if any(id(v) not in allowed for v in E.free_vars(e)):
            return False
    return True


def _host_vars(func: PrimFunc, kernel: Kernel) -> set[int]:
    """ids of the variables the producer knows without the consumers: block indices, scalar
    arguments and the symbolic sizes of tensor arguments."""
    allowed = {id(v) for v in kernel.block_vars}
    for p in func.params:
        if isinstance(p, E.Var):
            allowed.add(id(p))
        elif isinstance(p, Buffer):
            allowed |= {id(v) for e in p.shape for v in E.free_vars(e)}
    return allowed


def _owns_sm(kernel: Kernel, loop: For, freed: int = 0) -> bool:
    """Whether the block's shared memory leaves no room for a second block on an SM. Only then does
    warp-specializing a loop that computes more than gemms pay (measured on the H200: FlashAttention
    D128, 192 KB, 7-11 % faster; D64, 96 KB, 20 % slower, since two plain blocks per SM already
    overlap one block's softmax with the other's gemms; still 6-11 % slower with the rotation and
    the prologue loads, 2026-11-30, ``…-session4-variants-attention-d64-ws.json``). ``freed``: the
    bytes of the shared tiles the direct store took away (direct_store.py), counted as the kernel
    was written, since the staged epilogue's slots take shared memory in their place."""
    stages = num_stages(loop)
    staged = {id(s.dst.buffer) for s in _body(loop) if is_producer(s)}
    total = 0
    for a in walk(kernel.body):
        if isinstance(a, Alloc) and a.buffer.scope == "shared":
            shape = a.buffer.static_shape()
            if shape is None:
                return False
            total += math.prod(shape) * a.buffer.dtype.bytes * (stages if id(a.buffer) in staged else 1)
    return 2 * (total + freed + SMEM_PER_BLOCK_RESERVED) > SMEM_PER_SM


def _ws_candidate(func: PrimFunc, kernel: Kernel, cx: _Ctx, clustered: bool
                  ) -> tuple[list[Stmt], int, list[TmaCopy], Guard | None] | None:
    if len(kernel.threads) != 1 or kernel.num_threads % 128:
        return None
    if any(isinstance(n, ReducerInit) for n in walk(kernel.body)):
        log.debug("the kernel at line %s uses T.alloc_reducer: plain TMA pipeline (the reducer's copies are combined "
                  "over every thread of the block)", getattr(kernel.loc, "line", "?"))
        return None
    if any(isinstance(n, Sync) and n.scope in ("grid", "pdl_sync") for n in walk(kernel.body)):
        log.debug("the kernel at line %s calls T.sync_grid or T.pdl_sync: not warp-specialized (the producer would "
                  "not take part)", getattr(kernel.loc, "line", "?"))
        return None
    if cluster_ops(kernel.body):
        log.debug("the kernel at line %s uses cluster barriers or ranks: not warp-specialized (its blocks stay where "
                  "the hardware clusters them; no multicast, no persistent form)", getattr(kernel.loc, "line", "?"))
        return None
    if sets_max_nreg(kernel.body):
        log.debug("the kernel at line %s reallocates registers itself (T.set_max_nreg): not warp-specialized",
                  getattr(kernel.loc, "line", "?"))
        return None
    if annotated_min_blocks(kernel.body) not in (None, 1):
        log.debug("the kernel at line %s asks for more than one block per SM: plain TMA pipeline (setmaxnreg plans "
                  "the registers of one)", getattr(kernel.loc, "line", "?"))
        return None
    top = flat_seq(kernel.body)
    loops = [i for i, s in enumerate(top) if isinstance(s, For) and s.kind == "pipelined"]
    nested = [n for n in walk(kernel.body) if isinstance(n, For) and n.kind == "pipelined"]
    if len(loops) != 1 or len(nested) != 1:
        return None
    at = loops[0]
    as_written = top[at]
    loop, cond = unguard(as_written)  # type: ignore[arg-type]
    guard = None
    if cond is not None:
        guard = None if clustered else plan_guard(cx.params, cx.host_vars, kernel.body, top, at, loop, cond)
        if guard is None:
            log.debug("T.Pipelined at line %s: the producer cannot evaluate the guard of the body on its own "
                      "(or the kernel is clustered); its copies stay synchronous", getattr(loop.loc, "line", "?"))
            return None
        top = top[:at] + [loop] + top[at + 1:]
    allowed = cx.host_vars | {id(loop.var)}
    exprs = [loop.extent] + ([loop.start] if loop.start is not None else [])
    for s in _body(loop):
        if is_producer(s):
            exprs.extend(s.src.starts)
    if not _host_only(exprs, allowed):
        return None
    compute = _computes([s for s in _body(loop) if not is_producer(s)])
    # a guarded loop whose taken iterations cannot be listed first (pipelining.compact_guarded) has
    # no other pipelined form: warp-specialize it whatever the shared memory. One that can follows
    # the rule of the others (block-sparse attention D64, two blocks per SM, listed: 1.23x faster)
    owns = _owns_sm(kernel, loop, cx.freed) or guard is not None and compact_guarded(as_written, kernel.body) is None
    if compute and not (owns if cx.ws_compute is None else cx.ws_compute):
        log.debug("T.Pipelined at line %s computes more than gemms and two blocks fit on an SM: plain TMA "
                  "pipeline", getattr(loop.loc, "line", "?"))
        return None
    plans = cx.plan(loop)
    if plans is None:
        return None
    return top, at, plans, guard


def _written(b: Buffer, node: Stmt, but: Stmt) -> bool:
    """Whether a statement of ``node`` other than ``but`` writes buffer ``b``."""
    return any(w is b for w in written_buffers(node, but))


def _writes_shared(node: Stmt) -> bool:
    return any(w.scope == "shared" for w in written_buffers(node))


def _prologue_loads(kernel: Kernel, top: list[Stmt], at: int, cx: _Ctx) -> dict[int, TmaCopy]:
    """Copies before the loop (top-level statement index → plan) that the producer can issue as TMA
    loads at the block's start (FlashAttention's Q tile): global → shared tiles at block-level
    coordinates, into a buffer nothing else writes, so one load and one wait serve the whole block."""
    out: dict[int, TmaCopy] = {}
    for i, s in enumerate(top[:at]):
        if not is_producer(s) or not _host_only(list(s.src.starts), cx.host_vars) or \
                _written(s.dst.buffer, kernel.body, s):
            continue
        plans = cx.plan_copies([s])
        if plans is not None:
            cx.preset[s.dst.buffer] = plans[0].layout
            if plans[0].layout.swizzle == "none":
                cx.smem_align[s.dst.buffer] = TMA_ALIGN
            out[i] = plans[0]
    return out


@dataclasses.dataclass(frozen=True)
class _Group:
    """Copies of the loop that share a full/empty barrier pair. One group holds them all, unless
    ``tlx.barrier_groups`` splits them by the statements that first and last use their tiles
    (``first``, ``last``: indices in the body without the copies), so that a tile used early (K in
    FlashAttention) is released, and refilled, without waiting for the end of the iteration."""

    plans: tuple[TmaCopy, ...]
    first: int
    last: int
    full: Buffer
    empty: Buffer


def _groups(rest: list[Stmt], plans: list[TmaCopy], stages: int, split: bool) -> list[_Group]:
    spans: dict[tuple[int, int], list[TmaCopy]] = {}
    for p in plans:
        b = p.op.dst.buffer
        uses = [i for i, s in enumerate(rest) if any(getattr(n, "buffer", None) is b for n in walk(s))] or [0]
        spans.setdefault((uses[0], uses[-1]), []).append(p)
    if not split:
        spans = {(min(f for f, _ in spans), max(last for _, last in spans)): list(plans)}
    return [_Group(tuple(ps), span[0], span[1], *_group_bars(g, stages))
            for g, (span, ps) in enumerate(sorted(spans.items(), key=lambda kv: kv[0]))]


def _group_bars(g: int, stages: int) -> tuple[Buffer, Buffer]:
    suffix = str(g) if g else ""
    return (Buffer("tlx_full" + suffix, (stages,), dtypes.uint64, "shared"),
            Buffer("tlx_empty" + suffix, (stages,), dtypes.uint64, "shared"))


def _release(g: _Group, stage: E.Expr, mc: Multicast | None) -> Stmt:
    """The consumers' arrive on ``g``'s empty barrier of ``stage`` (with multicast, on each peer's)."""
    return mc.release(_bar(g.empty, stage), g.plans) if mc else _call("tlx_mbar_arrive", _bar(g.empty, stage))


def _consumer_loop(loop: For, work: list[Stmt], groups: list[_Group], cx: _Ctx, pers: Any,
                   mc: Multicast | None, guard: Guard | None) -> list[Stmt]:
    """The consumers' loop: each group's statements between a wait on its full barrier and an
    arrive on its empty one (with a guard, in the iterations it takes, counted by ``taken``)."""
    stages = num_stages(loop)
    k, n = loop.var, loop.extent
    start = loop.start if loop.start is not None else E.const(0)
    it = E.Var(k.name + "_i", k.dtype)
    taken = taken_counter("tlx_taken") if guard else None
    gc = taken[1] if taken else pers.counter(n, it) if pers else it
    sc = gc % stages
    sk = pers.stream_k if pers else None
    if sk is not None:  # the tile's segment: iterations k0 .. k0 + length - 1
        start, n = sk.segment(start)
    rest = [staged(substitute(s, {k: start + it}), cx.multi, sc) for s in work]
    compute = _computes(rest)
    after: list[Stmt] = []
    if cx.overlap and taken is None and len(rest) == 1 and isinstance(rest[0], Gemm) and rest[0].wg_wait == 0:
        # one wgmma group stays in flight: iteration it releases the stage of iteration it - 1
        # ptxas (nvcc 13.0) schedules a ``wait_group 0`` placed after the loop below the epilogue's
        # reads of the accumulators (it loses track of the group still in flight across the back
        # edge): the last iteration drains inside the loop, where the wait cannot move past them.
        (g,) = groups
        body: list[Stmt] = [
            _wait_full(g.full, gc, stages), dataclasses.replace(rest[0], wg_wait=1),
            If(E.binary("==", it, n - 1), _call("tlx_wgmma_drain"), None),
            If(E.binary(">", gc, 0), _release(g, (gc + stages - 1) % stages, mc), None)]
        after = [_call("tlx_wgmma_drain")]
    else:
        body = []
        for i, s in enumerate(rest):
            body += [_wait_full(g.full, gc, stages) for g in groups if g.first == i]
            body.append(s)
            body += [_release(g, sc, mc) for g in groups if g.last == i]
    ann = (("pipelined", stages),) + (((CONSUMER_LOOP, True),) if compute else ())
    if after and cx.rolled_k_loop:
        # NVVM unrolls the gemm loop twice by itself, and each 64×N wgmma it copies costs compile
        # time (ptxas allocates its live accumulators). H200 (2026-12-01, session 18): kept rolled,
        # the 128×256×64 GEMM's first compile takes 0.39 s instead of 0.66 s, and runs 0.2-0.6 %
        # slower with the L2 flushed, 1.5 % at 8192³ back to back (bench/variants.py, 8 rounds, two
        # builds each), 2-3 % for float8 8192³ (bench/gemm.py): on by default, tlx.rolled_k_loop=False
        # unrolls
        ann += ((ROLLED, True),)
    if taken is None:
        return [For(it, n, "serial", Seq(tuple(body)), None, ann, loop.loc), *after]
    assert guard is not None
    step = If(substitute(guard.cond, {k: start + it}), Seq((*body, taken[2])), None, loop.loc)
    return [taken[0], For(it, n, "serial", step, None, ann, loop.loc)]


def _stream_k_ignored(csize: int, acc: Buffer | None, pers: Any) -> str:
    """Why a kernel that asked for stream-K did not get it."""
    if csize > 1:
        return "a cluster launch"
    if acc is None:
        return "the loop is not one T.gemm into a cleared float32 fragment"
    if pers is None:
        return "the kernel is not persistent"
    return f"the k-loop's trip count is not a constant in 2..{STREAM_K_MAX_ITERS}"


def _with_stream_k(consumer: list[Stmt], cons_loop: list[Stmt], acc: Buffer, pers: Any, consumers: int,
                   ctx: Any) -> list[Stmt]:
    """``consumer`` with the stream-K fixup after the loop and the epilogue behind it (stream_k.py)."""
    at = next(i for i, s in enumerate(consumer) if s is cons_loop[0]) + len(cons_loop)
    ws = ctx.data["cuda.stream_k"] = workspace()
    return consumer[:at] + fixup(acc, pers, consumers, ws, consumer[at:])


def _ws_kernel(kernel: Kernel, top: list[Stmt], at: int, plans: list[TmaCopy], guard: Guard | None, cx: _Ctx,
               ctx: Any) -> Kernel:
    loop = top[at]
    assert isinstance(loop, For)
    stages = num_stages(loop)
    cx.stage_buffers(plans, stages)
    consumers = kernel.num_threads
    k, n = loop.var, loop.extent
    start = loop.start if loop.start is not None else E.const(0)
    cshape = launch_dims(kernel, ctx.target.arch)
    csize = math.prod(cshape or (1,))
    work = [s for s in _body(loop) if not is_producer(s)]
    # a guarded loop's trip count varies by block, which the persistent tile walk cannot share
    wanted = guard is None and (cx.persistent if cx.persistent is not None else not _computes(work))
    acc = accumulator([s for s in top[:at]], work, cx.overlap) \
        if cx.stream_k is not False and csize == 1 and guard is None else None
    pers = plan_persistent(kernel, n, start, DEFAULT_SMS, block_remap(kernel, ctx), cshape,
                           stream_k=cx.stream_k if acc is not None else False) if wanted else None
    if cx.stream_k and (pers is None or pers.stream_k is None):
        log.debug("T.Pipelined at line %s: tlx.stream_k ignored (%s)", getattr(loop.loc, "line", "?"),
                  _stream_k_ignored(csize, acc, pers))
    by_use = _groups(work, plans, stages, True)
    rot = rotate.match(work, by_use) if cx.rotation and pers is None and guard is None else None
    groups = by_use if rot is not None or cx.barrier_groups else _groups(work, plans, stages, False)
    mc = plan_multicast(kernel, loop, plans, cx.specs, ctx, persistent=pers is not None)
    # producer: one thread walks all iterations (of all its tiles when persistent: counter gp)
    kp = E.Var(k.name + "_p", k.dtype)
    taken = taken_counter("tlx_taken_p") if guard else None
    gp = taken[1] if taken else pers.counter(n, kp) if pers else kp
    sp = gp % stages
    sk = pers.stream_k if pers else None
    first, trips = sk.segment(start) if sk else (start, n)
    prod_body = [x for g in groups for x in (_call("tlx_mbar_wait", _bar(g.empty, sp), (gp // stages + 1) % 2),
                                              *_issue(list(g.plans), cx.multi, k, first + kp, sp, _bar(g.full, sp),
                                                      mc))]
    prod_loop: Stmt = For(kp, trips, "serial", Seq(tuple(prod_body)), None, (), loop.loc)
    if taken is not None:  # the producer fills what the guard reads, then issues the iterations it takes
        assert guard is not None
        step = If(substitute(guard.cond, {k: first + kp}), Seq((*prod_body, taken[2])), None, loop.loc)
        prod_loop = Seq((*(top[i] for i in guard.setup), taken[0],
                         For(kp, trips, "serial", step, None, (), loop.loc)))
    pre = _prologue_loads(kernel, top, at, cx) if cx.prologue_loads and pers is None and mc is None else {}
    pre_bar = Buffer("tlx_pre", (1,), dtypes.uint64, "shared")
    pre_full = _bar(pre_bar, E.const(0))
    issued: Stmt = pers.wrap([prod_loop]) if pers else prod_loop
    if pre:  # the prologue loads go first, on their own barrier
        loads = [x for p in pre.values() for x in p.issue(None, p.op.dst.buffer, pre_full)]
        issued = Seq((_call("tlx_mbar_expect_tx", pre_full, tile_bytes(list(pre.values()))), *loads, issued))
    producer: list[Stmt] = [If(E.binary("==", THREAD, consumers), issued, None)]
    if rot is not None:
        def stmt_at(s: Stmt, j: E.Expr) -> Stmt:
            return staged(substitute(s, {k: start + j}), cx.multi, j % stages)

        before = [s for i, s in enumerate(top[:at]) if i not in pre]
        cons_loop = rotate.rotated(rot, loop, stmt_at, lambda g, j: _wait_full(g.full, j, stages),
                                   lambda g, j: _release(g, j % stages, mc),
                                   block_ranges(kernel, unknown_extent=2**31),
                                   any(_writes_shared(s) for s in before))
    else:
        cons_loop = _consumer_loop(loop, work, groups, cx, pers, mc, guard)
    hoisted = [s for s in top if isinstance(s, (Alloc, Annotate)) and (not isinstance(s, Alloc) or s.init is None)]
    consumer = [x for i, s in enumerate(top) if not any(s is h for h in hoisted) and i not in pre
                for x in (cons_loop if i == at else [s])]
    if pre:  # the consumers wait for the prologue loads before the first statement that reads them
        dsts = {id(p.op.dst.buffer) for p in pre.values()}
        first = next(i for i, s in enumerate(consumer) if any(id(getattr(n, "buffer", None)) in dsts for n in walk(s)))
        consumer.insert(first, _call("tlx_mbar_wait", pre_full, 0))
    if sk is not None and acc is not None:
        consumer = _with_stream_k(consumer, cons_loop, acc, pers, consumers, ctx)
    if pers:
        consumer = [pers.wrap(consumer, loop.loc)]
        ctx.data["cuda.persistent"] = pers  # codegen binds its stride; lower/__init__.py drains after its loops
    regs = ws_split(kernel.body, consumers, PRODUCER_THREADS, cx.producer_regs)
    if regs is not None:
        producer.insert(0, _call("TLX_SETMAXNREG_DEC", regs[0]))
        consumer.insert(0, _call("TLX_SETMAXNREG_INC", regs[1]))
    split = If(E.binary(">=", THREAD, consumers), Seq(tuple(producer)), Seq(tuple(consumer)), loop.loc)
    bars = [(b, count) for g in groups
            for b, count in ((g.full, 1), (g.empty, mc.empty_count(g.plans, consumers) if mc else consumers))]
    ctx.data.setdefault(RELEASES, []).extend(
        (g.empty, tuple(cx.multi.get(p.op.dst.buffer, p.op.dst.buffer) for p in g.plans), consumers) for g in groups)
    bars += [(pre_bar, 1)] if pre else []
    # with multicast, peers signal these barriers: the whole cluster waits for the inits, and no
    # CTA exits while a peer may still write into its shared memory or arrive on its barriers
    start_sync, end = ("tlx_cluster_sync_init", [_call("tlx_cluster_sync")]) if mc else ("__syncthreads", [])
    body = hoisted + _init(bars) + [_call(start_sync), split, *end]
    producer_regs, consumer_regs = regs or (0, 0)
    ctx.data["cuda.ws"] = {"consumers": consumers, "producer_regs": producer_regs, "consumer_regs": consumer_regs}
    if pers:
        return dataclasses.replace(kernel, body=Seq(tuple(body)), grid=(E.const(pers.grid),), block_vars=(pers.pid,),
                                   annotations=flattened(kernel.annotations))
    return dataclasses.replace(kernel, body=Seq(tuple(body)))


def hopper_pipeline_stage(func: PrimFunc, ctx: Any) -> PrimFunc:
    cfg = hopper_config(ctx)
    kernel = find_kernel(func.body)
    if not cfg.tma or kernel is None or filled_outside(func.body):  # a fill must not race the TMA loads
        return pipeline_stage(func, ctx)
    cx = _Ctx(func, kernel, cfg.overlap_wgmma, cfg.ws_compute_loops, cfg.persistent, cfg.barrier_groups,
              cfg.softmax_rotation, cfg.prologue_loads, cfg.stream_k, ctx.data.get(FREED, 0), cfg.producer_regs,
              cfg.rolled_k_loop)
    body = func.body
    # warp specialization gives the threads new roles: kernels that query threads keep their own
    ws = _ws_candidate(func, kernel, cx, launch_dims(kernel, ctx.target.arch) is not None) \
        if cfg.warp_specialize and not uses_simt(kernel.body) else None
    sm80: dict[Buffer, Buffer] = {}
    if ws is not None:
        new_kernel = _ws_kernel(kernel, *ws, cx, ctx)
        body = rewrite(body, lambda x: new_kernel if x is kernel else None)
    else:
        rerun = rerun_pipelines(body)

        def fn(x: Any) -> Any:
            if isinstance(x, For) and x.kind == "pipelined":
                plans = cx.plan(x)
                out = _plain_loop(x, plans, cx) if plans is not None else pipelined(x, body, sm80)
                return after_previous_run(x, out, rerun)
            return None

        body = rewrite(body, fn)
    multi = {**cx.multi, **sm80}
    if multi:
        body = outside_uses(rewrite(body, lambda x: Alloc(multi[x.buffer], x.init, x.loc)
                                    if isinstance(x, Alloc) and x.buffer in multi else None), multi)
        ctx.data["cuda.multibuffer"] = {id(v): k for k, v in multi.items()}
    ctx.data["cuda.preset_layouts"] = cx.preset
    if cx.smem_align:
        ctx.data["cuda.smem_align"] = {**ctx.data.get("cuda.smem_align", {}), **cx.smem_align}
    ctx.data["cuda.tmaps"] = list(cx.specs.values())
    return dataclasses.replace(func, body=body)
