"""T.gemm. fp16/bf16 inputs with an fp32 fragment accumulator: ldmatrix + mma.sync.m16n8k16 per
warp tile (backends.md A1/A2 recipes for every transpose case; A may be a register fragment in
the A-operand layout). Anything else: a per-element FMA loop over the accumulator's layout."""

from __future__ import annotations

from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Buffer, Region
from ....core_ir.stmt import Alloc, For, Seq, Stmt, Store
from ....core_ir.tileops import Gemm
from ..layout_inference import GemmPlan
from ..lir import THREAD, U32, Evaluate, Intrin, PtrTo, SmemAddr


def _unroll(var: E.Var, n: int, body: Stmt) -> Stmt:
    return For(var, E.const(n), "unroll", body)


def tile_index(r: Region, a: E.Expr, b: E.Expr) -> tuple[E.Expr, ...]:
    """Buffer indices of element (a, b) of the 2-d tile ``r`` (unit dims take their start)."""
    out = []
    it = iter((a, b))
    for start, ext in zip(r.starts, r.extents):
        if E.as_int(ext) == 1:
            out.append(start)
        else:
            x = next(it)
            out.append(x if E.as_int(start) == 0 else start + x)
    return tuple(out)


def lower_gemm(op: Gemm, lc: Any) -> Stmt:
    plan: GemmPlan = lc.gemm[id(op)]
    c_loc = lc.local_of(op.C.buffer)
    pre: list[Stmt] = []
    if op.clear_accum:
        z = E.Var(lc.fresh("z"))
        pre.append(_unroll(z, c_loc.shape[0].value, Store(c_loc, (z,), E.cast(E.const(0), c_loc.dtype))))
    if plan.kind == "mma":
        return Seq(tuple(pre) + (_mma(op, plan, lc, c_loc),))
    return Seq(tuple(pre) + (_fma(op, plan, lc, c_loc),))


def _mma(op: Gemm, plan: GemmPlan, lc: Any, c_loc: Buffer) -> Stmt:
    wm, wn = plan.wm, plan.wn
    mi_n, ni_n, ki_n = plan.m // (16 * wm), plan.n // (8 * wn), plan.k // 16
    lane = THREAD % 32
    warp = THREAD // 32
    row0 = (warp // wn) * (plan.m // wm) if wm > 1 else E.const(0)
    col0 = (warp % wn) * (plan.n // wn) if wn > 1 else E.const(0)
    af = Buffer(lc.fresh("a_frag"), (mi_n * 4,), U32, "local")
    bf = Buffer(lc.fresh("b_frag"), (ni_n * 2,), U32, "local")
    kk, mi, ni, nj = (E.Var(lc.fresh(x)) for x in ("kk", "mi", "ni", "nj"))
    suffix = "f16" if op.A.buffer.dtype == dtypes.float16 else "bf16"
    # A operand
    if op.A.buffer.scope == "fragment":
        a_loc = lc.local_of(op.A.buffer)
        fn = "tlx_afrag_h" if suffix == "f16" else "tlx_afrag_b"
        load_a = Evaluate(Intrin(fn, (PtrTo(af, (mi * 4,), "w"), PtrTo(a_loc, ((mi * ki_n + kk) * 8,), "r"))))
    elif not op.trans_A:
        m = row0 + mi * 16 + lane % 16
        k = kk * 16 + (lane // 16) * 8
        addr = SmemAddr(op.A.buffer, tile_index(op.A, m, k))
        load_a = Evaluate(Intrin("tlx_ldsm_x4", (PtrTo(af, (mi * 4,), "w"), addr)))
    else:
        grp = lane // 8
        k = kk * 16 + (grp // 2) * 8 + lane % 8
        m = row0 + mi * 16 + (grp % 2) * 8
        addr = SmemAddr(op.A.buffer, tile_index(op.A, k, m))
        load_a = Evaluate(Intrin("tlx_ldsm_x4_t", (PtrTo(af, (mi * 4,), "w"), addr)))
    # B operand: pairs of n8 atoms with x4, a last odd atom with x2
    b_loads: list[Stmt] = []
    pairs = ni_n // 2
    if pairs:
        if not op.trans_B:
            k = kk * 16 + lane % 16
            n = col0 + nj * 16 + (lane // 16) * 8
            call = Intrin("tlx_ldsm_x4_t", (PtrTo(bf, (nj * 4,), "w"), SmemAddr(op.B.buffer, tile_index(op.B, k, n))))
        else:
            n = col0 + nj * 16 + (lane // 16) * 8 + lane % 8
            k = kk * 16 + ((lane // 8) % 2) * 8
            call = Intrin("tlx_ldsm_x4", (PtrTo(bf, (nj * 4,), "w"), SmemAddr(op.B.buffer, tile_index(op.B, n, k))))
        b_loads.append(_unroll(nj, pairs, Evaluate(call)))
    if ni_n % 2:
        last = ni_n - 1
        if not op.trans_B:
            k = kk * 16 + lane % 16
            n = col0 + last * 8
            call = Intrin("tlx_ldsm_x2_t", (PtrTo(bf, (E.const(last * 2),), "w"),
                                            SmemAddr(op.B.buffer, tile_index(op.B, k, n))))
        else:
            n = col0 + last * 8 + lane % 8
            k = kk * 16 + ((lane // 8) % 2) * 8
            call = Intrin("tlx_ldsm_x2", (PtrTo(bf, (E.const(last * 2),), "w"),
                                          SmemAddr(op.B.buffer, tile_index(op.B, n, k))))
        b_loads.append(Evaluate(call))
    mma = Evaluate(Intrin(f"tlx_mma_{suffix}", (PtrTo(c_loc, ((mi * ni_n + ni) * 4,), "rw"),
                                                PtrTo(af, (mi * 4,), "r"), PtrTo(bf, (ni * 2,), "r"))))
    body = Seq((_unroll(mi, mi_n, load_a), *b_loads, _unroll(mi, mi_n, _unroll(ni, ni_n, mma))))
    return Seq((Alloc(af), Alloc(bf), _unroll(kk, ki_n, body)))


def _fma(op: Gemm, plan: GemmPlan, lc: Any, c_loc: Buffer) -> Stmt:
    lay = lc.frag(op.C.buffer)
    v = E.Var(lc.fresh("v"))
    k = E.Var(lc.fresh("k"))
    i, j = lay.coords(THREAD, v)
    a = E.Load(op.A.buffer, tile_index(op.A, k, i) if op.trans_A else tile_index(op.A, i, k))
    b = E.Load(op.B.buffer, tile_index(op.B, j, k) if op.trans_B else tile_index(op.B, k, j))
    acc_t = c_loc.dtype
    prod = E.cast(a, acc_t) * E.cast(b, acc_t)
    upd = Store(c_loc, (v,), E.Load(c_loc, (v,)) + prod)
    return _unroll(v, lay.num_local, For(k, E.const(plan.k), "serial", upd))
