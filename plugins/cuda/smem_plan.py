"""Where each shared tile lives in the block's dynamic shared memory (the ``smem_plan`` stage,
read by codegen).

Tiles are laid out one after the other in allocation order. When that does not fit in the
target's shared memory, tiles that are never live at the same time share bytes, as TileLang's
allocator merges them (FlashAttention backward: the dK / dV staging tiles of the epilogue reuse
the loop's Q / dO tiles). Pass config ``tlx.merge_shared``: unset, share only when the tiles do not
fit; ``True``, always; ``False``, never (TileLang's ``tl.disable_shared_memory_reuse`` is
``False``, its ``tl.enable_aggressive_shared_memory_merge`` ``True``).

A tile's lifetime is the span of the kernel body's top-level statements that access it (a loop or
a lowered tile op is one statement), so a tile used in the pipelined loop and one used in the
epilogue after it do not overlap. Before the first statement of a tile that reuses bytes of an
earlier one, every thread of the block meets at a barrier, placed at the top level (never under a
condition), so no thread touches the later tile, asynchronous copies into it included, while
another still reads or writes the earlier one. Pipelines wait for their own copies before their
loop ends and wgmma groups complete inside the statement that issues them, so nothing asynchronous
still touches the earlier tile by then. Not shared: tiles allocated below the top level, the staged
epilogue's warp-private slots (TMA stores read them after the statement that wrote them), 8-byte
words (mbarriers: PTX requires ``mbarrier.inval`` before their memory is reused), and every tile of
a kernel with ``T.ws`` regions (whose statements run side by side, not in order) or warp-specialized
by the compiler (its tiles are all used inside the one statement that splits the roles, and its
barriers become the consumers' alone).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

from ...core_ir import dtypes
from ...core_ir.buffer import Buffer
from ...core_ir.errors import BackendNotImplementedError
from ...core_ir.stmt import Alloc, Annotate, PrimFunc, Seq, Stmt, WarpSpecialize
from ...core_ir.visit import flat_seq, rewrite, walk
from .layout import SharedLayout
from .layout_inference import find_kernel
from .lir import Barrier
from .perf_options import pass_configs
from .target import CAPABILITIES

log = logging.getLogger("tilelang_x.cuda.smem")

KEY = "tlx.merge_shared"
PLAN = "cuda.smem_plan"


@dataclasses.dataclass(frozen=True)
class SmemPlan:
    offsets: dict[int, int]  # id(tile) -> byte offset in the block's dynamic shared memory
    sizes: dict[int, int]  # id(tile) -> its bytes
    total: int  # bytes, a multiple of 16
    reuse_at: frozenset[int] = frozenset()  # top-level statements before which the block meets


def _footprint(b: Buffer, layouts: dict[Buffer, Any], aligns: dict[Buffer, int]) -> tuple[int, int]:
    """(bytes, alignment) of shared tile ``b``: swizzled tiles sit on 1024-byte boundaries (the
    swizzle pattern repeats there), tiles TMA reads or writes as the pipeline says."""
    shape = b.static_shape()
    if shape is None:
        raise BackendNotImplementedError(f"shared tile `{b.name}` needs a constant shape", loc=b.loc)
    lay = layouts.get(b)
    align = 1024 if isinstance(lay, SharedLayout) and lay.swizzle != "none" else aligns.get(b, 16)
    return math.prod(shape) * b.dtype.bytes, align


def _up(x: int, align: int) -> int:
    return (x + align - 1) // align * align


def _end(offsets: dict[int, int], nbytes: dict[int, int]) -> int:
    """The bytes the tiles at ``offsets`` span, rounded up to 16."""
    return _up(max((off + nbytes[k] for k, off in offsets.items()), default=0), 16)


def _lifetimes(stmts: list[Stmt], tiles: set[int]) -> dict[int, tuple[int, int]]:
    """The first and last top-level statement that accesses each of ``tiles`` (an access through a
    view is one to the tile owning its memory)."""
    spans: dict[int, tuple[int, int]] = {}
    for i, s in enumerate(stmts):
        if isinstance(s, (Alloc, Annotate)):
            continue
        for n in walk(s):
            buf = getattr(n, "buffer", None)
            if isinstance(buf, Buffer) and id(buf.storage) in tiles:
                lo, _ = spans.get(id(buf.storage), (i, i))
                spans[id(buf.storage)] = (lo, i)
    return spans


def _sequential(allocs: list[Buffer], sizes: dict[int, tuple[int, int]]) -> dict[int, int]:
    offsets, off = {}, 0
    for b in allocs:
        size, align = sizes[id(b)]
        off = _up(off, align)
        offsets[id(b)] = off
        off += size
    return offsets


def _first_fit(allocs: list[Buffer], sizes: dict[int, tuple[int, int]],
               spans: dict[int, tuple[int, int]]) -> dict[int, int]:
    """Each tile, in allocation order, at the lowest aligned offset whose bytes no tile placed
    before it and live at the same time holds (tiles without a span are live throughout)."""
    offsets: dict[int, int] = {}
    forever = (-1, 1 << 30)
    for b in allocs:
        size, align = sizes[id(b)]
        lo, hi = spans.get(id(b), forever)
        taken = sorted((offsets[id(p)], offsets[id(p)] + sizes[id(p)][0]) for p in allocs if id(p) in offsets
                       and not (spans.get(id(p), forever)[1] < lo or hi < spans.get(id(p), forever)[0]))
        off = 0
        for start, end in taken:
            if _up(off, align) + size <= start:
                break
            off = max(off, end)
        offsets[id(b)] = _up(off, align)
    return offsets


def _mergeable(b: Buffer, private: set[int]) -> bool:
    return id(b) not in private and b.dtype != dtypes.uint64


def plan_shared(kernel: Any, ctx: Any, merge: bool | None = None) -> SmemPlan:
    """The offsets of ``kernel``'s shared tiles; ``merge``: whether tiles never live at once may
    share bytes (``None``: only when they do not fit in the target's shared memory)."""
    layouts = ctx.data.get("cuda.layouts", {})
    aligns = ctx.data.get("cuda.smem_align", {})
    allocs = [n.buffer for n in walk(kernel.body) if isinstance(n, Alloc) and n.buffer.scope == "shared"]
    sizes = {id(b): _footprint(b, layouts, aligns) for b in allocs}
    nbytes = {k: size for k, (size, _) in sizes.items()}
    offsets = _sequential(allocs, sizes)
    total = _end(offsets, nbytes)
    limit = CAPABILITIES.get(getattr(ctx.target, "arch", None) or "", {}).get("max_smem")
    if merge is None:
        merge = isinstance(limit, int) and total > limit
    # warp-specialized kernels: hopper_finalize makes every barrier one of the consumers alone
    specialized = ctx.data.get("cuda.ws") is not None or any(isinstance(n, WarpSpecialize) for n in walk(kernel.body))
    if not merge or specialized:
        return SmemPlan(offsets, nbytes, total)
    stmts = flat_seq(kernel.body)
    lc = ctx.data.get("cuda.lower")
    private = set(getattr(lc, "warp_private", ()))
    top = {id(s.buffer) for s in stmts if isinstance(s, Alloc) and s.buffer.scope == "shared"}
    candidates = {id(b) for b in allocs if id(b) in top and _mergeable(b, private)}
    spans = _lifetimes(stmts, candidates)
    merged = _first_fit(allocs, sizes, spans)
    merged_total = _end(merged, nbytes)
    if merged_total >= total:
        return SmemPlan(offsets, nbytes, total)
    reuse_at = frozenset(spans[id(b)][0] for b in allocs if id(b) in spans and any(
        id(a) in spans and spans[id(a)][1] < spans[id(b)][0] and _overlap(merged, nbytes, a, b) for a in allocs))
    log.debug("shared tiles reuse each other's bytes: %d bytes instead of %d (%s)", merged_total, total,
              ", ".join(f"{b.name} at {merged[id(b)]}" for b in allocs))
    return SmemPlan(merged, nbytes, merged_total, reuse_at)


def _overlap(offsets: dict[int, int], nbytes: dict[int, int], a: Buffer, b: Buffer) -> bool:
    return offsets[id(a)] < offsets[id(b)] + nbytes[id(b)] and offsets[id(b)] < offsets[id(a)] + nbytes[id(a)]


def merge_setting(configs: dict[str, Any]) -> bool | None:
    """``tlx.merge_shared`` from the kernel's pass configs, or TileLang's keys for it."""
    if configs.get(KEY) is not None:
        return bool(configs[KEY])
    if configs.get("tl.disable_shared_memory_reuse"):
        return False
    return True if configs.get("tl.enable_aggressive_shared_memory_merge") else None


def smem_plan_stage(func: PrimFunc, ctx: Any) -> PrimFunc:
    kernel = find_kernel(func.body)
    if kernel is None:
        return func
    plan = ctx.data[PLAN] = plan_shared(kernel, ctx, merge_setting(pass_configs(ctx)))
    if not plan.reuse_at:
        return func
    stmts: list[Stmt] = []
    for i, s in enumerate(flat_seq(kernel.body)):
        stmts += [Barrier(), s] if i in plan.reuse_at else [s]
    new = dataclasses.replace(kernel, body=Seq(tuple(stmts), getattr(kernel.body, "loc", None)))
    return dataclasses.replace(func, body=rewrite(func.body, lambda n: new if n is kernel else None))
