"""The ``pipeline`` stage: ``T.Pipelined`` loops become multi-stage cp.async pipelines.

Copies global → shared at the top level of a pipelined loop body are the producers. Each of
their shared tiles gets ``num_stages`` buffers (a new leading dimension); the copies of iteration
``k + num_stages - 1`` are issued (asynchronously, one commit group per iteration) while
iteration ``k`` computes:

    prologue: for s < S-1: if s < n: copies(s) -> stage s;   commit
    for k in [0, n): wait_group(S-2); sync
                     copies(min(k+S-1, n-1)) -> stage (k+S-1) % S;   commit
                     body(k) reading stage k % S
    wait_group(0)

The in-loop copies are unconditional (no branch, so the scheduler can interleave them with the
body): in the last S-1 iterations they reload tile n-1 into a stage that no later iteration reads.

The stage runs at tile level, before layout inference; copies get the annotation ``async``.
A loop whose body is only the copies and one T.gemm reading two of their tiles is annotated
``tlx.prefetch_fragments`` (``lower/mainloop.py`` then double-buffers the gemm's register
fragments across k-tiles). ``T.clear(C)`` right before ``T.gemm(..., C)`` becomes ``clear_accum``.
Both are switched by ``perf_options``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ...core_ir import dtypes
from ...core_ir import expr as E
from ...core_ir.buffer import Buffer, Region
from ...core_ir.errors import BackendNotImplementedError
from ...core_ir.stmt import Alloc, For, If, PrimFunc, Seq, Stmt, Store, While
from ...core_ir.tileops import Copy, Fill, Gemm
from ...core_ir.visit import rewrite, substitute, walk
from .lir import AsyncCommit, AsyncWait, Barrier
from .perf_options import perf_options


def is_producer(s: Stmt) -> bool:
    """A global → shared copy of the loop body that the pipeline issues ahead (not one into a view:
    the stages are made for the tile that owns the memory)."""
    return (isinstance(s, Copy) and s.src.buffer.scope == "global" and s.dst.buffer.scope == "shared"
            and s.src.buffer.dtype == s.dst.buffer.dtype and s.dst.buffer.base is None)


def unguard(loop: For) -> tuple[For, E.Expr | None]:
    """``loop`` with the body of its guard as its body, and the guard's condition; ``(loop, None)``
    when the body is not one ``if`` (no ``else``) around producer copies (TileLang's block-sparse
    kernels: ``if block_mask[k]:`` around the whole body)."""
    body = loop.body.stmts if isinstance(loop.body, Seq) else (loop.body,)
    if len(body) != 1 or not isinstance(body[0], If) or body[0].otherwise is not None:
        return loop, None
    branch = body[0]
    inner = branch.then.stmts if isinstance(branch.then, Seq) else (branch.then,)
    if not any(is_producer(s) for s in inner):
        return loop, None
    return For(loop.var, loop.extent, loop.kind, Seq(tuple(inner), branch.then.loc), loop.start, loop.annotations,
               loop.loc), branch.cond


def written_buffers(node: Stmt, but: Stmt | None = None) -> list[Buffer]:
    """The buffers that statements of ``node`` (other than ``but``) store to or write as tile ops."""
    out = []
    for n in walk(node):
        if n is but:
            continue
        if isinstance(n, Store):
            out.append(n.buffer)
        out += [r.buffer for r in (getattr(n, "dst", None), getattr(n, "C", None)) if isinstance(r, Region)]
    return out


def written_ids(s: Stmt) -> set[int]:
    """``id``s of the memory (``Buffer.storage``) that stores and tile ops in ``s`` write."""
    return {id(b.storage) for b in written_buffers(s)}


#: the largest trip count of a guarded loop whose taken iterations every thread lists (4 bytes each)
MAX_LISTED_TRIPS = 4096


def compact_guarded(loop: For, kernel_body: Stmt) -> tuple[list[Stmt], For] | None:
    """A guarded loop (``unguard``) as a list of the iterations it takes, made before it, and a loop
    over that list: ``taken = [k for k in range(n) if cond(k)]; for j in T.Pipelined(len(taken)):
    body(taken[j])``, whose copies the pipeline can issue ahead. ``None`` when ``loop`` is not
    guarded, its trip count is not a constant, or ``cond`` reads what the loop (or, for tensors,
    the kernel) writes."""
    inner, cond = unguard(loop)
    n = E.as_int(loop.extent)
    if cond is None or n is None or not 0 < n <= MAX_LISTED_TRIPS:
        return None
    in_loop, in_kernel = written_ids(inner.body), written_ids(kernel_body)
    for x in walk(cond):
        if isinstance(x, E.AtomicLoad) or isinstance(x, E.Load) and (
                id(x.buffer.storage) in in_loop or x.buffer.scope == "global" and id(x.buffer.storage) in in_kernel):
            return None
    k = loop.var
    start = loop.start if loop.start is not None else E.const(0)
    taken = Buffer(k.name + "_taken", (E.const(n),), dtypes.int32, "local", loop.loc)
    declare, c, count_one = taken_counter(k.name + "_count")
    i = E.Var(k.name + "_scan", k.dtype)
    keep = Seq((Store(taken, (c,), E.cast(start + i, dtypes.int32)), count_one))
    scan = For(i, E.const(n), "serial", If(substitute(cond, {k: start + i}), keep, None, loop.loc), None, (), loop.loc)
    j = E.Var(k.name + "_j", k.dtype)
    body = substitute(inner.body, {k: E.cast(E.Load(taken, (j,)), k.dtype)})
    return [Alloc(taken), declare, scan], For(j, c, loop.kind, body, None, loop.annotations, loop.loc)


def taken_counter(name: str) -> tuple[Alloc, E.Expr, Stmt]:
    """A counter of the iterations a guarded loop takes: its declaration (at 0), its value, and
    its increment."""
    buf = Buffer(name, (E.const(1),), dtypes.int32, "var")
    value = E.Load(buf, (E.const(0),))
    return Alloc(buf, E.const(0)), value, Store(buf, (E.const(0),), value + 1)


def pipeline_stage(func: PrimFunc, ctx: Any) -> PrimFunc:
    multi: dict[Buffer, Buffer] = {}
    opts = perf_options(ctx)
    body = fold_clears(func.body) if opts.fold_clear else func.body
    body = _rewrite_loops(body, multi, opts.prefetch_fragments)
    if not multi:
        return func if body is func.body else dataclasses.replace(func, body=body)

    def fix_alloc(n: Any) -> Any:
        if isinstance(n, Alloc) and n.buffer in multi:
            return Alloc(multi[n.buffer], n.init, n.loc)
        return None

    body = outside_uses(rewrite(body, fix_alloc), multi)
    ctx.data["cuda.multibuffer"] = {id(v): k for k, v in multi.items()}
    return dataclasses.replace(func, body=body)


def filled_outside(body: Stmt) -> bool:
    """Whether a tile that a ``T.Pipelined`` loop loads is also filled outside the loop (see
    ``outside_uses``)."""
    loops = [n for n in walk(body) if isinstance(n, For) and n.kind == "pipelined"]
    loaded = {s.dst.buffer for loop in loops for s in walk(loop.body) if is_producer(s)}
    inside = {id(n) for loop in loops for n in walk(loop.body)}
    return any(isinstance(n, Fill) and n.dst.buffer in loaded and id(n) not in inside for n in walk(body))


def outside_uses(body: Stmt, multi: dict[Buffer, Buffer]) -> Stmt:
    """The uses of multi-buffered tiles outside their pipelined loops: a ``T.fill`` / ``T.clear``
    (TileLang's decode examples zero a K tile before the loop) fills every stage; any other use
    raises ``BackendNotImplementedError``."""

    def fill_stages(n: Any) -> Any:
        if isinstance(n, Fill) and n.dst.buffer in multi:
            stages = range(num_stages_of(multi[n.dst.buffer]))
            return Seq(tuple(staged(n, multi, E.const(s)) for s in stages), n.loc)
        return None

    body = rewrite(body, fill_stages)
    for n in walk(body):
        if isinstance(n, (E.Load, Store)):
            used = [n.buffer]
        elif isinstance(n, (Copy, Fill, Gemm)) or dataclasses.is_dataclass(n) and isinstance(n, Stmt):
            used = [f.buffer for f in (getattr(n, x.name) for x in dataclasses.fields(n)) if isinstance(f, Region)]
        else:
            used = []
        buf = next((b for b in used if b in multi), None)
        if buf is not None:
            raise BackendNotImplementedError(
                f"tile `{buf.name}` is loaded in stages by a T.Pipelined loop and also used outside it; the CUDA "
                "backend supports only T.fill / T.clear of such a tile outside the loop", loc=getattr(n, "loc", None),
                hint=f"copy `{buf.name}` into another tile inside the loop, or give the loop num_stages=1")
    return body


def is_positive_zero(v: E.Expr) -> bool:
    """A literal +0 (not -0.0: the accumulators would start at +0)."""
    return isinstance(v, E.Const) and v.value == 0 and math.copysign(1.0, float(v.value)) > 0


def fold_clears(s: Stmt) -> Stmt:
    """``T.clear(C); T.gemm(A, B, C)`` (both over the whole fragment C) -> ``T.gemm(..., clear_accum)``."""

    def fn(n: Any) -> Any:
        if not isinstance(n, Seq):
            return None
        out: list[Stmt] = []
        changed = False
        for c in n.stmts:
            prev = out[-1] if out else None
            if (isinstance(c, Gemm) and isinstance(prev, Fill) and prev.dst.buffer is c.C.buffer
                    and c.C.buffer.scope == "fragment" and is_positive_zero(prev.value) and prev.dst.is_full()
                    and c.C.is_full() and c.A.buffer is not c.C.buffer and c.B.buffer is not c.C.buffer):
                out[-1] = dataclasses.replace(c, clear_accum=True)
                changed = True
            else:
                out.append(c)
        return Seq(tuple(out), n.loc) if changed else None

    return rewrite(s, fn)


def rerun_pipelines(s: Stmt) -> set[int]:
    """Ids of the ``T.Pipelined`` loops inside another loop (``T.Persistent``, a user's tile loop):
    they run more than once, and a run's first loads must wait until every thread is done with the
    previous run's last stages (sync insertion does not track the asynchronous copies)."""
    return {id(m) for n in walk(s) if isinstance(n, (For, While)) for m in walk(n.body)
            if isinstance(m, For) and m.kind == "pipelined"}


def after_previous_run(loop: For, out: Stmt, rerun: set[int]) -> Stmt:
    """``out``, the pipelined form of ``loop``, behind a barrier when ``loop`` is in ``rerun``
    (``rerun_pipelines``): a rerun refills the stages (and re-initializes the TMA barriers) the
    previous run's last iterations may still be reading. A loop left serial needs none."""
    return Seq((Barrier(), out), loop.loc) if id(loop) in rerun and isinstance(out, Seq) else out


def _rewrite_loops(s: Stmt, multi: dict[Buffer, Buffer], prefetch: bool = False) -> Stmt:
    rerun = rerun_pipelines(s)

    def fn(n: Any) -> Any:
        if isinstance(n, For) and n.kind == "pipelined":
            return after_previous_run(n, pipelined(n, s, multi, prefetch), rerun)
        return None

    return rewrite(s, fn)


def pipelined(loop: For, kernel_body: Stmt, multi: dict[Buffer, Buffer], prefetch: bool = False) -> Stmt:
    """The cp.async pipeline of ``loop``; a guarded one over the list of the iterations it takes
    (``compact_guarded``) when that list can be made before it."""
    listed = compact_guarded(loop, kernel_body)
    if listed is None:
        return _pipeline(loop, multi, prefetch)
    scan, inner = listed
    return Seq((*scan, _pipeline(inner, multi, prefetch)), loop.loc)


def staged(stmt: Stmt, multi: dict[Buffer, Buffer], stage: E.Expr) -> Stmt:
    """``stmt`` with each tile of ``multi`` replaced by stage ``stage`` of its multi-buffered form
    (and a view of such a tile by the same view of the stages, with a leading stage dimension:
    stage ``s`` of the view is the bytes of stage ``s`` of the tile)."""

    def fn(x: Any) -> Any:
        if isinstance(x, (Region, E.Load)) and x.buffer.storage in multi and x.buffer not in multi:
            v = x.buffer
            multi[v] = Buffer(v.name, (E.const(num_stages_of(multi[v.storage])),) + v.shape, v.dtype, v.scope, v.loc,
                              base=multi[v.storage])
        if isinstance(x, Region) and x.buffer in multi:
            return Region(multi[x.buffer], (stage,) + x.starts, (E.const(1),) + x.extents)
        if isinstance(x, E.Load) and x.buffer in multi:
            return E.Load(multi[x.buffer], (stage,) + x.indices, x.loc)
        if isinstance(x, Store) and x.buffer in multi:
            return Store(multi[x.buffer], (stage,) + x.indices, x.value, x.loc)
        return None

    return rewrite(stmt, fn)


def num_stages_of(multi_buffer: Buffer) -> int:
    return E.as_int(multi_buffer.shape[0]) or 1


def num_stages(loop: For) -> int:
    """The stages of a ``T.Pipelined`` loop (``num_stages``, 2 when not given; 0 means 1)."""
    return int(loop.ann().get("num_stages", 2) or 1)


def _pipeline(loop: For, multi: dict[Buffer, Buffer], prefetch: bool = False) -> Stmt:
    ann = loop.ann()
    stages = num_stages(loop)
    body = list(loop.body.stmts) if isinstance(loop.body, Seq) else [loop.body]
    producers = [s for s in body if is_producer(s)]
    serial = For(loop.var, loop.extent, "serial", loop.body, loop.start, (), loop.loc)
    if stages < 2 or not producers:
        return serial
    bufs = []
    for p in producers:
        b = p.dst.buffer
        if b not in bufs:
            bufs.append(b)
    for b in bufs:
        if b not in multi:
            multi[b] = Buffer(b.name, (stages,) + tuple(b.shape), b.dtype, "shared", b.loc)
    k, n = loop.var, loop.extent
    start = loop.start if loop.start is not None else E.const(0)
    mine = {b: multi[b] for b in bufs}

    def issue(it: E.Expr, stage: E.Expr) -> list[Stmt]:
        out = []
        for p in producers:
            c = substitute(p, {k: start + it}) if not (isinstance(it, E.Var) and it is k) else p
            c = dataclasses.replace(c, annotations=tuple(c.annotations) + (("async", True),))
            out.append(staged(c, mine, stage))
        return out

    pro: list[Stmt] = []
    for s in range(stages - 1):
        pro.append(If(E.binary("<", E.const(s), n), Seq(tuple(issue(E.const(s), E.const(s)))), None, loop.loc))
        pro.append(AsyncCommit())
    it = E.Var(k.name + "_i", k.dtype)
    nxt = it + (stages - 1)
    rest = [s for s in body if not any(s is p for p in producers)]
    cur_stage = it % stages
    new_body = [AsyncWait(stages - 2), Barrier(),
                *issue(E.binary("min", nxt, n - 1), nxt % stages),
                AsyncCommit()]
    for s in rest:
        new_body.append(staged(substitute(s, {k: start + it}), mine, cur_stage))
    ann: tuple[tuple[str, Any], ...] = (("pipelined", stages),)
    if prefetch and len(rest) == 1 and isinstance(rest[0], Gemm) and rest[0].A.buffer in bufs \
            and rest[0].B.buffer in bufs and rest[0].C.buffer.scope == "fragment":
        ann += (("tlx.prefetch_fragments", stages),)
    main = For(it, n, "serial", Seq(tuple(new_body)), None, ann, loop.loc)
    return Seq(tuple(pro) + (main, AsyncWait(0)))
