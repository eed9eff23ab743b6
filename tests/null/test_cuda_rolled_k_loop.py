"""``tlx.rolled_k_loop`` (on by default): the warp-specialized GEMM's k-loop stays rolled in the
device code, which NVVM otherwise unrolls twice (hopper/pipeline.py): fewer wgmma copies to
compile, at a small cost in speed; ``False`` lets the compiler unroll it."""

from __future__ import annotations

import pytest

from tests.kernels import gemm
from tests.null.cuda_helpers import cuda_source, sass_text

UNROLLED = {"tlx.rolled_k_loop": False}


def _gemm(stages: int = 3):
    return gemm.matmul.get_ir(4096, 4096, 4096, block_M=128, block_N=256, block_K=64, num_stages=stages, threads=256)


def test_the_k_loop_is_kept_rolled_unless_turned_off() -> None:
    rolled, plain = cuda_source(_gemm(), "sm_90a")[0], cuda_source(_gemm(), "sm_90a", UNROLLED)[0]
    assert "#pragma unroll 1\n      for (int ko_i = 0; ko_i < 64; ++ko_i) {" in rolled
    assert "#pragma unroll 1" not in plain


def test_the_overlapped_epilogues_peeled_steps_stay_rolled_too() -> None:
    code = cuda_source(_gemm(4), "sm_90a")[0]
    assert "#pragma unroll 1\n      for (int ko_i = 0; ko_i < 4; ++ko_i) {" in code
    assert "#pragma unroll 1\n      for (int ko_i = 4; ko_i < 64; ++ko_i) {" in code


@pytest.mark.parametrize("stages, rolled, plain", [(3, 4, 8), (4, 8, 24)])
def test_fewer_wgmma_copies(stages: int, rolled: int, plain: int) -> None:
    sass = sass_text(_gemm(stages), "sm_90a")
    if "HGMMA" not in sass:
        pytest.skip("no SASS")
    assert sass.count("HGMMA") == rolled
    assert sass_text(_gemm(stages), "sm_90a", UNROLLED).count("HGMMA") == plain


def test_rolled_epilogue_steps_keep_only_the_peeled_steps_rolled() -> None:
    code = cuda_source(_gemm(4), "sm_90a", {**UNROLLED, "tlx.rolled_epilogue_steps": True})[0]
    assert "#pragma unroll 1\n      for (int ko_i = 0; ko_i < 4; ++ko_i) {" in code
    assert code.count("#pragma unroll 1") == 1
