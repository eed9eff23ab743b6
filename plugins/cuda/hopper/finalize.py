"""The ``hopper_finalize`` stage (after sync insertion, sm_90a): what codegen needs of the Hopper
path.

- Before each barrier of a kernel with wgmma that a thread may reach with ordinary shared-memory
  stores not yet fenced: ``fence.proxy.async`` (shared memory written by ordinary stores and read
  next by wgmma needs it in the writing threads, backends.md A7; proxy_fences.py).
- Stages that only wgmma reads are released once per consumer warpgroup (elected_release.py); a
  persistent GEMM's epilogue may move into the next tile's k-loop (overlap_epilogue.py).
- Warp-specialized kernels: the consumers' barriers become ``bar.sync 1, consumers`` (the producer
  warpgroup never joins them), the block grows by the producer warpgroup and the kernel gets
  ``__launch_bounds__(threads, 1)`` (setmaxnreg needs an entry register cap).
- Two consumer warpgroups of a warp-specialized compute loop take turns issuing wgmma
  (pingpong.py).
- ``cuda.extra_headers``: tlx_hopper.h and the wgmma wrappers used; ``cuda.tmaps``: only the
  tensor maps the code uses.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ....core_ir import expr as E
from ....core_ir.stmt import If, Kernel, PrimFunc, Seq
from ....core_ir.visit import rewrite, walk
from ..lir import Barrier, Evaluate, Intrin, is_call
from ..perf_options import pass_configs
from .config import hopper_config
from .elected_release import elect_releases
from .header import WGMMA_FORMS, hopper_header, wgmma_source
from .lazy_waits import EARLY_KEY, lazy_waits
from .lazy_waits import KEY as LAZY
from .overlap_epilogue import overlap_epilogue
from .pingpong import pingpong, takes
from .proxy_fences import unfenced_barriers
from .tma import TmaSpec

_HOPPER_PREFIXES = ("tlx_wgmma", "tlx_mbar", "tlx_tma", "tlx_fence_proxy", "TLX_SETMAXNREG")


def hopper_finalize_stage(func: PrimFunc, ctx: Any) -> PrimFunc:
    names = {n.fn for n in walk(func.body) if isinstance(n, Intrin)}
    if not any(nm.startswith(_HOPPER_PREFIXES) for nm in names):
        ctx.data.pop("cuda.tmaps", None)
        return func
    ws = ctx.data.get("cuda.ws")
    fence = any(nm.startswith("tlx_wgmma") for nm in names)
    lc = ctx.data.get("cuda.lower")
    inflight = {id(a): (a, t) for a, t in getattr(lc, "wgmma_inflight", ())}.values()

    body = func.body
    cfg = hopper_config(ctx)
    if ws is not None and pass_configs(ctx).get(LAZY, True):
        body = lazy_waits(body, lambda loop: cfg.pingpong and takes(loop, ws["consumers"]),
                          pass_configs(ctx).get(EARLY_KEY, True))
    if ws is not None and cfg.pingpong:
        body = pingpong(body, ws["consumers"])
    body = overlap_epilogue(body, ctx)
    body = elect_releases(body, ctx)
    unfenced = unfenced_barriers(body, ctx) if fence else set()

    no_drain = Seq(())  # by identity: a drain dropped, and the branch that held it

    def fix(n: Any) -> Any:
        if isinstance(n, Barrier):
            bar: Any = n
            if ws is not None:
                bar = Evaluate(Intrin("tlx_named_bar_sync", (E.const(1), E.const(ws["consumers"]))), n.loc)
            if fence and id(n) not in unfenced:
                return Seq((Evaluate(Intrin("tlx_fence_proxy_async", ())), bar))
            return bar
        if not inflight and (is_call(n, "tlx_wgmma_drain") or isinstance(n, If) and n.then is no_drain):
            return no_drain  # the loop's gemm did not become a wgmma (an FMA loop): nothing to drain
        if is_call(n, "tlx_wgmma_drain"):
            fences = [Evaluate(Intrin("tlx_fence_regs", (acc, E.const(total)))) for acc, total in inflight]
            return Seq((Evaluate(Intrin("tlx_wgmma_wait0", ())), *fences))
        if isinstance(n, Kernel) and ws is not None:
            return dataclasses.replace(n, threads=(ws["consumers"] + 128,))
        return None

    body = rewrite(body, fix)
    if ws is not None:
        ctx.data["cuda.min_blocks"] = 1
    used = {id(n) for n in walk(body) if isinstance(n, E.Var)}
    specs: list[TmaSpec] = [s for s in ctx.data.get("cuda.tmaps", []) if id(s.var) in used]
    ctx.data["cuda.tmaps"] = specs
    wrappers = [wgmma_source(*WGMMA_FORMS[nm]) for nm in sorted(names) if nm in WGMMA_FORMS]
    ctx.data["cuda.extra_headers"] = [hopper_header(), *wrappers, *ctx.data.get("cuda.extra_headers", ())]
    return dataclasses.replace(func, body=body)
