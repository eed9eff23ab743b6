"""The interpreter's number formats: rounding to bfloat16 and float8 against torch's conversions."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tilelang_x.core_ir import dtypes as D
from tilelang_x.plugins.interp import numerics

NARROW = {
    "bfloat16": torch.bfloat16,
    "float8_e4m3": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
}


def special_values() -> np.ndarray:
    """Ties, subnormals, limits and non-finite values of every narrow format."""
    vals = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 448.0, 449.0, 464.0, 465.0, 479.0, 480.0, 1e6,
            57344.0, 61439.0, 61440.0, 65536.0, 2.0**-6, 2.0**-9, 2.0**-10, 3 * 2.0**-11, 2.0**-16, 2.0**-17,
            3 * 2.0**-18, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 1.0 + 2.0**-4, 1.0 + 3 * 2.0**-4, 1.0 + 2.0**-3,
            float.fromhex("0x1.fep127"), float.fromhex("0x1.ff8p127"), float.fromhex("0x1.ffp127"),
            2.0**-126, 2.0**-133, 2.0**-134, 3 * 2.0**-135, 1e-40, 1e-45]
    vals += [-v for v in vals]
    return np.array(vals, dtype=np.float32)


@pytest.mark.parametrize("name", list(NARROW))
def test_round_special_values_like_torch(name):
    x = special_values()
    ours = numerics.round_to(x, D.as_dtype(name))
    ref = torch.from_numpy(x).to(NARROW[name]).float().numpy()
    np.testing.assert_array_equal(ours, ref)


@pytest.mark.parametrize("name", list(NARROW))
@pytest.mark.parametrize("scale", [1e-6, 1e-2, 1.0, 100.0, 1e4, 1e30])
def test_round_random_values_like_torch(name, scale):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(20000) * scale).astype(np.float32)
    ours = numerics.round_to(x, D.as_dtype(name))
    ref = torch.from_numpy(x).to(NARROW[name]).float().numpy()
    np.testing.assert_array_equal(ours, ref)


@settings(max_examples=300, deadline=None)
@given(st.floats(width=32, allow_nan=False), st.sampled_from(list(NARROW)))
def test_round_any_float32_like_torch(value, name):
    x = np.array([value], dtype=np.float32)
    ours = numerics.round_to(x, D.as_dtype(name))
    ref = torch.from_numpy(x).to(NARROW[name]).float().numpy()
    np.testing.assert_array_equal(ours, ref)


def test_float64_source_rounds_once():
    # 1 + 2**-8 + 2**-30 is above the bfloat16 tie: a detour through float32 would lose the
    # 2**-30 and round to even (1.0); rounding once gives 1 + 2**-7.
    x = np.array([1.0 + 2.0**-8 + 2.0**-30])
    assert numerics.round_to(x, D.bfloat16)[0] == 1.0 + 2.0**-7


def test_e4m3_saturates_and_keeps_nan():
    out = numerics.round_to(np.array([1e9, -np.inf, np.inf, np.nan], np.float32), D.float8_e4m3)
    assert out[0] == 448 and out[1] == -448 and out[2] == 448 and np.isnan(out[3])


def test_scalar_conversions():
    assert numerics.scalar(2**31, D.int32) == -(2**31)
    assert numerics.scalar(-1, D.uint8) == 255
    assert numerics.scalar(1.0 + 2.0**-9, D.bfloat16) == 1.0
    assert isinstance(numerics.convert(np.float32(3.7), D.int32), np.int32)
    assert numerics.convert(np.float32(-3.7), D.int32) == -3
    assert numerics.convert(np.array([0.0, 2.0]), D.bool_).tolist() == [False, True]
