"""T.gemm. fp16/bf16 inputs with an fp32 fragment accumulator: ldmatrix + mma.sync.m16n8k16 per
warp tile (backends.md A1/A2 recipes for every transpose case; A may be a register fragment in
the A-operand layout). float32 inputs from shared memory (TF32 precision, ``plan.tf32``):
mma.sync.m16n8k8.tf32; int8/uint8 inputs from shared memory with an int32 accumulator, and
float8 ones with an fp32 accumulator (sm_89+): mma.sync.m16n8k32. Every form reads 32 bytes of K
per k-step, so the K-major operands load by ldmatrix as fp16 ones do (a row of 8 16-bit halves is
4 float32 or 16 bytes); the others are gathered element by element (4 bytes packed per register),
TF32 registers rounded by ``cvt.rna.tf32``. Anything else: a per-element FMA loop over the
accumulator's layout (the mma form's where the tile splits into m16n8 warp tiles; float32 operands
rounded to TF32 under ``plan.tf32``, so the result does not depend on the form chosen), K outside:
each k-step an outer product over the thread's accumulators, which loads each operand element once.
With K inside, NVVM unrolled all of K into every accumulator's sum: a 128x128x32 tile took NVRTC
8-20 s and spilled (1658 local loads for 4096 FMAs), where it now takes 0.2 s; each accumulator
still sums over K in order, so the results are the same bits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.stmt import Alloc, For, Seq, Stmt, Store
from ....core_ir.tileops import Gemm
from ..layout_inference import GemmPlan
from ..lir import THREAD, U32, Evaluate, Intrin, PtrTo, SmemAddr
from ..nests import region_index
from ..ptx_types import k_step, ptx_type


def _unroll(var: E.Var, n: int, body: Stmt) -> Stmt:
    return For(var, E.const(n), "unroll", body)


def lower_gemm(op: Gemm, lc: Any) -> Stmt:
    plan: GemmPlan = lc.gemm[id(op)]
    c_loc = lc.local_of(op.C.buffer)
    if plan.kind == "mma":
        t = mma_tile(op, plan)
        zero_first = op.clear_accum and getattr(lc, "fold_clear", False) and c_loc.static_shape() == (t.c_regs,)
        pre: list[Stmt] = []
        if op.clear_accum and not zero_first:
            pre.append(_clear(c_loc, lc))
        return Seq(tuple(pre) + (_mma(t, lc, c_loc, zero_first),))
    pre = [_clear(c_loc, lc)] if op.clear_accum else []
    return Seq(tuple(pre) + (_fma(op, plan, lc, c_loc),))


def _clear(c_loc: Buffer, lc: Any) -> Stmt:
    z = E.Var(lc.fresh("z"))
    return _unroll(z, c_loc.shape[0].value, Store(c_loc, (z,), E.cast(E.const(0), c_loc.dtype)))


@dataclass(frozen=True)
class MmaTile:
    """One warp's share of an mma T.gemm: ``mi_n`` x ``ni_n`` m16n8 atoms over ``ki_n`` k-steps of
    ``kstep`` (16; 8 for TF32, 32 for 8-bit integers), the warp's tile starting at (``row0``,
    ``col0``) of C."""

    op: Gemm
    mi_n: int
    ni_n: int
    ki_n: int
    row0: E.Expr
    col0: E.Expr
    suffix: str
    kstep: int = 16

    @property
    def tf32(self) -> bool:
        return self.kstep == 8

    @property
    def per_reg(self) -> int:
        """Operand elements per 32-bit register."""
        return self.kstep // 8

    @property
    def a_regs(self) -> int:
        """32-bit registers of one k-step's A fragments."""
        return self.mi_n * 4

    @property
    def b_regs(self) -> int:
        return self.ni_n * 2

    @property
    def c_regs(self) -> int:
        return self.mi_n * self.ni_n * 4


