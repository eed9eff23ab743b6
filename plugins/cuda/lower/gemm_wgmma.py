"""T.gemm on the wgmma path (sm_90a, plan kind ``wgmma``): each warpgroup issues
``wgmma.mma_async`` m64nNk16 steps (k32 for fp8, k8 for TF32, whose operands the tensor cores
truncate from the float32 in shared memory) over its rows (64 per step) and its N/wgn columns, B (and A,
unless it is a register fragment) read from shared memory through descriptors of the panel
layout (hopper/layout.py). Sequence: fence the accumulators, ``wgmma.fence``, all k steps,
commit, wait for 0 groups, fence the accumulators again (so no access moves across). With
``wg_wait = n > 0`` (set by the warp-specialized pipeline on a gemm-only loop) it waits for all but
n groups and the loop's end drains the rest.

A swapped plan (``GemmPlan.swap``: TF32 or 8-bit operands with B stored K × N) computes Cᵀ = Bᵀ·Aᵀ:
the A tile is the shared (K-major) operand, and each thread gathers its registers of Bᵀ from the B
tile (``_gather_bt``, rows permuted by ``swapped_row``). The k-steps form two wgmma groups, the
second's registers gathered while the first runs; with groups in flight across calls (``wg_wait``),
a group first waits for the same group of the previous call, the last to read those registers."""

from __future__ import annotations

from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Buffer, Region
from ....core_ir.stmt import Alloc, Seq, Stmt
from ....core_ir.tileops import Gemm
from ..hopper.header import wgmma_name
from ..hopper.layout import DESC_MODE, PanelLayout, swapped_row
from ..layout_inference import GemmPlan
from ..lir import THREAD, U32, Evaluate, Intrin, PtrTo, SmemAddr
from ..nests import region_index
from ..ptx_types import k_step


def _call(fn: str, *args: E.Expr, dtype: Any = dtypes.int32) -> Intrin:
    return Intrin(fn, tuple(E.const(a) if isinstance(a, int) else a for a in args), dtype)


