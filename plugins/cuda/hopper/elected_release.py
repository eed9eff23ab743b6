"""One release per consumer warpgroup of a warp-specialized pipeline stage (sm_90a, after lowering).

The pipeline (pipeline.py) has every consumer thread arrive on a stage's empty barrier once the
stage is consumed: a thread's wait for its wgmma group only says that *its* reads are done, and an
ordinary load by one thread says nothing of the others'. When the stage's tiles are read by wgmma
alone (the operands of its descriptors), the reads of a warpgroup finish together: a
``wgmma.wait_group`` in one thread completes the warpgroup's operation, so one thread of each
warpgroup may release the stage for all of it, as CUTLASS's pipelines do. Here each barrier whose
stage qualifies gets one arrival per consumer warpgroup (of each peer, with multicast) instead of
one per thread, from the thread with ``tx % 128 == 0`` (``== r`` for peer ``r``), predicated so
that the warps stay converged (a branch on the lane made ptxas keep the barrier address out of the
uniform registers, session 8). Switch: pass config ``tlx.elected_release`` (default on).
H200 (2026-11-30, ``bench/variants.py gemm``, 6 rounds, ratio to cuBLAS, L2 flushed / back to
back): GEMM 4096³ 1.003 / 0.994 vs 1.001 and 1.000 / 0.987 and 0.988 per thread, 8192³ 1.027 /
1.024 vs 1.010 and 1.016 / 1.009 and 1.009.
"""

from __future__ import annotations

from typing import Any

from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.stmt import Alloc, Stmt
from ....core_ir.visit import rewrite, walk
from ..lir import THREAD, Evaluate, Intrin, SmemAddr, is_call
from ..perf_options import pass_configs

KEY = "tlx.elected_release"
#: ctx.data key: the pipeline's (empty barrier, the tiles its stage holds, consumer threads) triples
RELEASES = "cuda.ws_releases"
_WARPGROUP = 128
#: intrinsics whose shared-memory addresses are read by wgmma (descriptors) or written by TMA loads
_ASYNC_USERS = ("tlx_wgmma_desc", "tlx_tma_load")


def _other_uses(body: Stmt) -> set[int]:
    """The buffers (ids) that ``body`` touches other than through the addresses that descriptors
    and TMA loads take (one pre-order walk: an intrinsic comes before its arguments)."""
    async_addrs: set[int] = set()
    others: set[int] = set()
    for n in walk(body):
        if isinstance(n, Intrin) and n.fn.startswith(_ASYNC_USERS):
            async_addrs.update(id(a) for arg in n.args for a in walk(arg) if isinstance(a, SmemAddr))
        elif not isinstance(n, Alloc) and getattr(n, "buffer", None) is not None and id(n) not in async_addrs:
            others.add(id(n.buffer))
    return others


def _on(n: Any, bar: Buffer) -> bool:
    return isinstance(n.args[0], SmemAddr) and n.args[0].buffer is bar


def elect_releases(body: Stmt, ctx: Any) -> Stmt:
    """``body`` with the qualifying stages released once per consumer warpgroup."""
    releases = ctx.data.pop(RELEASES, [])
    if not releases or not pass_configs(ctx).get(KEY, True):
        return body
    others = _other_uses(body)
    bars = {id(bar): bar for bar, tiles, consumers in releases
            if consumers % _WARPGROUP == 0 and not any(id(t) in others for t in tiles)}
    if not bars:
        return body
    idx = E.binary("&", THREAD, E.const(_WARPGROUP - 1))

    def fix(n: Any) -> Any:
        if not isinstance(n, Evaluate) or not isinstance(n.value, Intrin) or not n.value.args:
            return None
        call = n.value
        if not any(_on(call, b) for b in bars.values()):
            return None
        if (is_call(n, "tlx_mbar_arrive") and len(call.args) == 1) or \
                (is_call(n, "tlx_mbar_arrive_peers") and len(call.args) == 3):
            return Evaluate(Intrin(call.fn, (*call.args, idx)), n.loc)
        if is_call(n, "tlx_mbar_init"):
            count = E.as_int(call.args[1])
            assert count is not None and count % _WARPGROUP == 0, count
            return Evaluate(Intrin(call.fn, (call.args[0], E.const(count // _WARPGROUP))), n.loc)
        return None

    return rewrite(body, fix)
