"""The IR verifier: a well-formed kernel passes; each kind of ill-formed IR is reported with a
source location and a message that names the problem."""

from __future__ import annotations

import pytest

from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir.buffer import Buffer, Region, register_scope
from tilelang_x.core_ir.errors import VerificationError
from tilelang_x.core_ir.expr import Const, Var
from tilelang_x.core_ir.source import SourceLoc
from tilelang_x.core_ir.stmt import Alloc, Annotate, For, If, Kernel, PrimFunc, Print, Seq, Store, While
from tilelang_x.core_ir.tileops import Copy, Fill, Gemm, Reduce
from tilelang_x.core_ir.verify import verify

F16, F32 = dtypes.float16, dtypes.float32
LOC = SourceLoc("kernel.py", 42)


def c(v: int) -> Const:
    return Const(v, dtypes.int32)


class K:
    """A small GEMM-like kernel whose pieces each test can break."""

    def __init__(self) -> None:
        self.m = Var("m")
        self.A = Buffer("A", (self.m, 64), F16)
        self.C = Buffer("C", (self.m, 64), F16)
        self.bx = Var("bx")
        self.A_s = Buffer("A_s", (32, 64), F16, "shared")
        self.C_f = Buffer("C_f", (32, 64), F32, "fragment")
        self.i, self.j = Var("i"), Var("j")

    def body(self, *stmts, allocs=None):
        allocs = allocs if allocs is not None else (Alloc(self.A_s), Alloc(self.C_f))
        return Kernel((self.m // 32,), (self.bx,), (128,), Seq(tuple(allocs) + tuple(stmts), LOC), loc=LOC)

    def good_stmts(self):
        A, A_s, C_f, C, bx, i, j = self.A, self.A_s, self.C_f, self.C, self.bx, self.i, self.j
        return (
            Fill(Region.full(C_f), Const(0.0, F32)),
            Copy(Region(A, (bx * 32, c(0)), (c(32), c(64))), Region.full(A_s)),
            For(i, c(32), "parallel", For(j, c(64), "parallel", Store(C, (bx * 32 + i, j), C_f[i, j]))),
        )

    def func(self, body):
        return PrimFunc("k", (self.A, self.C, self.m), body, out_idx=(1,), loc=LOC)


def err(func) -> VerificationError:
    with pytest.raises(VerificationError) as info:
        verify(func)
    assert info.value.loc is not None
    return info.value


def test_well_formed_kernel_passes() -> None:
    k = K()
    verify(k.func(k.body(*k.good_stmts())))


def test_gemm_kernel_passes() -> None:
    k = K()
    B_s = Buffer("B_s", (64, 64), F16, "shared")
    gemm = Gemm(Region.full(k.A_s), Region.full(B_s), Region.full(k.C_f))
    verify(k.func(k.body(gemm, allocs=(Alloc(k.A_s), Alloc(B_s), Alloc(k.C_f)))))


def test_loop_var_outside_its_loop() -> None:
    k = K()
    loop = For(k.i, c(4), "serial", Store(k.C, (k.i, c(0)), Const(0.0, F16)))
    after = Store(k.C, (k.i, c(1)), Const(0.0, F16), loc=SourceLoc("kernel.py", 50))
    e = err(k.func(k.body(loop, after)))
    assert "`i`" in str(e) and "scope" in str(e) and e.loc.line == 50


def test_block_var_outside_kernel_and_unknown_var() -> None:
    k = K()
    kern = k.body()
    stray = For(k.i, k.bx, "serial", Seq(()))
    assert "`bx`" in str(err(k.func(Seq((kern, stray)))))
    other = Var("n")
    assert "`n`" in str(err(k.func(k.body(Store(k.C, (other, c(0)), Const(0.0, F16))))))


def test_shape_vars_and_scalar_params_are_bound() -> None:
    k = K()
    s = Var("s", dtypes.int32)
    body = k.body(Store(k.C, (k.m - 1, s), Const(0.0, F16)))
    verify(PrimFunc("k", (k.A, k.C, s), body))


def test_loop_var_rebound_inside_its_loop() -> None:
    k = K()
    inner = For(k.i, c(2), "serial", Seq(()))
    assert "bound again" in str(err(k.func(k.body(For(k.i, c(4), "serial", inner)))))


def test_buffer_used_before_alloc() -> None:
    k = K()
    use = Store(k.A_s, (c(0), c(0)), Const(0.0, F16))
    e = err(k.func(k.body(use, allocs=())))
    assert "`A_s`" in str(e) and "outside the scope" in str(e)
    before = k.body(use, Alloc(k.A_s), allocs=())
    assert "`A_s`" in str(err(k.func(before)))


def test_buffer_used_after_its_seq_ends() -> None:
    k = K()
    inner = Seq((Alloc(k.A_s), Store(k.A_s, (c(0), c(0)), Const(0.0, F16))))
    later = Store(k.A_s, (c(1), c(0)), Const(0.0, F16))
    assert "`A_s`" in str(err(k.func(k.body(If(k.bx < 2, inner), later, allocs=()))))


def test_global_buffer_not_a_param() -> None:
    k = K()
    D = Buffer("D", (4,), F16)
    e = err(k.func(k.body(Store(D, (c(0),), Const(0.0, F16)))))
    assert "not a parameter" in str(e)


def test_store_to_global_outside_kernel() -> None:
    k = K()
    e = err(k.func(Seq((Store(k.C, (c(0), c(0)), Const(0.0, F16)),))))
    assert "outside a T.Kernel" in str(e)


def test_alloc_and_tile_op_outside_kernel() -> None:
    k = K()
    assert "outside a T.Kernel" in str(err(k.func(Seq((Alloc(k.A_s),)))))
    fill = Fill(Region.full(k.C), Const(0.0, F16))
    assert "outside a T.Kernel" in str(err(k.func(Seq((fill,)))))


def test_nested_kernel() -> None:
    k = K()
    inner = Kernel((c(1),), (Var("by"),), (32,), Seq(()))
    assert "inside another T.Kernel" in str(err(k.func(k.body(inner))))


def test_index_count_mismatch() -> None:
    k = K()
    bad_store = Store(k.C, (c(0),), Const(0.0, F16))
    assert "indexed with 1" in str(err(k.func(k.body(bad_store))))
    from tilelang_x.core_ir.expr import Load

    bad_load = Store(k.C, (c(0), c(0)), Load(k.A, (c(0), c(0), c(0))))
    assert "indexed with 3" in str(err(k.func(k.body(bad_load))))


def test_tile_op_operand_rank() -> None:
    k = K()
    short = Copy(Region(k.A, (c(0),), (c(32),)), Region.full(k.A_s))
    assert "region of `A`" in str(err(k.func(k.body(short))))
    T3 = Buffer("T3", (2, 32, 64), F16, "shared")
    gemm = Gemm(Region.full(T3), Region.full(k.A_s), Region.full(k.C_f))
    e = err(k.func(k.body(gemm, allocs=(Alloc(k.A_s), Alloc(k.C_f), Alloc(T3)))))
    assert "not a 2-d tile" in str(e)
    red = Reduce("sum", Region.full(k.C_f), Region.full(k.C_f), 2)
    assert "dim 2 is out of range" in str(err(k.func(k.body(red))))


def test_tile_op_shape_mismatch_becomes_verification_error() -> None:
    k = K()
    copy = Copy(Region(k.A, (c(0), c(0)), (c(16), c(64))), Region.full(k.A_s))
    e = err(k.func(k.body(copy)))
    assert "shape mismatch" in str(e)


def test_non_bool_conditions() -> None:
    k = K()
    assert "not bool" in str(err(k.func(k.body(If(k.bx + 1, Seq(()))))))
    assert "not bool" in str(err(k.func(k.body(While(k.bx * 2, Seq(()))))))


def test_alloc_of_unknown_scope_and_plugin_scope() -> None:
    k = K()
    odd = Buffer("odd", (4,), F16, "l9")
    assert "unknown memory scope" in str(err(k.func(k.body(allocs=(Alloc(odd),)))))
    register_scope("l9_test_scope")
    ok = Buffer("ok", (4,), F16, "l9_test_scope")
    verify(k.func(k.body(allocs=(Alloc(ok),))))


def test_annotate_and_print_buffers_must_be_visible() -> None:
    k = K()
    ann = Annotate("layout", ((k.A_s, object()),))
    verify(k.func(k.body(ann, Print(k.C_f, "c"))))
    assert "`A_s`" in str(err(k.func(k.body(ann, allocs=(Alloc(k.C_f),)))))


def test_error_carries_statement_location() -> None:
    k = K()
    where = SourceLoc("user_kernel.py", 7)
    e = err(k.func(k.body(If(k.bx + 1, Seq(()), loc=where))))
    assert e.loc == where and str(e).startswith("user_kernel.py:7:")
