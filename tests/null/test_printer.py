"""The IR printer: text that reads (and evaluates) like the TileLang source, and is
deterministic, because it is the cache key of a kernel."""

from __future__ import annotations

import random
import types

from hypothesis import given, settings
from hypothesis import strategies as st

from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir.buffer import Buffer, Region
from tilelang_x.core_ir.expr import BinOp, Const, Expr, Select, UnaryOp, Var
from tilelang_x.core_ir.layout import make_swizzled_layout
from tilelang_x.core_ir.simplify import evaluate
from tilelang_x.core_ir.stmt import Alloc, Annotate, For, If, Kernel, PrimFunc, Seq, Store
from tilelang_x.core_ir.tileops import Copy, Fill, Gemm

I32, B = dtypes.int32, dtypes.bool_
a, b, c = Var("a"), Var("b"), Var("c")
p, q = Var("p", B), Var("q", B)

ints = st.recursive(
    st.one_of(st.sampled_from([a, b, c]), st.integers(-5, 9).map(lambda v: Const(v, I32))),
    lambda ch: st.one_of(
        st.tuples(st.sampled_from(["+", "-", "*", "min", "max", "&", "|", "^"]), ch, ch).map(
            lambda t: BinOp(t[0], t[1], t[2], I32)),
        st.tuples(st.sampled_from(["//", "%"]), ch, st.integers(1, 5)).map(
            lambda t: BinOp(t[0], t[1], Const(t[2], I32), I32)),
        st.tuples(ch, st.integers(0, 2)).map(lambda t: BinOp("**", t[0], Const(t[1], I32), I32)),
        st.tuples(st.sampled_from(["<<", ">>"]), ch, st.integers(0, 3)).map(
            lambda t: BinOp(t[0], t[1], Const(t[2], I32), I32)),
        ch.map(lambda x: UnaryOp("neg", x, I32)),
        ch.map(lambda x: UnaryOp("~", x, I32)),
        st.tuples(ch, ch, ch).map(lambda t: Select(BinOp("<", t[0], t[1], B), t[1], t[2], I32)),
    ),
    max_leaves=8,
)
bools = st.recursive(
    st.one_of(st.sampled_from([p, q]),
              st.tuples(st.sampled_from(["<", "<=", "==", "!=", ">", ">="]), ints, ints).map(
                  lambda t: BinOp(t[0], t[1], t[2], B))),
    lambda ch: st.one_of(
        st.tuples(st.sampled_from(["and", "or", "==", "!="]), ch, ch).map(lambda t: BinOp(t[0], t[1], t[2], B)),
        ch.map(lambda x: UnaryOp("not", x, B)),
    ),
    max_leaves=6,
)

FAKE_T = types.SimpleNamespace(
    max=max, min=min, if_then_else=lambda cond, x, y: x if cond else y,
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(ints, bools), st.integers(0, 10**6))
def test_printed_expression_evaluates_like_the_tree(e: Expr, seed: int) -> None:
    text = str(e)
    rng = random.Random(seed)
    for _ in range(4):
        env = {a: rng.randint(-6, 6), b: rng.randint(-6, 6), c: rng.randint(0, 9),
               p: rng.random() < 0.5, q: rng.random() < 0.5}
        try:
            want = evaluate(e, env)
        except (ZeroDivisionError, ValueError, OverflowError):
            continue
        got = eval(text, {"T": FAKE_T, "True": True, "False": False}, {v.name: x for v, x in env.items()})
        assert got == want, f"{text}: {got} != {want} at {env}"


def test_literals_and_calls() -> None:
    assert str(Const(3, I32)) == "3"
    assert str(Const(3, dtypes.int64)) == "T.int64(3)"
    assert str(Const(0.5, dtypes.float32)) == "0.5"
    assert str(Const(0.5, dtypes.float16)) == "T.float16(0.5)"
    assert str(BinOp("min", a, b, I32)) == "T.min(a, b)"
    assert str(BinOp("*", a, Const(-3, I32), I32)) == "a * -3"
    assert str(BinOp("**", Const(-3, I32), a, I32)) == "(-3) ** a"
    assert str(BinOp("==", BinOp("<", a, b, B), p, B)) == "(a < b) == p"
    assert str(BinOp("==", UnaryOp("not", p, B), q, B)) == "(not p) == q"


def _kernel(name_clash: bool = False) -> PrimFunc:
    m = Var("m")
    A = Buffer("A", (m, 64), dtypes.float16)
    C = Buffer("C", (m, 64), dtypes.float32)
    bx = Var("bx")
    A_s = Buffer("A_s", (32, 64), dtypes.float16, "shared")
    B_s = Buffer("B_s", (64, 64), dtypes.float16, "shared")
    C_f = Buffer("C_f", (32, 64), dtypes.float32, "fragment")
    i, j = Var("i"), Var("i" if name_clash else "j")
    body = Kernel((m // 32,), (bx,), (128,), Seq((
        Alloc(A_s), Alloc(B_s), Alloc(C_f),
        Annotate("layout", ((A_s, make_swizzled_layout(A_s)),)),
        Fill(Region.full(C_f), Const(0.0, dtypes.float32)),
        For(Var("k"), Const(4, I32), "pipelined", Seq((
            Copy(Region(A, (bx * 32, Const(0, I32)), (Const(32, I32), Const(64, I32))), Region.full(A_s)),
            Gemm(Region.full(A_s), Region.full(B_s), Region.full(C_f)),
        )), annotations=(("num_stages", 3),)),
        For(i, Const(32, I32), "parallel", For(j, Const(64, I32), "parallel",
            If(bx * 32 + i < m, Store(C, (bx * 32 + i, j), C_f[i, j])))),
    )))
    return PrimFunc("gemm", (A, C, m), body, out_idx=(1,))


def test_function_text_reads_like_tilelang() -> None:
    text = _kernel().script()
    assert text == """\
# out_idx=[1]
@T.prim_func
def gemm(A: T.Tensor((m, 64), float16), C: T.Tensor((m, 64), float32), m: int32):
    with T.Kernel(m // 32, threads=128) as (bx):
        A_s = T.alloc_shared((32, 64), float16)
        B_s = T.alloc_shared((64, 64), float16)
        C_f = T.alloc_fragment((32, 64), float32)
        T.annotate('layout', ((A_s, T.Layout((32, 64), lambda i, j: (i, j % 8 + (i % 8 ^ j // 8) * 8))),))
        T.fill(dst=C_f, value=0.0)
        for k in T.Pipelined(4, num_stages=3):
            T.copy(src=A[bx * 32:bx * 32 + 32, :64], dst=A_s)
            T.gemm(A=A_s, B=B_s, C=C_f)
        for i in T.Parallel(32):
            for j in T.Parallel(64):
                if bx * 32 + i < m:
                    C[bx * 32 + i, j] = C_f[i, j]"""


def test_text_is_deterministic_and_disambiguates_names() -> None:
    assert _kernel().script() == _kernel().script()
    clash = _kernel(name_clash=True).script()
    assert "for i_1 in T.Parallel(64):" in clash and "C_f[i, i_1]" in clash
