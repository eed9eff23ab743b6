"""The target-agnostic stages run before every backend: specialize, simplify, safe_access, verify."""

from __future__ import annotations

import pytest

from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir.buffer import Buffer, Region
from tilelang_x.core_ir.errors import TileLangError, VerificationError
from tilelang_x.core_ir.expr import Const, Var, as_int
from tilelang_x.core_ir.passes import CORE_STAGES, bindable_vars, specialize
from tilelang_x.core_ir.stages import StageContext, run_stages
from tilelang_x.core_ir.stmt import Alloc, For, If, Kernel, PrimFunc, Seq, Store
from tilelang_x.core_ir.tileops import Copy

I32, F16 = dtypes.int32, dtypes.float16


def c(v: int) -> Const:
    return Const(v, I32)


def _func():
    m, scale = Var("m"), Var("scale")
    A = Buffer("A", (m, 64), F16)
    C = Buffer("C", (m * 2, 64), F16)
    bx, i, j = Var("bx"), Var("i"), Var("j")
    S = Buffer("S", (32, 64), F16, "shared")
    body = Kernel((m // 32,), (bx,), (128,), Seq((
        Alloc(S),
        Copy(Region(A, (bx * 32, c(0)), (c(32), c(64))), Region.full(S)),
        For(i, c(32), "parallel", For(j, c(64), "parallel", Seq((
            If(i * 64 + j < 32 * 64, Store(C, ((bx * 32 + i) * 2 // 2, j), S[(i * 64 + j) // 64, (i * 64 + j) % 64])),
            If(bx < 0, Store(C, (c(0), c(0)), Const(0.0, F16))),
            Store(C, (bx * 32 + i + scale - scale, j), S[i, j]),
        )))),
    )))
    return PrimFunc("k", (A, C, m, scale), body, out_idx=(1,))


def test_core_stages_run_in_order() -> None:
    assert [name for name, _ in CORE_STAGES] == ["specialize", "simplify", "safe_access", "verify"]
    out = run_stages(_func(), CORE_STAGES, StageContext(target=None))
    text = out.script()
    assert "C[bx * 32 + i, j] = S[i, j]" in text
    assert "if" not in text  # both conditions are decided by the loop ranges and bx >= 0
    assert "scale" not in text.split("\n", 2)[2].split("):", 1)[1]


def test_specialize_binds_names_and_vars_including_shapes() -> None:
    f = _func()
    m = f.params[2]
    assert set(bindable_vars(f)) == {"m", "scale"}
    out = specialize(f, StageContext(target=None, options={"bind": {"m": 256, f.params[3]: 3}}))
    A, C = out.params[0], out.params[1]
    assert A is not f.params[0] and A.static_shape() == (256, 64) and C.static_shape() == (512, 64)
    assert out.params[2] is m  # the signature is unchanged
    assert dict(out.attrs)["specialized"] == (("m", "256"), ("scale", "3"))
    kern = out.body
    assert as_int(kern.grid[0]) is None  # not simplified yet: `256 // 32`
    run = run_stages(out, CORE_STAGES[1:], StageContext(target=None))
    assert as_int(run.body.grid[0]) == 8
    # every use of A and C refers to the new buffers
    assert "A[bx * 32:bx * 32 + 32, :64]" in run.script()
    copy = run.body.body.stmts[1]
    assert copy.src.buffer is A


def test_specialize_rejects_unknown_names() -> None:
    with pytest.raises(TileLangError, match="cannot bind `n`"):
        specialize(_func(), StageContext(target=None, options={"bind": {"n": 4}}))


def test_specialize_without_bindings_is_identity() -> None:
    f = _func()
    assert specialize(f, StageContext(target=None)) is f


def test_verify_stage_rejects_ill_formed_function() -> None:
    f = _func()
    bad = PrimFunc("bad", f.params, Seq((Store(f.params[1], (c(0), c(0)), Const(0.0, F16)),)))
    with pytest.raises(VerificationError):
        run_stages(bad, CORE_STAGES, StageContext(target=None))
