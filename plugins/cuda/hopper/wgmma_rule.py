"""The layout rule of T.gemm on the wgmma path (sm_90a): when the gemm fits wgmma (fp16/bf16;
fp8, int8/uint8 (int32 accumulator) and float32 at TF32 precision with both operands K-major in
shared memory), its plan is
``GemmPlan("wgmma", m, n, k, wgm, wgn)`` (wgm × wgn warpgroups), the accumulator (and a register
A) get the wgmma fragments and the shared operands the panel layout (also for a tile annotated with
``make_swizzled_layout``, a request for some bank-conflict-free swizzle); otherwise the sm_80 rule
runs. Those dtypes with B stored K × N (``transpose_B=False``), which wgmma cannot read from shared
memory, run swapped: Cᵀ = Bᵀ·Aᵀ, the A tile (K-major) the shared operand and Bᵀ gathered into
registers (``GemmPlan.swap``; ``swapped_c_fragment``; pass config ``tlx.swap_operands``).
Installed by ``hopper/stages.py`` as ``ctx.data["cuda.gemm_rule"]``."""

from __future__ import annotations

import logging
from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Buffer, Region
from ....core_ir.tileops import Gemm
from ..layout import Fragment, local_map
from ..layout_inference import FP8_TYPES, INT8_TYPES, GemmPlan, where
from ..ptx_types import k_step
from .layout import PanelLayout, panel_layout, swapped_c_fragment, wgmma_a_fragment, wgmma_c_fragment

log = logging.getLogger("tilelang_x.cuda.layout")
_HALF = (dtypes.float16, dtypes.bfloat16)


def full_tile(r: Region) -> bool:
    """``r`` covers the last two dims of its buffer whole (leading dims: one index)."""
    shape = r.buffer.static_shape()
    if shape is None or len(shape) < 2:
        return False
    for d, (s, e) in enumerate(zip(r.starts, r.extents)):
        if d >= len(shape) - 2:
            if E.as_int(s) != 0 or E.as_int(e) != shape[d]:
                return False
        elif E.as_int(e) != 1:
            return False
    return True


def _compatible(have: Any, want: Any) -> bool:
    if have is None:
        return True
    if isinstance(have, Fragment) and isinstance(want, Fragment):
        n = list(range(len(have.dims)))
        return have.shape == want.shape and local_map(have, n, want) is not None and \
            local_map(want, n, have) is not None
    return have == want


def choose_warpgroups(m: int, n: int, nwg: int, policy: str, b_panel: int) -> tuple[int, int] | None:
    cands = []
    for wgm in range(1, nwg + 1):
        if nwg % wgm:
            continue
        wgn = nwg // wgm
        nn = n // wgn if n % wgn == 0 else 0
        if m % (64 * wgm) or not nn or nn % 8 or nn > 256 or (b_panel and nn % b_panel):
            continue
        cands.append((wgm, wgn))
    if not cands:
        return None
    if policy == "FullCol":
        return max(cands, key=lambda c: c[1])
    return max(cands, key=lambda c: c[0])


def operand_panels(st: Any, regions: tuple[Region, ...]) -> dict[Buffer, PanelLayout] | None:
    """The panel layouts of the shared tiles among ``regions``; ``None`` when one cannot have its
    panel layout (viewed, not a whole tile, no panel form, or another layout already than one a
    ``make_swizzled_layout`` request gave it)."""
    lays: dict[Buffer, PanelLayout] = {}
    for r in regions:
        if r.buffer.scope != "shared":
            continue
        if st.viewed(r.buffer):  # wgmma reads swizzled panels; a view needs the tile row-major
            return None
        shape = r.buffer.static_shape()
        lay = panel_layout(tuple(shape), r.buffer.dtype.bytes) if shape else None
        if lay is None or not full_tile(r) or not (r.buffer in st.requested or
                                                   _compatible(st.layouts.get(r.buffer), lay)):
            return None
        lays[r.buffer] = lay
    return lays


def set_panels(st: Any, lays: dict[Buffer, PanelLayout], origin: str, loc: Any) -> None:
    """Give the shared operands their panel layouts (``operand_panels``); a ``make_swizzled_layout``
    annotation yields, the panels being bank-conflict free too."""
    for buf, lay in lays.items():
        st.yield_request(buf)
        st.set(buf, lay, origin, loc)