def _desc(r: Region, lay: PanelLayout, k_major: bool, mn0: E.Expr, k0: int) -> Intrin:
    """Descriptor of the operand sub-tile starting at MN index ``mn0`` and K index ``k0``."""
    rows, w, eb = lay.shape[-2], lay.panel, lay.elem_bytes
    panel_bytes = rows * w * eb
    base = SmemAddr(r.buffer, tuple(r.starts), "r")
    if k_major:  # rows are M (or N), columns K
        off = mn0 * (w * eb) + ((k0 // w) * panel_bytes + (k0 % w) * eb)
        lbo = 16
    else:  # rows are K, columns M (or N)
        off = (mn0 // w) * panel_bytes + k0 * w * eb if not isinstance(mn0, E.Const) or mn0.value else \
            E.const(k0 * w * eb)
        lbo = panel_bytes
    return _call("tlx_wgmma_desc", base, off, lbo, 8 * w * eb, DESC_MODE[lay.span], dtype=dtypes.uint64)


def _gather_bt(op: Gemm, af: Buffer, m0: E.Expr, mi_n: int, ki_n: int, kk: int, kstep: int) -> list[Stmt]:
    """The registers of Bᵀ (rows: N, the wgmma's M) of k-step ``kk`` for every m64 block of a swapped
    gemm, from the B tile [K, N]: register r of block mi holds row 16w + g + 8 (r % 2) (C's column
    ``swapped_row``), k (kstep / 2) (r // 2) + the lane's run, as a register A operand does
    (backends.md A6). A thread's columns are adjacent: one 8-byte load per k (16-byte for two m64
    blocks) for TF32 (not rounded: wgmma truncates, as it does the A tile); 2 (4) bytes of each of 4
    rows, transposed, for 8-bit types."""
    lane = THREAD % 32
    warp, g = (THREAD // 32) % 4, lane // 4
    eight_bit = op.B.buffer.dtype.bits == 8
    run = 4 if eight_bit else 1  # k values a register holds
    paired = mi_n % 2 == 0
    out: list[Stmt] = []
    for mi in range(0, mi_n, 2 if paired else 1):
        n = m0 + swapped_row(warp, g, mi, 0, mi_n)
        for half in (0, 1):
            k = kk * kstep + half * (kstep // 2) + (lane % 4) * run
            # registers of block mi (and, paired, of block mi + 1): rows h = 0, 1 of this half of the k-step
            dst = [PtrTo(af, (E.const((b * ki_n + kk) * 4 + half * 2),), "w") for b in (mi, mi + 1)[:1 + paired]]
            rows = [PtrTo(op.B.buffer, region_index(op.B, (k + j if j else k, n)), "r") for j in range(run)]
            fn = {(True, True): "tlx_ld_b4x4t", (True, False): "tlx_ld_b2x4t", (False, True): "tlx_ld_b32x4",
                  (False, False): "tlx_ld_b32x2"}[eight_bit, paired]
            out.append(Evaluate(_call(fn, *dst, *rows)))
    return out


def lower_wgmma(op: Gemm, lc: Any) -> Stmt:
    plan: GemmPlan = lc.gemm[id(op)]
    wgm, wgn = plan.wm, plan.wn
    a = op.A.buffer
    kstep = k_step(a.dtype.name)
    mi_n, nn, ki_n = plan.m // (64 * wgm), plan.n // wgn, plan.k // kstep
    c_loc = lc.local_of(op.C.buffer)
    total = mi_n * nn // 2
    wg = THREAD // 128
    m0 = (wg // wgn) * (plan.m // wgm) if wgm > 1 else E.const(0)
    n0 = (wg % wgn) * nn if wgn > 1 else E.const(0)
    regs_a = a.scope == "fragment" or plan.swap
    shared_b = op.A if plan.swap else op.B
    b_k_major = plan.swap or op.trans_B
    fn = wgmma_name(nn, a.dtype.name, regs_a, 0 if plan.swap else int(op.trans_A), int(not b_k_major))
    lay_b: PanelLayout = lc.layouts[shared_b.buffer]
    out: list[Stmt] = []
    af: Buffer | None = None
    if regs_a:
        af = Buffer(lc.fresh("a_regs"), (mi_n * ki_n * 4,), U32, "local")
        out.append(Alloc(af))
    if regs_a and not plan.swap:
        a_loc = lc.local_of(a)
        pack = "tlx_afrag_h" if a.dtype == dtypes.float16 else "tlx_afrag_b"
        for mi in range(mi_n):
            for kk in range(ki_n):
                j = mi * ki_n + kk
                regs, halves = PtrTo(af, (E.const(j * 4),), "w"), PtrTo(a_loc, (E.const(j * 8),), "r")
                out.append(Evaluate(_call(pack, regs, halves)))
    acc = PtrTo(c_loc, (E.const(0),), "rw")
    out.append(Evaluate(_call("tlx_fence_regs", acc, total)))
    # swapped: two groups of k-steps (one per k-step when their count is odd); the second's gather
    # overlaps the first's wgmma. H200, TF32 4096³ / 8192³ (2026-11-30, bench/gemm.py, ratio to
    # cuBLAS): two groups 1.035 / 0.954, one per k-step (4) 0.963 / 0.870, one 0.972 / 0.924.
    per_group = ki_n // 2 if plan.swap and ki_n % 2 == 0 else 1 if plan.swap else ki_n
    for kk in range(ki_n):
        if plan.swap and kk % per_group == 0:
            assert af is not None
            if op.wg_wait != 0:  # this group of the previous call is the last to read these registers
                out.append(Evaluate(_call("TLX_WGMMA_WAIT", ki_n // per_group - 1)))
            for j in range(per_group):
                out += _gather_bt(op, af, m0, mi_n, ki_n, kk + j, kstep)
        if kk % per_group == 0:
            out.append(Evaluate(_call("tlx_wgmma_arrive")))
        k0 = kk * kstep
        desc_b = _desc(shared_b, lay_b, b_k_major, n0, k0)
        scale = 0 if op.clear_accum and kk == 0 else 1
        for mi in range(mi_n):
            d = PtrTo(c_loc, (E.const(mi * nn // 2),), "rw")
            row0 = m0 + mi * 64 if mi else m0
            if regs_a:
                assert af is not None
                a_arg: E.Expr = PtrTo(af, (E.const((mi * ki_n + kk) * 4),), "r")
            else:
                a_arg = _desc(op.A, lc.layouts[a], not op.trans_A, row0, k0)
            out.append(Evaluate(_call(fn, d, a_arg, desc_b, scale), op.loc))
        if kk % per_group == per_group - 1:
            out.append(Evaluate(_call("tlx_wgmma_commit")))
    if op.wg_wait == 0:
        out.append(Evaluate(_call("tlx_wgmma_wait0")))
        out.append(Evaluate(_call("tlx_fence_regs", acc, total)))
    else:  # groups stay in flight: a later ``tlx_wgmma_drain`` waits and fences (hopper_finalize.py)
        if op.wg_wait > 0 and not plan.swap:  # swapped: the waits above keep one call's groups in flight
            out.append(Evaluate(_call("TLX_WGMMA_WAIT", op.wg_wait)))
        lc.__dict__.setdefault("wgmma_inflight", []).append((acc, total))
    return Seq(tuple(out))
