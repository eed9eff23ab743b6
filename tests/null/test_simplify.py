"""The index simplifier: exactness (property tests against a reference evaluator), idempotence,
sound interval and modular analysis, and the canonical forms backends rely on."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir.buffer import Buffer
from tilelang_x.core_ir.expr import BinOp, Cast, Const, Expr, Select, UnaryOp, Var, binary, cast, select
from tilelang_x.core_ir.simplify import (
    as_linear,
    bounds_of,
    divisible,
    evaluate,
    modular,
    prove,
    simplify,
    simplify_stmt,
)
from tilelang_x.core_ir.stmt import For, If, Kernel, Seq, Store

I32 = dtypes.int32
B = dtypes.bool_

x, y, z, w = Var("x"), Var("y"), Var("z"), Var("w")
BOUNDS = {x: (0, 15), y: (-8, 8), z: (0, 100)}  # w is unbounded
SAMPLE = {x: (0, 15), y: (-8, 8), z: (0, 100), w: (-60, 60)}
VARS = [x, y, z, w]

PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---- random expressions ---------------------------------------------------------------------

def _int(v: int) -> Const:
    return Const(v, I32)


leaf = st.one_of(
    st.sampled_from(VARS),
    st.integers(-10, 10).map(_int),
    st.sampled_from([1, 2, 4, 8, 16, 32, 64, 3, 6, 12]).map(_int),
)


def _int_exprs(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    const_div = st.sampled_from([1, 2, 3, 4, 8, 16, -2, -4, 5, 32])
    pos = st.sampled_from([x, z]).map(lambda v: BinOp("+", v, _int(1), I32))
    cmp = st.tuples(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), children, children).map(
        lambda t: BinOp(t[0], t[1], t[2], B))
    return st.one_of(
        st.tuples(st.sampled_from(["+", "-", "*", "min", "max"]), children, children).map(
            lambda t: BinOp(t[0], t[1], t[2], I32)),
        st.tuples(st.sampled_from(["//", "%", "/"]), children, const_div).map(
            lambda t: BinOp(t[0], t[1], _int(t[2]), I32)),
        st.tuples(st.sampled_from(["//", "%"]), children, st.one_of(pos, children)).map(
            lambda t: BinOp(t[0], t[1], t[2], I32)),
        st.tuples(cmp, children, children).map(lambda t: Select(t[0], t[1], t[2], I32)),
        st.tuples(cmp, cmp, st.sampled_from(["and", "or"]), children, children).map(
            lambda t: Select(BinOp(t[2], t[0], t[1], B), t[3], t[4], I32)),
        children.map(lambda a: UnaryOp("neg", a, I32)),
        children.map(lambda a: UnaryOp("~", a, I32)),
        st.tuples(st.sampled_from(["<<", ">>"]), children, st.integers(0, 4)).map(
            lambda t: BinOp(t[0], t[1], _int(t[2]), I32)),
        st.tuples(st.sampled_from(["&", "|", "^"]), children, st.one_of(children, st.sampled_from(
            [0, 1, 3, 7, 15, -1, 6]).map(_int))).map(lambda t: BinOp(t[0], t[1], t[2], I32)),
    )


int_exprs = st.recursive(leaf, _int_exprs, max_leaves=12)

# Index arithmetic as kernels and layouts write it: sums of scaled terms, // and % by powers of
# two (and a few others), XOR swizzles. These reach the div/mod splitting and merging rules.
_pow2 = st.sampled_from([1, 2, 4, 8, 16, 32, 64])


def _index_exprs(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    return st.one_of(
        st.tuples(children, _pow2, children).map(lambda t: BinOp("+", BinOp("*", t[0], _int(t[1]), I32), t[2], I32)),
        st.tuples(children, st.sampled_from([2, 4, 8, 16, 32, 3, 6])).map(lambda t: BinOp("//", t[0], _int(t[1]), I32)),
        st.tuples(children, st.sampled_from([2, 4, 8, 16, 32, 3, 6])).map(lambda t: BinOp("%", t[0], _int(t[1]), I32)),
        st.tuples(children, _pow2, _pow2).map(
            lambda t: BinOp("%", BinOp("//", t[0], _int(t[1]), I32), _int(t[2]), I32)),
        st.tuples(children, children).map(lambda t: BinOp("-", t[0], t[1], I32)),
        st.tuples(children, _pow2, children).map(
            lambda t: BinOp("^", BinOp("%", t[0], _int(t[1]), I32), BinOp("%", t[2], _int(t[1]), I32), I32)),
        st.tuples(children, children).map(lambda t: BinOp("min", t[0], t[1], I32)),
        st.tuples(children, _pow2, st.integers(-9, 9)).map(
            lambda t: BinOp("+", BinOp("*", t[0], _int(t[1]), I32), _int(t[2]), I32)),
        st.tuples(children, st.sampled_from([2, 4, -4, 3])).map(lambda t: BinOp("/", t[0], _int(t[1]), I32)),
        st.tuples(children, st.sampled_from([dtypes.int8, dtypes.int64, dtypes.int16])).map(
            lambda t: Cast(Cast(t[0], t[1]), I32)),
        st.tuples(children, st.sampled_from([x, z])).map(
            lambda t: BinOp("/", t[0], BinOp("+", t[1], _int(1), I32), I32)),
    )


index_leaf = st.one_of(st.sampled_from(VARS), st.integers(-3, 70).map(_int))
index_exprs = st.recursive(index_leaf, _index_exprs, max_leaves=10)
any_int = st.one_of(int_exprs, index_exprs)
bool_exprs = st.one_of(
    st.tuples(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), int_exprs, int_exprs).map(
        lambda t: BinOp(t[0], t[1], t[2], B)),
    st.tuples(st.sampled_from(["and", "or"]),
              st.tuples(st.sampled_from(["<", "==", ">="]), int_exprs, int_exprs),
              st.tuples(st.sampled_from(["<", "!=", "<="]), int_exprs, int_exprs)).map(
        lambda t: BinOp(t[0], BinOp(t[1][0], t[1][1], t[1][2], B), BinOp(t[2][0], t[2][1], t[2][2], B), B)),
).flatmap(lambda c: st.sampled_from([c, UnaryOp("not", c, B)]))


F64 = dtypes.float64
fa, fb = Var("fa", F64), Var("fb", F64)
flag = Var("flag", B)
_fconst = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, 0.1, 1e308, float("inf"), float("nan")]).map(
    lambda v: Const(v, F64))
float_exprs = st.recursive(
    st.one_of(st.sampled_from([fa, fb]), _fconst, int_exprs.map(lambda e: Cast(e, F64))),
    lambda ch: st.one_of(
        st.tuples(st.sampled_from(["+", "-", "*", "/", "min", "max"]), ch, ch).map(
            lambda t: BinOp(t[0], t[1], t[2], F64)),
        ch.map(lambda a: UnaryOp("neg", a, F64)),
        st.tuples(ch, ch).map(lambda t: Select(BinOp("<", t[0], t[1], B), t[0], t[1], F64)),
        st.tuples(ch, ch).map(lambda t: Select(flag, t[0], t[1], F64)),
    ),
    max_leaves=8,
)
FLOATS = [0.0, -0.0, 1.5, -3.25, float("inf"), float("nan"), 7.0]


def _assignments(seed: int, n: int = 24) -> list[dict[Var, int]]:
    rng = random.Random(seed)
    out = []
    for k in range(n):
        if k < 2:  # the corners of the box
            out.append({v: SAMPLE[v][k] for v in VARS})
        else:
            out.append({v: rng.randint(*SAMPLE[v]) for v in VARS})
        out[-1].update({fa: rng.choice(FLOATS), fb: rng.choice(FLOATS), flag: rng.random() < 0.5})
    return out


def _value(e: Expr, env: dict[Var, int]) -> int | None:
    try:
        return evaluate(e, env)
    except (ZeroDivisionError, ValueError):
        return None


def _check_same(e: Expr, s: Expr, seed: int) -> int:
    """``s`` agrees with ``e`` wherever ``e`` is defined; returns how many points were checked."""
    checked = 0
    for env in _assignments(seed):
        want = _value(e, env)
        if want is None:
            continue
        got = evaluate(s, env)
        assert int(got) == int(want), f"{e}  ->  {s}  at {env}: {got} != {want}"
        checked += 1
    return checked


# ---- properties -----------------------------------------------------------------------------

@PROPS
@given(any_int, st.integers(0, 10**6))
def test_simplify_is_exact_on_integers(e: Expr, seed: int) -> None:
    s = simplify(e, BOUNDS)
    assume(_check_same(e, s, seed) > 0)


@PROPS
@given(bool_exprs, st.integers(0, 10**6))
def test_simplify_is_exact_on_conditions(e: Expr, seed: int) -> None:
    s = simplify(e, BOUNDS)
    assert s.dtype == B
    assume(_check_same(e, s, seed) > 0)


@PROPS
@given(st.one_of(int_exprs, index_exprs, bool_exprs))
def test_simplify_is_idempotent(e: Expr) -> None:
    once = simplify(e, BOUNDS)
    twice = simplify(once, BOUNDS)
    assert twice.same_as(once), f"{e}: {once} then {twice}"


@PROPS
@given(any_int, st.integers(0, 10**6))
def test_bounds_contain_every_value(e: Expr, seed: int) -> None:
    lo, hi = bounds_of(e, BOUNDS)
    for env in _assignments(seed):
        v = _value(e, env)
        if v is None:
            continue
        assert lo is None or lo <= v, f"{e} = {v} < {lo} at {env}"
        assert hi is None or v <= hi, f"{e} = {v} > {hi} at {env}"


@PROPS
@given(any_int, st.integers(0, 10**6))
def test_modular_is_sound(e: Expr, seed: int) -> None:
    coeff, base = modular(e)
    for env in _assignments(seed):
        v = _value(e, env)
        if v is None:
            continue
        if coeff == 0:
            assert v == base, f"{e} = {v}, claimed constant {base}"
        else:
            assert (v - base) % coeff == 0, f"{e} = {v}, claimed {coeff}*n + {base}"


@PROPS
@given(bool_exprs, st.integers(0, 10**6))
def test_prove_is_sound(e: Expr, seed: int) -> None:
    verdict = prove(e, BOUNDS)
    if verdict is None:
        return
    for env in _assignments(seed):
        v = _value(e, env)
        if v is not None:
            assert bool(v) == verdict, f"prove({e}) = {verdict} but it is {v} at {env}"


@PROPS
@given(any_int, st.sampled_from([2, 4, 8, 3]), st.integers(0, 10**6))
def test_divisible_is_sound(e: Expr, k: int, seed: int) -> None:
    if not divisible(e, k, BOUNDS):
        return
    for env in _assignments(seed):
        v = _value(e, env)
        if v is not None:
            assert v % k == 0, f"{e} = {v} claimed divisible by {k}"


def _same_float(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


@PROPS
@given(float_exprs, st.integers(0, 10**6))
def test_float_rewrites_are_bit_exact(e: Expr, seed: int) -> None:
    s = simplify(e, BOUNDS)
    for env in _assignments(seed, 12):
        try:
            want = evaluate(e, env)
        except (ZeroDivisionError, OverflowError, ValueError):
            continue
        got = evaluate(s, env)
        assert _same_float(float(got), float(want)), f"{e} -> {s} at {env}: {got} != {want}"


# ---- canonical forms ------------------------------------------------------------------------

i, j, k, n, m = Var("i"), Var("j"), Var("k"), Var("n"), Var("m")
bx, by = Var("bx"), Var("by")
IB = {i: (0, 15), j: (0, 7), k: (0, 63)}


def s(e: Expr, bounds: dict | None = None) -> str:
    return str(simplify(e, IB if bounds is None else bounds))


@pytest.mark.parametrize("expr, text", [
    (lambda: i + 0, "i"),
    (lambda: i * 1, "i"),
    (lambda: i * 0, "0"),
    (lambda: i - i, "0"),
    (lambda: (i + j) - (j + i), "0"),
    (lambda: j + i, "i + j"),
    (lambda: i + j, "i + j"),
    (lambda: 2 + i + 3, "i + 5"),
    (lambda: (bx * 128 + i) * 4 + 3, "bx * 512 + i * 4 + 3"),
    (lambda: -i + 5, "5 - i"),
    (lambda: n - i, "n - i"),
    (lambda: (i + 1) * (i - 1), "i * i - 1"),
    (lambda: (i * 8 + j) // 8, "i"),
    (lambda: (i * 8 + j) % 8, "j"),
    (lambda: (i * 8 + j + 8) // 8, "i + 1"),
    (lambda: (i * 16 + j) // 8, "i * 2"),
    (lambda: (i * 4 + j % 4) // 8, "i // 2"),
    (lambda: (i * 4 + j % 4) % 8, "i % 2 * 4 + j % 4"),
    (lambda: (n * 8) % 8, "0"),
    (lambda: (n * 8) // 8, "n"),
    (lambda: (n * 8 + 4) // 8, "n"),
    (lambda: (n + 5) // 4, "(n + 1) // 4 + 1"),
    (lambda: (n // 4) // 8, "n // 32"),
    (lambda: (n % 8) % 4, "n % 4"),
    (lambda: (n % 4) % 8, "n % 4"),
    (lambda: n // 8 * 8 + n % 8, "n"),
    (lambda: n // 8 % 4 * 8 + n % 8, "n % 32"),
    (lambda: n // -2, "-n // 2"),
    (lambda: (k >> 3), "k // 8"),
    (lambda: (k << 2), "k * 4"),
    (lambda: (k & 7), "k % 8"),
    (lambda: k ^ 0, "k"),
    (lambda: binary("min", i, i + 3), "i"),
    (lambda: binary("max", i, k + 16), "k + 16"),
    (lambda: binary("max", n + 3, m + 3), "T.max(m, n) + 3"),
    (lambda: binary("min", n, m), "T.min(m, n)"),
    (lambda: binary("min", m, n), "T.min(m, n)"),
    (lambda: i < 16, "True"),
    (lambda: i >= 16, "False"),
    (lambda: i < n, "i < n"),
    (lambda: n > i, "i < n"),
    (lambda: i + 1 <= n, "i + 1 <= n"),
    (lambda: i <= 7 + n, "i <= n + 7"),
    (lambda: 4 * n < 8, "n < 2"),
    (lambda: 4 * n - 7 < 0, "n < 2"),
    (lambda: 4 * n <= 7, "n <= 1"),
    (lambda: 4 * n + 6 <= 2 * m, "n * 2 + 3 <= m"),
    (lambda: n * 2 == 3, "False"),
    (lambda: (n == i), "i == n"),
    (lambda: (i == n), "i == n"),
    (lambda: (n * 4 == 8), "n == 2"),
    (lambda: (i < 4) & (i < 8), "i < 4"),
    (lambda: (i < 4) | (i < 8), "i < 8"),
    (lambda: ~(i < n), "n <= i"),
    (lambda: select(i < 16, n, m), "n"),
    (lambda: select(n < 4, select(n < 8, i, j), k), "T.if_then_else(n < 4, i, k)"),
    (lambda: select(n < m, i, i), "i"),
    (lambda: cast(n, dtypes.int32), "n"),
])
def test_canonical_forms(expr, text) -> None:
    assert s(expr()) == text


def test_bool_select_becomes_condition() -> None:
    assert str(simplify(Select(n < m, Const(True, B), Const(False, B), B))) == "n < m"
    assert str(simplify(Select(n < m, Const(False, B), Const(True, B), B))) == "m <= n"


def test_casts_of_constants_fold_with_rounding_and_wrap() -> None:
    assert simplify(Cast(Const(300, I32), dtypes.int8)).value == 44
    assert simplify(Cast(Const(-1.7, dtypes.float32), I32)).value == -1
    third = simplify(Cast(Const(1 / 3, dtypes.float64), dtypes.float16)).value
    assert third == 0.333251953125
    assert simplify(Cast(Const(3, I32), B)).value is True


def test_float_rewrites_are_exact_only() -> None:
    f = Var("f", dtypes.float32)
    one, zero, nzero = (Const(v, dtypes.float32) for v in (1.0, 0.0, -0.0))
    assert simplify(BinOp("*", f, one, dtypes.float32)) is f
    assert simplify(BinOp("/", f, one, dtypes.float32)) is f
    assert simplify(BinOp("-", f, zero, dtypes.float32)) is f
    assert simplify(BinOp("+", f, nzero, dtypes.float32)) is f
    # f + 0.0 turns -0.0 into +0.0 and f * 0.0 is not 0 for inf/nan: both must stay
    assert str(simplify(BinOp("+", f, zero, dtypes.float32))) == "f + 0.0"
    assert str(simplify(BinOp("*", f, zero, dtypes.float32))) == "f * 0.0"
    folded = simplify(BinOp("+", Const(0.1, dtypes.float32), Const(0.2, dtypes.float32), dtypes.float32))
    assert folded.value == float(np.float32(np.float32(0.1) + np.float32(0.2)))


def test_loads_keep_their_buffer_and_simplify_indices() -> None:
    A = Buffer("A", (16, 8), dtypes.float16, "shared")
    e = A[(i * 8 + j) // 8, (i * 8 + j) % 8]
    out = simplify(e, IB)
    assert out.buffer is A and str(out) == "A[i, j]"


def test_same_named_vars_stay_distinct_and_ordered() -> None:
    a, b = Var("t"), Var("t")
    assert str(simplify(a - b)) == "t - t_1"  # not folded to 0: they are different variables
    # equal names: the variable that appears first in the input comes first
    assert simplify(b + a * 2).a is b and simplify(a * 2 + b).a.a is a


def test_text_is_deterministic_across_fresh_variables() -> None:
    def build() -> str:
        p, q, r = Var("p"), Var("q"), Var("r")
        return str(simplify((r + q * 3 + p) * 2 - q, {p: (0, 3)}))
    assert build() == build() == "p * 2 + q * 5 + r * 2"


def test_bounds_of_examples() -> None:
    assert bounds_of(i * 8 + j, IB) == (0, 127)
    assert bounds_of((i * 8 + j) // 4, IB) == (0, 31)
    assert bounds_of(k % 8, IB) == (0, 7)
    assert bounds_of(n % 8) == (0, 7)
    assert bounds_of(n) == (None, None)
    assert bounds_of(binary("min", n, 5)) == (None, 5)
    assert bounds_of(k ^ (i % 8), IB) == (0, 63)
    assert bounds_of(i - i) == (0, 0)


def test_modular_examples() -> None:
    assert modular(i * 8 + 4) == (8, 4)
    assert modular((i * 8 + 4) // 2) == (4, 2)
    assert modular(i * 6 + j * 4) == (2, 0)
    assert modular(Const(12, I32)) == (0, 12)
    assert modular((i * 8 + 3) % 4) == (0, 3)
    assert modular(n, {n: (16, 0)}) == (16, 0)
    assert modular(n * 4 + m) == (1, 0)


def test_prove_and_divisible() -> None:
    assert prove(i * 8 + j < 128, IB) is True
    assert prove(i * 8 + j < 127, IB) is None
    assert prove(i > 20, IB) is False
    assert divisible(bx * 128 + i * 8, 8, IB)
    assert not divisible(bx * 128 + i * 8 + j, 8, IB)
    assert divisible((i * 16 + 8) // 2, 4)


def test_as_linear() -> None:
    assert as_linear(bx * 128 + i * 4 + 3) == ([(128, bx), (4, i)], 3)
    assert as_linear(i * n) is None
    terms, c = as_linear((i * 8 + j) // 4 + k, IB)
    assert c == 0 and [t[0] for t in terms] == [2, 1, 1]


def test_evaluate_semantics() -> None:
    env = {n: -7, m: 2}
    assert evaluate(n // m, env) == -4
    assert evaluate(n % m, env) == 1
    assert evaluate(BinOp("/", n, m, I32), env) == -3
    arr = evaluate(n // 4, {n: np.arange(-4, 4)})
    assert list(arr) == [-1, -1, -1, -1, 0, 0, 0, 0]


# ---- statements -----------------------------------------------------------------------------

def test_simplify_stmt_uses_loop_ranges_and_drops_decided_branches() -> None:
    A = Buffer("A", (128,), dtypes.float32)
    ii, jj = Var("i"), Var("j")
    store = Store(A, ((ii * 8 + jj) // 8 * 8 + (ii * 8 + jj) % 8,), Const(1.0, dtypes.float32))
    guarded = If(ii * 8 + jj < 128, store)
    dead = If(ii > 100, Store(A, (ii,), Const(2.0, dtypes.float32)))
    body = For(ii, Const(16, I32), "parallel", For(jj, Const(8, I32), "parallel", Seq((guarded, dead))))
    gx = Var("gx")
    kern = Kernel((Const(1, I32),), (gx,), (128,), body)
    out = simplify_stmt(kern)
    text = str(out)
    assert "if" not in text
    assert "A[i * 8 + j] = 1.0" in text


def test_simplify_stmt_refines_inside_if_and_keeps_unchanged_nodes() -> None:
    A = Buffer("A", (64,), dtypes.float32)
    nn = Var("n")
    ii = Var("i")
    inner = If(ii < 32, Store(A, (select(ii < 40, ii, nn),), Const(0.0, dtypes.float32)))
    loop = For(ii, nn, "serial", inner)
    out = simplify_stmt(loop)
    assert "A[i] = 0.0" in str(out)
    untouched = For(ii, Const(4, I32), "serial", Store(A, (ii,), Const(0.0, dtypes.float32)))
    assert simplify_stmt(untouched) is untouched


@pytest.mark.parametrize("op,x,y,want", [
    ("<<", 1, 3, 8), (">>", -16, 2, -4), ("/", -7, 2, -3), ("//", -7, 2, -4), ("%", -7, 2, 1),
    ("<<", 1, -1, None), (">>", 1, 64, None), ("//", 5, 0, None), ("%", 5, 0, None), ("/", 5, 0, None),
])
def test_constant_folding_agrees_between_the_builder_and_the_simplifier(op: str, x: int, y: int,
                                                                        want: int | None) -> None:
    """Both fold through ``expr.fold_int``; what has no value (a negative shift, a division by
    zero) stays an expression instead of raising from Python."""
    e = binary(op, Const(x, dtypes.int32), Const(y, dtypes.int32))
    s = simplify(BinOp(op, Const(x, dtypes.int32), Const(y, dtypes.int32), dtypes.int32))
    if want is None:
        assert isinstance(e, BinOp) and isinstance(s, BinOp)
    else:
        assert isinstance(e, Const) and e.value == want and isinstance(s, Const) and s.value == want


def test_a_left_shift_that_may_wrap_is_not_a_multiplication() -> None:
    """``(v << 28) >> 28`` sign-extends the low nibble of an int32: it is ``v`` only when ``v << 28``
    cannot leave int32's range."""
    v = Var("v")
    wraps = binary(">>", binary("<<", v, 28), 28)
    assert simplify(wraps) is not v and str(simplify(wraps)) != "v"
    assert bounds_of(binary("<<", v, 28), {v: (0, 15)}) == (None, None)  # 15 << 28 wraps
    assert bounds_of(binary("<<", v, 28), {v: (0, 7)}) == (0, 7 << 28)
    assert str(simplify(wraps, {v: (0, 7)})) == "v"