def warpgroup_plan(st: Any, m: int, n: int, policy: str, b_panel: int, c: Buffer,
                   origin: str) -> tuple[tuple[int, int], Fragment] | None:
    """The (wgm, wgn) split of an M x N accumulator ``c`` over the block's warpgroups and its wgmma
    fragment; ``None`` when no split fits or ``c`` already has another layout."""
    wg = choose_warpgroups(m, n, st.threads // 128, policy, b_panel)
    if wg is None:
        return None
    want_c = wgmma_c_fragment(m, n, *wg, origin)
    return None if not _compatible(st.layouts.get(c), want_c) else (wg, want_c)


def _swapped_rule(st: Any, op: Gemm, m: int, n: int, k: int, tf32: bool) -> bool:
    """Plan a gemm with A [M, K] and B [K, N] in shared memory whose dtype wgmma reads K-major only
    as Cᵀ = Bᵀ·Aᵀ: the wgmma's M is C's N, its shared operand the A tile (K-major as a B operand),
    its register operand Bᵀ, which the threads gather from the B tile. The caller has checked that K
    is whole k-steps and the threads whole warpgroups."""
    c = op.C.buffer
    lays = operand_panels(st, (op.A, op.B))
    if lays is None:
        return False
    policy = {"FullRow": "FullCol", "FullCol": "FullRow"}.get(op.policy, op.policy)
    wg = choose_warpgroups(n, m, st.threads // 128, policy, 0)
    if wg is None:
        return False
    origin = f"T.gemm at {where(op.loc)} (wgmma, swapped operands)"
    want_c = swapped_c_fragment(m, n, *wg, origin)
    if not _compatible(st.layouts.get(c), want_c):
        return False
    log.debug("T.gemm at %s: %s with B stored [K, N] runs on wgmma as C^T = B^T A^T, each thread gathering its "
              "B^T registers from shared memory (B [N, K] with transpose_B=True reads both tiles by descriptor)",
              where(op.loc), op.A.buffer.dtype.name)
    st.gemm[id(op)] = GemmPlan("wgmma", n, m, k, *wg, tf32=tf32, swap=True)
    st.set(c, want_c, f"{origin} (accumulator)", op.loc)
    set_panels(st, lays, origin, op.loc)
    return True


def wgmma_rule(st: Any, op: Gemm, swap: bool = True) -> bool:
    """Plan ``op`` for wgmma and set its layouts in the layout-inference state ``st``; ``False``
    (nothing changed) when it does not fit. ``swap``: B [K, N] tiles of the K-major-only dtypes
    run as Cᵀ = Bᵀ·Aᵀ (``_swapped_rule``)."""
    m, n, k = (E.as_int(x) for x in op.mnk())
    a, b, c = op.A.buffer, op.B.buffer, op.C.buffer
    int8 = a.dtype in INT8_TYPES
    if m is None or n is None or k is None or c.scope != "fragment" or c.dtype != (dtypes.int32 if int8 else
                                                                                    dtypes.float32):
        return False
    if a.dtype != b.dtype or b.scope != "shared" or a.scope not in ("shared", "fragment"):
        return False
    fp8 = a.dtype in FP8_TYPES
    tf32 = st.tf32 and a.dtype == dtypes.float32
    if a.dtype not in _HALF and not fp8 and not tf32 and not int8:
        return False
    whole_steps = k % k_step(a.dtype.name) == 0 and st.threads % 128 == 0
    if (fp8 or tf32 or int8) and (op.trans_A or not op.trans_B or a.scope != "shared"):
        if swap and whole_steps and a.scope == "shared" and not op.trans_A and _swapped_rule(st, op, m, n, k, tf32):
            return True
        log.debug("T.gemm at %s: %s runs on mma.sync; wgmma reads %s tiles K-major only (A [M, K] in shared "
                  "memory, B [N, K] with transpose_B=True)", where(op.loc), a.dtype.name, "TF32" if tf32 else "8-bit")
        return False  # fp8, tf32 and integer wgmma read both operands K-major only
    if not whole_steps or (a.scope == "fragment" and op.trans_A):
        return False
    lays = operand_panels(st, (op.A, op.B))
    if lays is None or op.trans_A and 64 % lays[a].panel:
        return False
    origin = f"T.gemm at {where(op.loc)} (wgmma)"
    planned = warpgroup_plan(st, m, n, op.policy, 0 if op.trans_B else lays[b].panel, c, origin)
    if planned is None:
        return False
    wg, want_c = planned
    want_a = wgmma_a_fragment(m, k, *wg, origin) if a.scope == "fragment" else None
    if want_a is not None and not _compatible(st.layouts.get(a), want_a):
        return False
    st.gemm[id(op)] = GemmPlan("wgmma", m, n, k, *wg, tf32=tf32)
    st.set(c, want_c, f"{origin} (accumulator)", op.loc)
    if want_a is not None:
        st.set(a, want_a, f"{origin} (A operand)", op.loc)
    set_panels(st, lays, origin, op.loc)
    return True
