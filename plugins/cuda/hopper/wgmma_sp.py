"""T.gemm_sp on ``wgmma.mma_async.sp`` (sm_90a, opt-in: ``pass_configs={"tlx.wgmma_sp": True}``;
plan kind ``wgmma_sp``). Not on by default: it compiles to ``HGMMA.SP`` but has not yet run on a
GPU; without the switch sm_90a runs the ``mma.sp`` form (lower/gemm_sp.py).

Each warpgroup issues ``m64nNk32`` steps over its rows (64 per step) and its N/wgn columns, as
the dense wgmma path does (lower/gemm_wgmma.py, whose descriptors this reuses): A_sparse is a
K-major shared tile of the panel layout, read 16 kept values (32 dense columns) per step, B is
read 32 rows per step in either major order. Every warp of the warpgroup supplies the metadata
of its 16 rows as ``mma.sp`` does (``gemm_sp.meta_word``, sparsity selector 0), all of a
gemm's metadata words loaded before its first wgmma. The accumulator is the dense wgmma fragment.
"""

from __future__ import annotations

import functools
from typing import Any

from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.stmt import Alloc, Seq, Stmt, Store
from ....core_ir.tileops import GemmSp
from ..layout_inference import GemmPlan, where
from ..lir import THREAD, U32, Evaluate, PtrTo
from ..lower.gemm import _unroll
from ..lower.gemm_sp import add_header, meta_word, sparse_header
from ..lower.gemm_wgmma import _call, _desc
from ..ptx_types import ptx_type
from .wgmma_rule import operand_panels, set_panels, warpgroup_plan


def wgmma_sp_rule(st: Any, op: GemmSp) -> bool:
    """Plan ``op`` for ``wgmma.mma_async.sp`` and set its layouts; ``False`` (nothing changed) when
    it does not fit (then the ``mma.sp`` rule runs)."""
    m, n, k = (E.as_int(x) for x in op.mnk())
    a, b, c = op.A.buffer, op.B.buffer, op.C.buffer
    if m is None or n is None or k is None or k % 32 or op.trans_A or st.threads % 128:
        return False
    if c.scope != "fragment" or any(x.scope != "shared" for x in (a, b, op.E.buffer)):
        return False
    lays = operand_panels(st, (op.A, op.B))
    if lays is None or op.trans_B and lays[b].panel < 32:  # a K-major step reads 32 columns of a panel
        return False
    origin = f"T.gemm_sp at {where(op.loc)} (wgmma.sp)"
    planned = warpgroup_plan(st, m, n, op.policy, 0 if op.trans_B else lays[b].panel, c, origin)
    if planned is None:
        return False
    wg, want_c = planned
    st.gemm[id(op)] = GemmPlan("wgmma_sp", m, n, k, *wg)
    st.set(c, want_c, f"{origin} (accumulator)", op.loc)
    set_panels(st, lays, origin, op.loc)
    return True


def lower_wgmma_sp(op: GemmSp, lc: Any, data: dict[str, Any]) -> Stmt:
    plan: GemmPlan = lc.gemm[id(op)]
    wgm, wgn = plan.wm, plan.wn
    mi_n, nn, ks_n = plan.m // (64 * wgm), plan.n // wgn, plan.k // 32
    c_loc = lc.local_of(op.C.buffer)
    total = mi_n * nn // 2
    wg = THREAD // 128
    m0 = (wg // wgn) * (plan.m // wgm) if wgm > 1 else E.const(0)
    n0 = (wg % wgn) * nn if wgn > 1 else E.const(0)
    trans_b = int(not op.trans_B)
    fn = f"tlx_wgmma_sp_{ptx_type(op.A.buffer.dtype.name)}_n{nn}_t0{trans_b}"
    add_header(data, sparse_header())  # tlx_sp_meta
    add_header(data, wgmma_sp_source(fn, nn, ptx_type(op.A.buffer.dtype.name), trans_b))
    ef = Buffer(lc.fresh("e_frag"), (mi_n * ks_n,), U32, "local")
    mi, s = E.Var(lc.fresh("mi")), E.Var(lc.fresh("ks"))
    warp_rows = m0 + mi * 64 + (THREAD // 32) % 4 * 16
    out: list[Stmt] = [Alloc(ef), _unroll(mi, mi_n, _unroll(s, ks_n, Store(ef, (mi * ks_n + s,),
                                                                           meta_word(op, warp_rows, s))))]
    acc = PtrTo(c_loc, (E.const(0),), "rw")
    out += [Evaluate(_call("tlx_fence_regs", acc, total)), Evaluate(_call("tlx_wgmma_arrive"))]
    lay_a, lay_b = lc.layouts[op.A.buffer], lc.layouts[op.B.buffer]
    for step in range(ks_n):
        desc_b = _desc(op.B, lay_b, op.trans_B, n0, step * 32)
        scale = 0 if op.clear_accum and step == 0 else 1
        for i in range(mi_n):
            row0 = m0 + i * 64 if i else m0
            d = PtrTo(c_loc, (E.const(i * nn // 2),), "rw")
            meta = E.Load(ef, (E.const(i * ks_n + step),))
            out.append(Evaluate(_call(fn, d, _desc(op.A, lay_a, True, row0, step * 16), desc_b, meta, scale), op.loc))
    out += [Evaluate(_call("tlx_wgmma_commit")), Evaluate(_call("tlx_wgmma_wait0")),
            Evaluate(_call("tlx_fence_regs", acc, total))]
    return Seq(tuple(out))


@functools.cache
def wgmma_sp_source(name: str, n: int, t: str, trans_b: int) -> str:
    """``void name(float* d, tlx_u64 desc_a, tlx_u64 desc_b, tlx_u32 meta, int scale_d)``: one
    m64nNk32 sparse step, sparsity selector 0."""
    nd = n // 2
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(nd))
    dregs = ", ".join(f"%{i}" for i in range(nd))
    asm = (f'"{{\\n .reg .pred p;\\n setp.ne.b32 p, %{nd + 3}, 0;\\n'
           f' wgmma.mma_async.sp.sync.aligned.m64n{n}k32.f32.{t}.{t} {{{dregs}}}, %{nd}, %{nd + 1}, %{nd + 2}, 0, p, '
           f'1, 1, 0, {trans_b};\\n}}\\n"')
    return (f"TLX_DEV void {name}(float* d, tlx_u64 da, tlx_u64 db, tlx_u32 e, int scale) {{\n  asm volatile({asm}\n"
            f'    : {outs}\n    : "l"(da), "l"(db), "r"(e), "r"(scale));\n}}\n')


