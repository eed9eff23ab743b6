"""``tlx.unswitch_masks`` (plugins/cuda/unswitch_mask.py), checked without a GPU: the guard is exact
(it holds iff the mask is true for every parallel iteration), the If appears only with the key on,
the suite kernels still generate for sm_80 and sm_90a, and the transformed causal FlashAttention
computes the same result in the interpreter."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from tests.null.cuda_suite_funcs import suite_funcs
from tilelang_x.core_ir import dtypes as D
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.buffer import Buffer
from tilelang_x.core_ir.stmt import For, If, Seq, Store
from tilelang_x.core_ir.visit import walk
from tilelang_x.plugins.cuda.unswitch_mask import KEY, unswitch_masks

FUNCS = suite_funcs()
ON = {KEY: True}


def _eval(e: E.Expr, env: dict[int, int]) -> int:
    if isinstance(e, E.Const):
        return int(e.value)
    if isinstance(e, E.Var):
        return env[id(e)]
    if isinstance(e, E.BinOp):
        a, b = _eval(e.a, env), _eval(e.b, env)
        return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else 0, "%": a % b if b else 0,
                "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b,
                "min": min(a, b), "max": max(a, b), "&&": a and b, "||": a or b,
                "and": a and b, "or": a or b}[e.op]
    if isinstance(e, E.UnaryOp) and e.op == "not":
        return not _eval(e.a, env)
    if isinstance(e, E.UnaryOp) and e.op == "neg":
        return -_eval(e.a, env)
    raise AssertionError(f"cannot evaluate {e!r}")


def _mask_loop(bm: int, bn: int, op: str, swap: bool, off: int):
    """``for k: for i, j in Parallel(bm, bn): s[i, j] = select(bx*bm + i + off  <op>  k*bn + j, 0, -inf)``
    (sides swapped when ``swap``)."""
    bx, k, i, j = E.Var("bx"), E.Var("k"), E.Var("i"), E.Var("j")
    lhs = E.binary("+", E.binary("+", E.binary("*", bx, bm), i), off)
    rhs = E.binary("+", E.binary("*", k, bn), j)
    cond = E.binary(op, rhs, lhs) if swap else E.binary(op, lhs, rhs)
    buf = Buffer("s", (bm, bn), D.float32, "fragment")
    st = Store(buf, (i, j), E.select(cond, E.const(0.0, D.float32), E.const(-np.inf, D.float32)))
    nest = For(i, E.const(bm), "parallel", For(j, E.const(bn), "parallel", st))
    return For(k, E.const(8), "serial", Seq((nest,))), bx, k, i, j, cond


@pytest.mark.parametrize("bm,bn", [(1, 1), (2, 3), (4, 4), (3, 2), (8, 4)])
@pytest.mark.parametrize("op,swap", [(">=", False), (">", False), ("<=", True), ("<", True)])
@pytest.mark.parametrize("off", [0, -3, 2])
def test_guard_is_exact(bm, bn, op, swap, off):
    loop, bx, k, i, j, cond = _mask_loop(bm, bn, op, swap, off)
    out = unswitch_masks(loop)
    guards = [n for n in walk(out) if isinstance(n, If)]
    assert len(guards) == 1
    guard = guards[0].cond
    then = [n for n in walk(guards[0].then) if isinstance(n, Store)]
    assert len(then) == 1 and isinstance(then[0].value, E.Const) and then[0].value.value == 0.0
    for bxv, kv in itertools.product(range(-3, 9), range(-3, 12)):
        env = {id(bx): bxv, id(k): kv}
        every = all(_eval(cond, {**env, id(i): iv, id(j): jv}) for iv in range(bm) for jv in range(bn))
        assert bool(_eval(guard, env)) == every, (bxv, kv, guard)


def test_skips_non_affine_and_loads():
    k, i, j = E.Var("k"), E.Var("i"), E.Var("j")
    buf = Buffer("s", (4, 4), D.float32, "fragment")
    idx = Buffer("t", (4,), D.int32, "fragment")
    for cond in (E.binary("<=", E.binary("*", i, j), k), E.binary("<=", E.Load(idx, (i,)), k),
                 E.binary("<=", E.binary("//", i, 2), k), E.binary("==", i, k)):
        st = Store(buf, (i, j), E.select(cond, E.const(0.0, D.float32), E.const(1.0, D.float32)))
        loop = For(k, E.const(4), "serial", For(i, E.const(4), "parallel", For(j, E.const(4), "parallel", st)))
        assert unswitch_masks(loop) is loop


def _source(func, arch, configs):
    from tilelang_x.compiler import _core_stages
    from tilelang_x.core_ir.stages import StageContext, run_stages
    from tilelang_x.plugins.cuda.codegen import generate
    from tilelang_x.plugins.cuda.passes import stages
    from tilelang_x.target import Target

    ctx = StageContext(Target("cuda", arch), {"pass_configs": configs})
    lowered = run_stages(func, _core_stages() + stages(ctx.target), ctx)
    return generate(lowered, ctx)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_if_only_with_key(arch):
    f = FUNCS["flash_attention_pipelined"]()
    off, on = _source(f, arch, {KEY: False}), _source(f, arch, ON)
    masked = "? 0.0f : (-__int_as_float(0x7f800000))"
    assert masked in off and masked in on  # the diagonal block keeps the mask
    assert on.count("if (") == off.count("if (") + 1
    if arch == "sm_90a":
        assert "if (((0 + k_i) + 1) <= bx)" in on and "tlx_mbar_wait" in on and "tlx_tma_load_4d" in on


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_suite_generates_with_key(arch, name):
    src = _source(FUNCS[name](), arch, ON)
    assert "__global__" in src


def _run_interp(func, *args):
    from tilelang_x.plugins.interp import plugin
    from tilelang_x.target import Target

    t = Target("interp")
    binary = plugin.tlx_compile(target=t, func=func, source=func.script(), ctx=None)
    plugin.tlx_load(target=t, func=func, binary=binary, ctx=None)(list(args), None)


def test_interp_equivalence_causal():

    from tests.kernels import attention as a
    f = a.flash_attention.get_ir(1, 1, 128, 16, True, block_M=32, block_N=16, num_stages=1, threads=128)
    g = dataclasses.replace(f, body=unswitch_masks(f.body))
    assert any(isinstance(n, If) for n in walk(g.body)) and not any(isinstance(n, If) for n in walk(f.body))
    rng = np.random.default_rng(0)
    q, kk, v = (rng.standard_normal((1, 1, 128, 16)).astype(np.float16) for _ in range(3))
    outs = []
    for fn in (f, g):
        o = np.zeros((1, 1, 128, 16), np.float16)
        _run_interp(fn, q, kk, v, o)
        outs.append(o)
    np.testing.assert_array_equal(outs[0], outs[1])
    assert np.isfinite(outs[0]).all() and np.abs(outs[0]).max() > 0
