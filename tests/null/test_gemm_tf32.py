"""float32 T.gemm: TF32 tensor cores by default (``core_ir/gemm_precision.py``), float32 products with
the pass config ``tlx.fp32_gemm = "ieee"``. The rounding itself, the SASS of each CUDA form (mma.sync
m16n8k8 on sm_80; wgmma k8 fed by TMA on sm_90a when both tiles are K-major) and the errors; the
results are checked against torch by the suite cases ``gemm_fp32_*``."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import tilelang_x.language as T
from tests.kernels import gemm
from tests.null.cuda_helpers import cuda_source, sass_ops
from tilelang_x.core_ir.errors import TileLangError
from tilelang_x.core_ir.gemm_precision import fp32_gemm_precision, round_tf32

_ONE_ULP = 2.0 ** -10  # of a TF32 value in [1, 2)


@pytest.mark.parametrize("x, want", [
    (1.0 + _ONE_ULP / 2, 1.0 + _ONE_ULP),  # a tie rounds away from zero
    (-(1.0 + _ONE_ULP / 2), -(1.0 + _ONE_ULP)),
    (1.0 + _ONE_ULP / 2 - 2.0 ** -23, 1.0),  # just below the tie
    (1.0 + _ONE_ULP * 1.5, 1.0 + _ONE_ULP * 2),
    (float(np.finfo(np.float32).max), np.inf),  # past the largest TF32 value
    (np.inf, np.inf),
    (3.0, 3.0),
])
def test_round_tf32_matches_cvt_rna(x: float, want: float) -> None:
    assert round_tf32(np.array([x], np.float32))[0] == np.float32(want)


def test_round_tf32_keeps_nan() -> None:
    assert np.isnan(round_tf32(np.array([np.nan], np.float32))[0])


def test_precision_config_is_checked() -> None:
    assert fp32_gemm_precision({}) == "tf32"
    assert fp32_gemm_precision({"tlx.fp32_gemm": "ieee"}) == "ieee"
    with pytest.raises(TileLangError, match="takes one of 'tf32', 'ieee'"):
        fp32_gemm_precision({"tlx.fp32_gemm": "fp32"})


def _fp32(trans_b: bool, fp32_gemm: str | None = None):
    return gemm.matmul.get_ir(256, 256, 256, in_dtype=T.float32, out_dtype=T.float32, trans_B=trans_b,
                              fp32_gemm=fp32_gemm, block_M=128, block_N=128, block_K=32, num_stages=3, threads=256)


_PATTERN = r"\b(HGMMA\.\w+\.F32\.TF32|HMMA\.1688\.F32\.TF32|UTMALDG|LDSM|FFMA)"


@pytest.mark.parametrize("arch, trans_b, present, absent", [
    ("sm_80", False, ("HMMA.1688.F32.TF32", "LDSM"), ("UTMALDG",)),  # B [K, N]: A by ldmatrix, B one by one
    ("sm_80", True, ("HMMA.1688.F32.TF32", "LDSM"), ()),
    # B [K, N]: wgmma reads TF32 tiles K-major only, so it computes C^T = B^T A^T with B^T in registers
    ("sm_90a", False, ("HGMMA.64x128x8.F32.TF32", "UTMALDG"), ("HMMA.1688.F32.TF32", "LDSM")),
    ("sm_90a", True, ("HGMMA.64x128x8.F32.TF32", "UTMALDG"), ("HMMA.1688.F32.TF32", "LDSM")),
    ("sm_90a-noswap", False, ("HMMA.1688.F32.TF32", "UTMALDG"), ("HGMMA.64x128x8.F32.TF32",)),
])
def test_fp32_gemm_runs_on_tf32_tensor_cores(arch: str, trans_b: bool, present: tuple[str, ...],
                                             absent: tuple[str, ...]) -> None:
    configs = {"tlx.swap_operands": False} if arch.endswith("-noswap") else None
    ops = sass_ops(_fp32(trans_b), _PATTERN, arch.removesuffix("-noswap"), configs=configs)
    assert all(ops.get(p) for p in present) and not any(ops.get(a) for a in absent), ops


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ieee_precision_keeps_float32_products(arch: str) -> None:
    ops = sass_ops(_fp32(True, "ieee"), _PATTERN, arch)
    assert ops.get("FFMA") and not any(k.startswith(("HMMA", "HGMMA")) for k in ops), ops


def test_k_by_n_tf32_gemm_says_how_it_reaches_wgmma(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="tilelang_x.cuda.layout"):
        cuda_source(_fp32(False), "sm_90a")
    assert "float32 with B stored [K, N] runs on wgmma as C^T = B^T A^T" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="tilelang_x.cuda.layout"):
        cuda_source(_fp32(False), "sm_90a", {"tlx.swap_operands": False})
    assert "float32 runs on mma.sync; wgmma reads TF32" in caplog.text and "transpose_B=True" in caplog.text


@T.prim_func
def _both_mn_major(A: T.Tensor((64, 128), T.float32), B: T.Tensor((64, 128), T.float32),
                   C: T.Tensor((128, 128), T.float32)):
    with T.Kernel(1, threads=128):
        A_s = T.alloc_shared((64, 128), T.float32)  # [K, M]: A stored K-major nowhere
        B_s = T.alloc_shared((64, 128), T.float32)  # [K, N]
        C_f = T.alloc_fragment((128, 128), T.float32)
        T.copy(A, A_s)
        T.copy(B, B_s)
        T.gemm(A_s, B_s, C_f, transpose_A=True, clear_accum=True)
        T.copy(C_f, C)


def test_swap_needs_a_k_major_a_tile() -> None:
    """Swapping makes the A tile wgmma's shared operand, which must be K-major: with A stored [K, M]
    as well, neither operand order fits wgmma's TF32 form, and the gemm stays on mma.sync."""
    ops = sass_ops(_both_mn_major, _PATTERN, "sm_90a")
    assert ops.get("HMMA.1688.F32.TF32") and not any(k.startswith("HGMMA") for k in ops), ops


@pytest.mark.parametrize("policy", ["FullRow", "FullCol"])
def test_swapped_gemm_takes_either_warp_policy(policy: str) -> None:
    """The swapped plan maps C's rows to wgmma's N: a policy naming C's rows or columns is read the other
    way round, and both splits compile to TF32 HGMMAs."""
    @T.prim_func
    def main(A: T.Tensor((128, 64), T.float32), B: T.Tensor((64, 256), T.float32), C: T.Tensor((128, 256), T.float32)):
        with T.Kernel(1, threads=256):
            A_s = T.alloc_shared((128, 64), T.float32)
            B_s = T.alloc_shared((64, 256), T.float32)
            C_f = T.alloc_fragment((128, 256), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_f, clear_accum=True, policy=getattr(T.GemmWarpPolicy, policy))
            T.copy(C_f, C)

    ops = sass_ops(main, _PATTERN, "sm_90a")
    assert any(k.startswith("HGMMA") and k.endswith("TF32") for k in ops) and not ops.get("HMMA.1688.F32.TF32"), ops
