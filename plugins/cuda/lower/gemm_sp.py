"""T.gemm_sp on CUDA: ``mma.sp.sync.aligned.m16n8k32`` (sm_80; also what sm_90a runs), fp16/bf16
A_sparse and B in shared memory, fp32 fragment accumulator.

Per warp and k-step of 32 dense columns: the kept values of A (16 x 16 per m16 atom, the dense
m16n8k16 A fragment) by ldmatrix as ``T.gemm`` loads A (``gemm.load_a``, in A_sparse's columns),
B's 32 rows as two k16 halves (``gemm.load_b`` twice), and one metadata word per m16 atom read
from the row-major E tile (``core_ir.tileops.GemmSp``'s format, which is the hardware's order
within a row): lane ``4g + q`` takes the 16 bits of rows ``g`` and ``g + 8`` for dense columns
``16 (q % 2) .. 16 (q % 2) + 15`` of the step (``tlx_sp_meta``); with sparsity selector 0 lanes
``4g`` and ``4g + 1`` supply them. The layout rule (``gemm_sp_rule``) is ``T.gemm``'s: the
m16n8 accumulator fragment over wm x wn warps and swizzled A_sparse / B tiles; E stays row-major.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.errors import BackendNotImplementedError
from ....core_ir.stmt import Alloc, Seq, Stmt, Store
from ....core_ir.tileops import GemmSp
from ..layout import mma_c_fragment
from ..layout_inference import GemmPlan, choose_warps, where
from ..lir import THREAD, U32, Evaluate, Intrin, PtrTo, SmemAddr
from ..perf_options import pass_configs
from .gemm import _clear, _unroll, load_a, load_b, mma_tile


def gemm_sp_rule(st: Any, op: GemmSp, ctx: Any) -> None:
    """The plan (``GemmPlan`` kind ``wgmma_sp`` on sm_90a where it fits unless the pass config
    ``tlx.wgmma_sp`` is off: hopper/wgmma_sp.py; else ``mma_sp``) and layouts of a T.gemm_sp; what the tensor-core form
    cannot run raises ``BackendNotImplementedError`` naming the requirement."""
    if ctx.data.get("cuda.gemm_rule") is not None and pass_configs(ctx).get("tlx.wgmma_sp", True):
        from ..hopper.wgmma_sp import wgmma_sp_rule

        if wgmma_sp_rule(st, op):
            return
    m, n, k = (E.as_int(x) for x in op.mnk())
    a, e, b, c = op.A.buffer, op.E.buffer, op.B.buffer, op.C.buffer
    origin = f"T.gemm_sp at {where(op.loc)}"
    need = []
    if m is None or n is None or k is None:
        need.append("constant tile sizes")
    elif k % 32:
        need.append(f"K a multiple of 32 (got {k})")
    if any(x.scope != "shared" for x in (a, e, b)):
        need.append("A_sparse, E and B in T.alloc_shared tiles")
    if c.scope != "fragment":
        need.append("a T.alloc_fragment accumulator")
    wmn = choose_warps(m, n, st.threads // 32, op.policy) if m is not None and n is not None else None
    if m is not None and n is not None and wmn is None:
        need.append(f"M = {m} and N = {n} that split into 16 x 8 tiles over the {st.threads // 32} warps")
    if need:
        raise BackendNotImplementedError(
            f"{origin}: the CUDA backend's sparse tensor-core form needs " + ", ".join(need), loc=op.loc,
            hint="use block_K a multiple of 32, shared tiles for A_sparse, E and B and a fragment accumulator")
    assert m is not None and n is not None and k is not None and wmn is not None
    plan = GemmPlan("mma_sp", m, n, k, *wmn)
    st.gemm[id(op)] = plan
    st.set(c, mma_c_fragment(m, n, plan.wm, plan.wn, origin), f"{origin} (accumulator)", op.loc)
    for buf in (a, b):
        st.operand_tile(buf, origin, op.loc)


def lower_gemm_sp(op: GemmSp, lc: Any, data: dict[str, Any]) -> Stmt:
    """The k-steps of one warp's mma.sp tile (``data``: the stage context's, where the wrappers of
    ``include/tlx_sparse.h`` are added to ``cuda.extra_headers``)."""
    plan: GemmPlan = lc.gemm[id(op)]
    t = mma_tile(op, plan)  # type: ignore[arg-type]  (reads A, B, the transposes and the dtype)
    c_loc = lc.local_of(op.C.buffer)
    af = Buffer(lc.fresh("a_frag"), (t.a_regs,), U32, "local")
    bf = Buffer(lc.fresh("b_frag"), (2 * t.b_regs,), U32, "local")
    ef = Buffer(lc.fresh("e_frag"), (t.mi_n,), U32, "local")
    mi, ni, s = E.Var(lc.fresh("mi")), E.Var(lc.fresh("ni")), E.Var(lc.fresh("ks"))
    meta = Store(ef, (mi,), meta_word(op, t.row0 + mi * 16, s))
    fn = "tlx_mma_sp_" + t.suffix
    mma = Evaluate(Intrin(fn, (PtrTo(c_loc, ((mi * t.ni_n + ni) * 4,), "rw"), PtrTo(af, (mi * 4,), "r"),
                               PtrTo(bf, (ni * 2,), "r"), PtrTo(bf, (t.b_regs + ni * 2,), "r"), E.Load(ef, (mi,)))))
    step = Seq((load_a(t, lc, af, s), load_b(t, lc, bf, s * 2), load_b(t, lc, bf, s * 2 + 1, t.b_regs),
                _unroll(mi, t.mi_n, meta), _unroll(mi, t.mi_n, _unroll(ni, t.ni_n, mma))))
    add_header(data, sparse_header())
    pre = (_clear(c_loc, lc),) if op.clear_accum else ()
    return Seq((*pre, Alloc(af), Alloc(bf), Alloc(ef), _unroll(s, plan.k // 32, step)))


def add_header(data: dict[str, Any], text: str) -> None:
    """``text`` in ``cuda.extra_headers`` once."""
    extra = data.setdefault("cuda.extra_headers", [])
    if text not in extra:
        extra.append(text)


def meta_word(op: GemmSp, row0: E.Expr, step: E.Expr) -> Intrin:
    """This thread's metadata word of k-step ``step`` (32 dense columns) for the 16 rows from
    ``row0``: lane ``4g + q`` reads rows ``row0 + g`` (bits 0-15) and ``row0 + g + 8`` (bits 16-31),
    columns ``16 (q % 2) ..`` of the step (``mma.sp`` m16n8k32 and ``wgmma.mma_async.sp`` per warp)."""
    lane = THREAD % 32
    row = row0 + lane // 4
    eb = op.E.buffer.dtype.bytes
    col = step if eb > 2 else (step * 2 + lane % 2) * (2 // eb)
    half = (lane % 2) * 2 if eb > 2 else E.const(0)
    return Intrin("tlx_sp_meta", (_meta_addr(op, row, col, half), _meta_addr(op, row + 8, col, half)), U32)


def _meta_addr(op: GemmSp, row: E.Expr, col: E.Expr, byte: E.Expr) -> E.Expr:
    """The shared address of the 16-bit metadata word at ``byte`` bytes into ``E[row, col]`` (E's
    last two dims; a leading pipeline-stage dim keeps its start)."""
    r = op.E
    idx = (*r.starts[:-2], r.starts[-2] + row, r.starts[-1] + col)
    addr = SmemAddr(r.buffer, idx)
    return addr if E.as_int(byte) == 0 else E.binary("+", addr, E.cast(byte, U32))


@functools.lru_cache(maxsize=1)
def sparse_header() -> str:
    with open(os.path.join(os.path.dirname(__file__), "..", "include", "tlx_sparse.h")) as fh:
        return fh.read()

