"""``tlx.reciprocal_division`` (``plugins/cuda/lower/reciprocal.py``): a float32 division in a
``T.Parallel`` nest whose divisor is the same along one loop variable multiplies by the divisor's
reciprocal; a divisor that varies along every loop variable keeps the division. No GPU: source
checks and SASS (the GPU values are in tests/backend/cuda/test_correctness_cuda.py)."""

from __future__ import annotations

import math
import re
import struct

import pytest

import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source, flash_attention_ir, sass_text
from tilelang_x.plugins.cuda.lower.reciprocal import _f32_reciprocal


def _divisions() -> object:
    @T.prim_func
    def divisions(A: T.Tensor((64, 32), T.float32), D: T.Tensor((64,), T.float32),
                  B: T.Tensor((64, 32), T.float32), C: T.Tensor((64, 32), T.float32),
                  E: T.Tensor((64, 32), T.float32)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(64, 32):
                B[i, j] = A[i, j] / D[i]
                C[i, j] = A[i, j] / A[j * 2, i // 2]
                E[i, j] = A[i, j] / 3.0

    return divisions


def test_row_invariant_divisor_becomes_a_reciprocal() -> None:
    src, _ = cuda_source(_divisions(), "sm_80")
    assert re.search(r"B\[[^\n]*\] = tlx_div_rcp\(A\[[^\n]*\], D\[[^\n]*\], __frcp_rn\(D\[", src)
    assert re.search(r"C\[[^\n]*\] = A\[[^\n]*\] / A\[", src)  # varies along i and j: a division
    assert re.search(r"E\[[^\n]*\] = tlx_div_rcp\(A\[[^\n]*\], 3\.0f?, 0\.333333", src)


def test_off_keeps_every_division() -> None:
    src, _ = cuda_source(_divisions(), "sm_80", {"tlx.reciprocal_division": False})
    assert "__frcp_rn" not in src and src.count("] / ") >= 2 and "/ 3.0" in src


def test_flash_attention_epilogue_multiplies() -> None:
    src, _ = cuda_source(flash_attention_ir(causal=False), "sm_90a")
    assert "__frcp_rn(logsum[" in src and "/ logsum[" not in src


@pytest.mark.parametrize("c, want", [
    (4.0, 0.25), (-2.0, -0.5), (0.0, math.inf), (-0.0, -math.inf), (1e-45, math.inf), (-1e-45, -math.inf),
    (math.inf, 0.0), (3.0, struct.unpack("f", struct.pack("f", 1 / 3))[0]),
])
def test_constant_reciprocal_is_the_float32_one(c: float, want: float) -> None:
    assert _f32_reciprocal(c) == want
    assert math.copysign(1, _f32_reciprocal(c)) == math.copysign(1, want)


def test_constant_reciprocal_of_nan_is_nan() -> None:
    assert math.isnan(_f32_reciprocal(math.nan))


def test_sass_has_no_division_sequences_in_flash_attention() -> None:
    """An IEEE division is MUFU.RCP + FCHK + a call to a slow path per element; the reciprocal is
    one per row (the thread's two rows of the 64-row wgmma tile)."""
    func = flash_attention_ir(causal=False, dim=64)
    on = sass_text(func)
    off = sass_text(func, configs={"tlx.reciprocal_division": False})
    assert off.count("FCHK") == 32 and on.count("FCHK") == 0
    assert on.count("MUFU.RCP") < off.count("MUFU.RCP") // 4