def mma_tile(op: Gemm, plan: GemmPlan) -> MmaTile:
    wm, wn = plan.wm, plan.wn
    warp = THREAD // 32
    row0 = (warp // wn) * (plan.m // wm) if wm > 1 else E.const(0)
    col0 = (warp % wn) * (plan.n // wn) if wn > 1 else E.const(0)
    a, b = op.A.buffer.dtype, op.B.buffer.dtype
    # the 8-bit forms name both operand types (``tlx_mma_s8u8``), the others one
    suffix = ptx_type(a.name) + (ptx_type(b.name) if a.bits == 8 else "")
    kstep = k_step(a.name)
    return MmaTile(op, plan.m // (16 * wm), plan.n // (8 * wn), plan.k // kstep, row0, col0, suffix, kstep)


def _at(base: E.Expr | int, x: E.Expr) -> E.Expr:
    return x if E.as_int(base) == 0 else base + x


def load_a(t: MmaTile, lc: Any, af: Buffer, kk: E.Expr, off: E.Expr | int = 0) -> Stmt:
    """ldmatrix (or packing of a register fragment) of k-step ``kk``'s A fragments into ``af[off:]``."""
    op = t.op
    lane = THREAD % 32
    mi = E.Var(lc.fresh("mi"))
    dst = PtrTo(af, (_at(off, mi * 4),), "w")
    if op.A.buffer.scope == "fragment":
        a_loc = lc.local_of(op.A.buffer)
        fn = "tlx_afrag_h" if t.suffix == "f16" else "tlx_afrag_b"
        load = Evaluate(Intrin(fn, (dst, PtrTo(a_loc, ((mi * t.ki_n + kk) * 8,), "r"))))
    elif not op.trans_A:
        m = t.row0 + mi * 16 + lane % 16
        k = kk * t.kstep + (lane // 16) * (t.kstep // 2)
        load = Evaluate(Intrin("tlx_ldsm_x4", (dst, SmemAddr(op.A.buffer, region_index(op.A, (m, k))))))
        if t.tf32:
            load = Seq((load, _round_tf32(dst, 4)))
    elif t.kstep != 16:  # A stored K x M: a_r holds row g + 8 (r % 2), k (kstep / 2) (r // 2) + e of the atom
        load = gather_operand(af, off, mi * 4, lambda r, e: region_index(
            op.A, (kk * t.kstep + (r // 2) * (t.kstep // 2) + e, t.row0 + mi * 16 + lane // 4 + (r % 2) * 8)),
            op.A.buffer, 4, t.per_reg)
    else:
        grp = lane // 8
        k = kk * 16 + (grp // 2) * 8 + lane % 8
        m = t.row0 + mi * 16 + (grp % 2) * 8
        load = Evaluate(Intrin("tlx_ldsm_x4_t", (dst, SmemAddr(op.A.buffer, region_index(op.A, (k, m))))))
    return _unroll(mi, t.mi_n, load)


def load_b(t: MmaTile, lc: Any, bf: Buffer, kk: E.Expr, off: E.Expr | int = 0) -> Stmt:
    """ldmatrix of k-step ``kk``'s B fragments into ``bf[off:]``: pairs of n8 atoms with x4, a last
    odd atom with x2."""
    op = t.op
    lane = THREAD % 32
    nj = E.Var(lc.fresh("nj"))
    b_loads: list[Stmt] = []
    pairs = t.ni_n // 2
    if t.kstep != 16 and not op.trans_B:  # B stored K x N: b_r holds k (kstep / 2) r + e, n g of the atom
        return _unroll(nj, t.ni_n, gather_operand(bf, off, nj * 2, lambda r, e: region_index(
            op.B, (kk * t.kstep + r * (t.kstep // 2) + e, t.col0 + nj * 8 + lane // 4)), op.B.buffer, 2, t.per_reg))
    if pairs:
        dst = PtrTo(bf, (_at(off, nj * 4),), "w")
        if not op.trans_B:
            k = kk * 16 + lane % 16
            n = t.col0 + nj * 16 + (lane // 16) * 8
            call = Intrin("tlx_ldsm_x4_t", (dst, SmemAddr(op.B.buffer, region_index(op.B, (k, n)))))
        else:
            n = t.col0 + nj * 16 + (lane // 16) * 8 + lane % 8
            k = kk * t.kstep + ((lane // 8) % 2) * (t.kstep // 2)
            call = Intrin("tlx_ldsm_x4", (dst, SmemAddr(op.B.buffer, region_index(op.B, (n, k)))))
        load: Stmt = Evaluate(call)
        b_loads.append(_unroll(nj, pairs, Seq((load, _round_tf32(dst, 4))) if t.tf32 else load))
    if t.ni_n % 2:
        last = t.ni_n - 1
        dst = PtrTo(bf, (_at(off, E.const(last * 2)),), "w")
        if not op.trans_B:
            k = kk * 16 + lane % 16
            n = t.col0 + last * 8
            call = Intrin("tlx_ldsm_x2_t", (dst, SmemAddr(op.B.buffer, region_index(op.B, (k, n)))))
        else:
            n = t.col0 + last * 8 + lane % 8
            k = kk * t.kstep + ((lane // 8) % 2) * (t.kstep // 2)
            call = Intrin("tlx_ldsm_x2", (dst, SmemAddr(op.B.buffer, region_index(op.B, (n, k)))))
        b_loads.append(Evaluate(call))
        if t.tf32:
            b_loads.append(_round_tf32(dst, 2))
    return Seq(tuple(b_loads))


def _round_tf32(regs: PtrTo, n: int) -> Stmt:
    return Evaluate(Intrin("tlx_tf32_regs", (regs, E.const(n))))


def gather_operand(frag: Buffer, off: E.Expr | int, first: E.Expr, index: Any, src: Buffer, n: int,
                   per_reg: int) -> Stmt:
    """Registers ``frag[off + first + r]`` (r < n) of an operand ldmatrix cannot load (M or N
    contiguous), element by element: register r holds the elements at ``index(r, e)``, ``e`` =
    the lane's first (``lane % 4 * per_reg``) and the next ones of its k-run; a float32 one
    rounded to TF32, 8-bit ones (``per_reg`` 4) packed with the lowest k in the lowest byte."""
    tg = (THREAD % 32) % 4
    base = tg * per_reg if per_reg > 1 else tg
    out = []
    for r in range(n):
        at = [index(r, base + e if e else base) for e in range(per_reg)]
        if per_reg == 1:
            value: E.Expr = Intrin("tlx_tf32", (E.Load(src, at[0]),), U32)
        else:
            value = Intrin("tlx_ld_b4", tuple(PtrTo(src, i, "r") for i in at), U32)
        out.append(Store(frag, (_at(off, first + r),), value))
    return Seq(tuple(out))


def mmas(t: MmaTile, lc: Any, c_loc: Buffer, af: Buffer, bf: Buffer, a_off: E.Expr | int = 0,
         b_off: E.Expr | int = 0, zero: bool = False) -> Stmt:
    """The mi_n x ni_n MMAs of one k-step (``zero``: with zero accumulators in)."""
    mi, ni = E.Var(lc.fresh("mi")), E.Var(lc.fresh("ni"))
    fn = f"tlx_mma_{t.suffix}" + ("_z" if zero else "")
    mma = Evaluate(Intrin(fn, (PtrTo(c_loc, ((mi * t.ni_n + ni) * 4,), "w" if zero else "rw"),
                               PtrTo(af, (_at(a_off, mi * 4),), "r"), PtrTo(bf, (_at(b_off, ni * 2),), "r"))))
    return _unroll(mi, t.mi_n, _unroll(ni, t.ni_n, mma))


def _mma(t: MmaTile, lc: Any, c_loc: Buffer, zero_first: bool = False) -> Stmt:
    hoisted: Buffer | None = getattr(lc, "hoisted", {}).get(id(t.op))  # lower/hoist.py: all k-steps' A
    bf = Buffer(lc.fresh("b_frag"), (t.b_regs,), U32, "local")
    allocs: list[Stmt] = [Alloc(bf)]
    af = hoisted
    if af is None:
        af = Buffer(lc.fresh("a_frag"), (t.a_regs,), U32, "local")
        allocs.insert(0, Alloc(af))

    def step(kk: E.Expr, zero: bool) -> Stmt:
        if hoisted is not None:
            return Seq((load_b(t, lc, bf, kk), mmas(t, lc, c_loc, hoisted, bf, kk * t.a_regs, 0, zero)))
        return Seq((load_a(t, lc, af, kk), load_b(t, lc, bf, kk), mmas(t, lc, c_loc, af, bf, 0, 0, zero)))

    kk = E.Var(lc.fresh("kk"))
    if not zero_first:
        return Seq((*allocs, _unroll(kk, t.ki_n, step(kk, False))))
    body = [step(E.const(0), True)]
    if t.ki_n > 1:
        body.append(For(kk, E.const(t.ki_n - 1), "unroll", step(kk, False), E.const(1)))
    return Seq((*allocs, *body))


def _fma(op: Gemm, plan: GemmPlan, lc: Any, c_loc: Buffer) -> Stmt:
    lay = lc.frag(op.C.buffer)
    v = E.Var(lc.fresh("v"))
    k = E.Var(lc.fresh("k"))
    i, j = lay.coords(THREAD, v)
    a: E.Expr = E.Load(op.A.buffer, region_index(op.A, (k, i)) if op.trans_A else region_index(op.A, (i, k)))
    b: E.Expr = E.Load(op.B.buffer, region_index(op.B, (j, k)) if op.trans_B else region_index(op.B, (k, j)))
    if plan.tf32:
        a, b = (Intrin("tlx_tf32f", (x,), dtypes.float32) for x in (a, b))
    acc_t = c_loc.dtype
    prod = E.cast(a, acc_t) * E.cast(b, acc_t)
    upd = Store(c_loc, (v,), E.Load(c_loc, (v,)) + prod)
    return For(k, E.const(plan.k), "serial", _unroll(v, lay.num_local, upd))
