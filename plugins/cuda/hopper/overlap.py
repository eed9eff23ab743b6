"""Score-gemm lookahead on the plain TMA pipeline (sm_90a; pass_configs key
``tlx.gemm_softmax_overlap``): the FlashAttention-shaped loop

    for k: pre(k) -> S; S += A @ B_k (G1); mid(k) reads S; C += X @ V_k (G2)

becomes a loop whose iteration ``it`` issues G1 of iteration ``it + 1`` (into a second register
set ``S_nx``, its wgmma group left in flight) before running ``mid(it)`` and G2 of ``it``, so the
tensor cores compute the next scores while the CUDA cores run the softmax. After G2's
``wait_group 0`` both groups are complete; the accumulators of ``S_nx`` are fenced and copied to
``S``. Iteration 0's G1 runs before the loop.

The loads split in two sets with their own mbarriers: the tiles G1 (and ``pre``) read are loaded
``S`` iterations ahead (tile ``it + S`` at the top of iteration ``it``: its stage held tile ``it``,
whose G1 completed in iteration ``it - 1``), the others ``S - 1`` ahead as before. The barrier at
the top of each iteration orders every thread's last use of a stage before its reload.

Only loops of that exact shape qualify (``match``): G1 a shared × shared gemm into a fragment
``S``; ``pre`` writes only ``S``; nothing after G1 writes what ``pre`` or G1 read (other than
``S``); G2 is the last statement and does not touch ``S``; every loaded tile is read by one side
only; ``S`` is not used after the loop. Anything else keeps the plain pipeline.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Buffer, Region
from ....core_ir.stmt import Alloc, For, If, Seq, Stmt, Store
from ....core_ir.tileops import Copy, CumSum, Fill, Gemm, Reduce, TileOp
from ....core_ir.visit import rewrite, substitute, walk
from ..lir import THREAD, Barrier
from ..perf_options import pass_configs
from ..pipelining import num_stages
from .tma import TmaCopy

KEY = "tlx.gemm_softmax_overlap"


def enabled(ctx: Any) -> bool:
    """Off unless pass_configs sets ``KEY`` (also through ``TILELANG_X_PASS_CONFIGS``, for A/B
    benchmark runs)."""
    configs = pass_configs(ctx)
    return bool(configs.get(KEY, False))


def _mentions(s: Stmt) -> set[Buffer]:
    out: set[Buffer] = set()
    for n in walk(s):
        if isinstance(n, (E.Load, Region, Store, Alloc)):
            out.add(n.buffer)
    return out


def _writes(s: Stmt) -> set[Buffer] | None:
    """Buffers ``s`` writes; ``None`` for statements this module does not know."""
    out: set[Buffer] = set()
    for n in walk(s):
        if isinstance(n, Store):
            out.add(n.buffer)
        elif isinstance(n, Gemm):
            out.add(n.C.buffer)
        elif isinstance(n, (Copy, Fill, Reduce, CumSum)):
            out.add(n.dst.buffer)
        elif isinstance(n, TileOp) or isinstance(n, Alloc):
            return None
    return out


@dataclasses.dataclass
class Plan:
    pre: list[Stmt]
    g1: Gemm
    mid: list[Stmt]
    g2: Gemm
    first: list[TmaCopy]  # tiles read by pre / G1
    second: list[TmaCopy]  # tiles read by mid / G2


def match(body: list[Stmt], plans: list[TmaCopy], outside: set[Buffer], stages: int) -> Plan | None:
    """``body``: the loop's statements without the loads; ``outside``: the buffers the kernel
    reads or writes outside the loop."""
    gemms = [i for i, s in enumerate(body) if isinstance(s, Gemm)]
    if stages < 2 or len(gemms) != 2 or gemms[1] != len(body) - 1:
        return None
    g1, g2 = body[gemms[0]], body[gemms[1]]
    assert isinstance(g1, Gemm) and isinstance(g2, Gemm)
    pre, mid = body[:gemms[0]], body[gemms[0] + 1:gemms[1]]
    acc = g1.C.buffer
    if acc.scope != "fragment" or g1.A.buffer.scope != "shared" or g1.B.buffer.scope != "shared" \
            or g1.wg_wait != 0 or g2.wg_wait != 0 or acc.static_shape() is None:
        return None
    if any(isinstance(n, For) and n.kind != "parallel" for s in pre for n in walk(s)):
        return None
    side1: set[Buffer] = set().union(*(_mentions(s) for s in pre + [g1]))
    side2: set[Buffer] = set().union(*(_mentions(s) for s in mid + [g2]))
    for s in pre:
        w = _writes(s)
        if w is None or w != {acc}:
            return None
    for s in mid + [g2]:
        w = _writes(s)
        if w is None or (w & side1) - {acc}:
            return None
    if acc in _mentions(g2) or acc in outside:
        return None
    first = [p for p in plans if p.op.dst.buffer in side1]
    second = [p for p in plans if p.op.dst.buffer not in side1]
    if not first or any(p.op.dst.buffer in side2 for p in first):
        return None
    return Plan(pre, g1, mid, g2, first, second)


def _rename(s: Stmt, old: Buffer, new: Buffer) -> Stmt:
    def fn(x: Any) -> Any:
        if isinstance(x, Region) and x.buffer is old:
            return Region(new, x.starts, x.extents)
        if isinstance(x, E.Load) and x.buffer is old:
            return E.Load(new, x.indices, x.loc)
        if isinstance(x, Store) and x.buffer is old:
            return Store(new, x.indices, fn(x.value) or x.value, x.loc)
        return None

    return rewrite(s, fn)


def _copy_all(src: Buffer, dst: Buffer) -> Stmt:
    shape = dst.static_shape()
    assert shape is not None
    idx = [E.Var(f"ov_{d}", dtypes.int32) for d in range(len(shape))]
    body: Stmt = Store(dst, tuple(idx), E.Load(src, tuple(idx)))
    for v, n in reversed(list(zip(idx, shape))):
        body = For(v, E.const(n), "parallel", body)
    return body


def used_outside(func_body: Stmt, loop: For) -> set[Buffer]:
    rest = rewrite(func_body, lambda x: Seq(()) if x is loop else None)
    return {n.buffer for n in walk(rest) if isinstance(n, (E.Load, Region, Store))}


def overlap_loop(loop: For, plan: Plan, cx: Any, helpers: Any) -> Stmt:
    """The rewritten loop (``helpers``: hopper_pipeline's ``_call``, ``_bar``, ``_init``,
    ``_issue``, ``_staged``)."""
    h = helpers
    stages = num_stages(loop)
    cx.stage_buffers(plan.first + plan.second, stages)
    kfull = Buffer("tlx_kfull", (stages,), dtypes.uint64, "shared")
    vfull = Buffer("tlx_vfull", (stages,), dtypes.uint64, "shared")
    k, n = loop.var, loop.extent
    start = loop.start if loop.start is not None else E.const(0)
    it = E.Var(k.name + "_i", k.dtype)
    lead = E.binary("==", THREAD, 0)
    acc = plan.g1.C.buffer
    nxt = Buffer(acc.name + "_nx", tuple(acc.shape), acc.dtype, "fragment", acc.loc)

    def lt(a: E.Expr, b: E.Expr) -> E.Expr:
        return E.binary("<", a, b)

    def issue(ps: list[TmaCopy], bar: Buffer, j: E.Expr) -> Stmt:
        s = j % stages
        return If(lt(j, n), If(lead, Seq(tuple(h._issue(ps, cx.multi, k, start + j, s, h._bar(bar, s)))), None,
                               loop.loc), None, loop.loc)

    def wait(bar: Buffer, j: E.Expr) -> Stmt:
        return h._call("tlx_mbar_wait", h._bar(bar, j % stages), (j // stages) % 2)

    def first_half(j: E.Expr, into: Buffer, wg_wait: int) -> list[Stmt]:
        g1 = dataclasses.replace(plan.g1, wg_wait=wg_wait)
        out = [h._staged(substitute(s, {k: start + j}), cx.multi, j % stages) for s in plan.pre + [g1]]
        return out if into is acc else [_rename(s, acc, into) for s in out]

    out: list[Stmt] = [Alloc(nxt)] + h._init([(kfull, 1), (vfull, 1)], stages) + [Barrier()]
    out += [issue(plan.first, kfull, E.const(s)) for s in range(stages)]
    out += [issue(plan.second, vfull, E.const(s)) for s in range(stages - 1)]
    out.append(If(lt(E.const(0), n), Seq((wait(kfull, E.const(0)), *first_half(E.const(0), acc, 0))), None, loop.loc))
    more = lt(it + 1, n)
    second = [h._staged(substitute(s, {k: start + it}), cx.multi, it % stages) for s in plan.mid + [plan.g2]]
    body: list[Stmt] = [
        Barrier(),
        issue(plan.first, kfull, it + stages),
        issue(plan.second, vfull, it + (stages - 1)),
        If(more, Seq((wait(kfull, it + 1), *first_half(it + 1, nxt, -1))), None, loop.loc),
        wait(vfull, it),
        *second,
        h._call("tlx_wgmma_drain"),  # wait_group 0 (a no-op after G2's) and fence S_nx's registers
        If(more, _copy_all(nxt, acc), None, loop.loc),
    ]
    out.append(For(it, n, "serial", Seq(tuple(body)), None, (("pipelined", stages),), loop.loc))
    return Seq(tuple(out))
