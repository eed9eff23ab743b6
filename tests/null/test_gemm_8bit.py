"""8-bit T.gemm operands on tensor cores, checked in the SASS: integers (int32 accumulators) by
mma.sync m16n8k32 (IMMA) on sm_80 for every signedness pair, wgmma (IGMMA) on sm_90a when both tiles
are K-major, and as C^T = B^T A^T with B^T in registers when B is stored [K, N]; float8 by mma.sync
m16n8k32 (QMMA) on sm_89 when B is stored [K, N]. The results
are checked against torch by the suite cases ``gemm_int8*`` (exactly) and ``gemm_fp8_e4m3*``."""

from __future__ import annotations

import logging

import pytest

import tilelang_x.language as T
from tests.kernels import gemm
from tests.null.cuda_helpers import cuda_source, sass_ops

_PATTERN = r"\b(IGMMA\.\w+\.[SU]8\.[SU]8|IMMA\.16832\.[SU]8\.[SU]8|UTMALDG|LDSM|IMAD)\b"


def _int8(trans_b: bool):
    return gemm.matmul.get_ir(256, 256, 256, in_dtype=T.int8, out_dtype=T.int32, accum_dtype=T.int32,
                              trans_B=trans_b, block_M=128, block_N=128, block_K=64, num_stages=3, threads=256)


@pytest.mark.parametrize("arch, trans_b, present, absent", [
    ("sm_80", False, ("IMMA.16832.S8.S8", "LDSM"), ()),  # B [K, N]: A by ldmatrix, B gathered byte by byte
    ("sm_80", True, ("IMMA.16832.S8.S8", "LDSM"), ()),
    # B [K, N]: wgmma reads 8-bit tiles K-major only, so it computes C^T = B^T A^T with B^T in registers
    ("sm_90a", False, ("IGMMA.64x128x32.S8.S8", "UTMALDG"), ("IMMA.16832.S8.S8",)),
    ("sm_90a", True, ("IGMMA.64x128x32.S8.S8", "UTMALDG"), ("IMMA.16832.S8.S8",)),
    ("sm_90a-noswap", False, ("IMMA.16832.S8.S8", "UTMALDG"), ("IGMMA.64x128x32.S8.S8",)),
])
def test_int8_gemm_runs_on_tensor_cores(arch: str, trans_b: bool, present: tuple[str, ...],
                                        absent: tuple[str, ...]) -> None:
    configs = {"tlx.swap_operands": False} if arch.endswith("-noswap") else None
    ops = sass_ops(_int8(trans_b), _PATTERN, arch.removesuffix("-noswap"), configs=configs)
    assert all(ops.get(p) for p in present) and not any(ops.get(a) for a in absent), ops


@T.prim_func
def _mixed_signs(A: T.Tensor((64, 64), T.uint8), B: T.Tensor((64, 64), T.int8), C: T.Tensor((64, 64), T.int32)):
    with T.Kernel(1, threads=128):
        A_s = T.alloc_shared((64, 64), T.uint8)
        B_s = T.alloc_shared((64, 64), T.int8)
        C_f = T.alloc_fragment((64, 64), T.int32)
        T.copy(A, A_s)
        T.copy(B, B_s)
        T.gemm(A_s, B_s, C_f, transpose_B=True, clear_accum=True)
        T.copy(C_f, C)


def test_mixed_signedness_takes_the_matching_mma() -> None:
    ops = sass_ops(_mixed_signs, _PATTERN, "sm_80")
    assert ops.get("IMMA.16832.U8.S8"), ops


def test_k_by_n_int8_gemm_says_how_to_reach_wgmma(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="tilelang_x.cuda.layout"):
        cuda_source(_int8(False), "sm_90a", {"tlx.swap_operands": False})
    assert "int8 runs on mma.sync" in caplog.text and "transpose_B=True" in caplog.text


def test_float8_k_by_n_gemm_runs_on_sm89_tensor_cores() -> None:
    func = gemm.matmul.get_ir(256, 256, 256, in_dtype=T.float8_e5m2, out_dtype=T.float16, block_M=128, block_N=128,
                              block_K=64, num_stages=3, threads=256)
    ops = sass_ops(func, r"\b(QMMA\.16832\.F32\.E5M2\.E5M2|FFMA)\b", "sm_89")
    assert ops.get("QMMA.16832.F32.E5M2.E5M2") and not ops.get("FFMA"), ops


def test_float8_fma_fallback_lays_out_its_accumulator_as_mma_sync() -> None:
    """sm_80 has no float8 mma.sync: the FMA loop takes the accumulator layout sm_89's mma.sync has,
    so the loops reading the accumulator are laid out alike on both."""
    func = gemm.matmul.get_ir(128, 256, 256, in_dtype=T.float8_e4m3, out_dtype=T.float16, block_M=128,
                              block_N=128, block_K=64, threads=256)
    layouts = {}
    for arch in ("sm_80", "sm_89"):
        _, ctx = cuda_source(func, arch)
        layouts[arch] = {b.name: lay for b, lay in ctx.data["cuda.layouts"].items()}["C_local"]
        assert [plan.kind for plan in ctx.data["cuda.gemm"].values()] == ["fma" if arch == "sm_80" else "mma"]
    assert layouts["sm_80"] == layouts["sm_89"]
