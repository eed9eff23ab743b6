"""CUDA layout inference: mma fragment ownership (backends.md A1), derived row layouts, and
conflicts named with both lines."""

from __future__ import annotations

import pytest

from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.errors import LayoutError
from tilelang_x.plugins.cuda.layout import (
    default_fragment,
    drop_dims,
    local_map,
    mma_a_fragment,
    mma_c_fragment,
)


def _eval(e: E.Expr, env: dict) -> int:
    if isinstance(e, E.Const):
        return int(e.value)
    if isinstance(e, E.Var):
        return env[e.name]
    a, b = _eval(e.a, env), _eval(e.b, env)
    ops = {"+": lambda: a + b, "*": lambda: a * b, "//": lambda: a // b, "%": lambda: a % b}
    return ops[e.op]()


def _owned(frag, tx: int, v: int) -> tuple[int, ...]:
    tv, vv = E.Var("tx"), E.Var("v")
    return tuple(_eval(c, {"tx": tx, "v": v}) for c in frag.coords(tv, vv))


def test_mma_accumulator_matches_a1() -> None:
    frag = mma_c_fragment(16, 8, 1, 1)
    assert frag.num_local == 4
    for lane in range(32):
        g, q = lane >> 2, lane & 3
        expect = [(g, 2 * q), (g, 2 * q + 1), (g + 8, 2 * q), (g + 8, 2 * q + 1)]
        assert [_owned(frag, lane, r) for r in range(4)] == expect


def test_mma_a_operand_matches_a1() -> None:
    frag = mma_a_fragment(16, 16, 1, 1)
    for lane in range(32):
        g, q = lane >> 2, lane & 3
        regs = [(g, 2 * q), (g + 8, 2 * q), (g, 2 * q + 8), (g + 8, 2 * q + 8)]  # a0..a3, low half
        assert [_owned(frag, lane, 2 * r) for r in range(4)] == regs
        assert [_owned(frag, lane, 2 * r + 1) for r in range(4)] == [(m, k + 1) for m, k in regs]


def test_every_element_owned_once() -> None:
    frag = mma_c_fragment(128, 128, 2, 2)
    seen = {_owned(frag, t, v) for t in range(128) for v in range(frag.num_local)}
    assert len(seen) == 128 * 128


def test_row_statistic_is_replicated_over_the_row_owners() -> None:
    acc = mma_c_fragment(64, 64, 4, 1)
    row = drop_dims(acc, [0])
    assert row.shape == (64,) and row.num_local == 2
    for t in range(128):
        for v in range(row.num_local):
            (i,) = _owned(row, t, v)
            assert any(_owned(acc, t, w)[0] == i for w in range(acc.num_local))
    # the four lanes of a quad share rows: replication covers the quad (stride 1, extent 4)
    assert any(d.stride == 1 and d.extent == 4 for d in row.rep)


def test_c_to_a_fragment_is_a_register_move() -> None:
    c = mma_c_fragment(64, 64, 4, 1)
    a = mma_a_fragment(64, 64, 4, 1)
    assert local_map(a, [0, 1], c) is not None
    assert local_map(mma_c_fragment(64, 64, 2, 2), [0, 1], a) is None


def test_default_fragment_is_coalesced() -> None:
    f = default_fragment((4, 256), 128, 4)
    assert f.num_local == 8
    assert [_owned(f, t, 0) for t in range(3)] == [(0, 0), (0, 4), (0, 8)]
    assert _owned(f, 0, 1) == (0, 1)


def test_conflicting_gemm_policies_name_both_lines() -> None:
    T = pytest.importorskip("tilelang_x.language")
    from tests.null.cuda_helpers import cuda_source

    try:
        @T.prim_func
        def main(A: T.Tensor((64, 32), T.float16), B: T.Tensor((32, 64), T.float16), C: T.Tensor((64, 64), T.float32)):
            with T.Kernel(1, threads=128) as _bx:
                A_s = T.alloc_shared((64, 32), T.float16)
                B_s = T.alloc_shared((32, 64), T.float16)
                C_f = T.alloc_fragment((64, 64), T.float32)
                T.copy(A[0, 0], A_s)
                T.copy(B[0, 0], B_s)
                T.gemm(A_s, B_s, C_f, policy=T.GemmWarpPolicy.FullRow)
                T.gemm(A_s, B_s, C_f, policy=T.GemmWarpPolicy.FullCol)
                T.copy(C_f, C[0, 0])
    except Exception as exc:  # frontend not ready
        pytest.skip(f"frontend cannot build the kernel: {exc}")
    import re

    with pytest.raises(LayoutError) as info:
        cuda_source(main)
    lines = [int(x) for x in re.findall(r"T\.gemm at line (\d+)", str(info.value))]
    assert len(lines) == 2 and lines[1] == lines[0] + 1, str(info.value)
