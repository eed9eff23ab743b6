"""The in-thread part of T.reduce_* on CUDA (``lower/reduce._in_thread``), checked without a GPU:
each destination slot gets the reduction of exactly the registers the loop form
(``red[slot(v)] = red[slot(v)] op x[v]``) would give it, as one balanced tree."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.buffer import Buffer
from tilelang_x.core_ir.evaluate import evaluate
from tilelang_x.core_ir.stmt import Store
from tilelang_x.plugins.cuda.layout import slot_expr
from tilelang_x.plugins.cuda.lower.reduce import _in_thread

#: (source registers, destination slots, terms ``(loop_stride, extent, slot_stride, _)``)
LAYOUTS = [
    (64, 2, [(2, 2, 1, 0)]),  # the wgmma accumulator's two rows (FlashAttention's scores)
    (8, 4, [(1, 4, 1, 0)]),  # four columns per thread, two rows reduced away
    (16, 4, [(4, 2, 1, 0), (1, 2, 2, 0)]),
    (5, 1, []),  # one slot, an odd count
    (4, 8, [(1, 4, 2, 0)]),  # slots no register maps to keep the identity
]


def _depth(e: E.Expr) -> int:
    """Operations on the longest dependent path of ``e``."""
    if isinstance(e, E.BinOp):
        return 1 + max(_depth(e.a), _depth(e.b))
    if isinstance(e, E.Call):
        return max((_depth(a) for a in e.args), default=0)
    if isinstance(e, E.Cast):
        return _depth(e.a)
    return 0


@pytest.mark.parametrize("kind", ["sum", "max", "min", "abssum", "absmax"])
@pytest.mark.parametrize("n,slots,terms", LAYOUTS)
def test_each_slot_reduces_its_registers_as_a_tree(kind: str, n: int, slots: int, terms: list) -> None:
    src = Buffer("x", (n,), dtypes.float32, "local")
    red = Buffer("red", (slots,), dtypes.float32, "local")

    def value(v: E.Expr) -> E.Expr:
        x: E.Expr = E.Load(src, (v,))
        return E.call("abs", x) if kind.startswith("abs") else x

    stores = _in_thread(kind, red, terms, n, value, dtypes.float32)
    assert all(isinstance(s, Store) and s.buffer is red for s in stores)
    assert sorted(E.as_int(s.indices[0]) for s in stores) == list(range(slots))
    rng = random.Random(n * slots)
    xs = np.array([rng.uniform(-4, 4) for _ in range(n)], dtype=np.float64)
    want = {s: [] for s in range(slots)}
    for v in range(n):
        want[E.as_int(slot_expr(terms, E.const(v)))].append(abs(xs[v]) if kind.startswith("abs") else xs[v])
    fold = {"sum": sum, "abssum": sum, "max": max, "absmax": max, "min": min}[kind]
    empty = {"sum": 0.0, "abssum": 0.0, "max": -math.inf, "absmax": 0.0, "min": math.inf}[kind]
    for s in stores:
        got = evaluate(s.value, {src: xs})
        vals = want[E.as_int(s.indices[0])]
        assert got == pytest.approx(fold(vals) if vals else empty)
        if vals:
            assert _depth(s.value) <= math.ceil(math.log2(len(vals))) + 2


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_switch_keeps_the_loop_form(arch: str) -> None:
    from tests.null.cuda_helpers import cuda_source
    from tests.null.cuda_suite_funcs import suite_funcs

    func = suite_funcs()["softmax_rows"]
    tree, _ = cuda_source(func(), arch, {"tlx.tree_reduce": True})
    loop, _ = cuda_source(func(), arch)  # off by default until measured on a GPU
    chain = "red_2[0] = fmaxf(red_2[0], x[v_4]);"  # the running value, one register at a time
    assert chain in loop and chain not in tree and "red_2[0] = fmaxf(fmaxf(fmaxf(x[0], x[1]), " in tree
