"""The CUDA codegen's interval analysis (plugins/cuda/analysis.py): every value an expression takes
lies in its bounds, which is what lets codegen print unsigned divisions and drop bound checks."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir import expr as E
from tilelang_x.plugins.cuda.analysis import bounds

ranges = st.tuples(st.integers(-50, 50), st.integers(0, 60)).map(lambda r: (r[0], r[0] + r[1]))


@given(ranges, st.tuples(st.integers(1, 20), st.integers(0, 20)).map(lambda r: (r[0], r[0] + r[1])),
       st.sampled_from(["%", "//", "min", "max", "+", "-", "*"]))
def test_bounds_hold_for_a_divisor_with_a_range(a: tuple[int, int], b: tuple[int, int], op: str) -> None:
    x, y = E.Var("x", dtypes.int32), E.Var("y", dtypes.int32)
    got = bounds(E.binary(op, x, y), {x: a, y: b})
    py = {"%": lambda p, q: p % q, "//": lambda p, q: p // q, "min": min, "max": max,
          "+": lambda p, q: p + q, "-": lambda p, q: p - q, "*": lambda p, q: p * q}[op]
    if op == "%":  # a positive divisor bounds the floor modulo, whatever its range
        assert got is not None
    if got is not None:
        assert all(got[0] <= py(p, q) <= got[1] for p in range(a[0], a[1] + 1) for q in range(b[0], b[1] + 1))
