"""Heaviest blocks first (plugins/cuda/block_order.py): a causal loop's block index is reversed."""

from __future__ import annotations

import pytest

from tests.kernels import attention, gemm
from tests.null.cuda_helpers import cuda_source


def _fa(causal: bool) -> object:
    return attention.flash_attention.get_ir(1, 2, 1024, 64, causal, block_M=128, block_N=128, num_stages=2,
                                            threads=256)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_causal_attention_starts_with_its_longest_blocks(arch: str) -> None:
    src = cuda_source(_fa(True), arch)[0]
    assert "k_i < (7 - bx) + 1;" in src and "(7 - bx) * 128" in src  # 8 query blocks, reversed
    off = cuda_source(_fa(True), arch, {"tlx.heavy_first": False})[0]
    assert "7 - bx" not in off and "k_i < bx + 1;" in off


def test_uniform_loops_keep_the_hardware_order() -> None:
    assert "- bx" not in cuda_source(_fa(False), "sm_90a")[0]
    func = gemm.matmul.get_ir(512, 512, 512, block_M=128, block_N=128, block_K=64, num_stages=3, threads=256)
    assert "- bx" not in cuda_source(func, "sm_90a")[0] and "- by" not in cuda_source(func, "sm_90a")[0]
