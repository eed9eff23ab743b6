"""A T.gemm of two operand types (float16 by bfloat16) on the GPU: the per-element FMA loop the
compiler falls back to (with a PerformanceWarning) computes the product, against torch."""

from __future__ import annotations

import pytest
import torch

import tilelang_x
import tilelang_x.language as T
from tests.null.test_cuda_gemm_operand_types import two_type_gemm
from tilelang_x.errors import PerformanceWarning


@pytest.mark.parametrize("target", ["cuda", "cuda:sm_90"])
def test_a_gemm_of_two_types_matches_torch(target: str) -> None:
    with pytest.warns(PerformanceWarning):
        kernel = tilelang_x.compile(two_type_gemm.get_ir(T.float16, T.bfloat16), out_idx=[-1], target=target)
    a = torch.randn(128, 128, device="cuda").half()
    b = torch.randn(128, 128, device="cuda").bfloat16()
    torch.testing.assert_close(kernel(a, b), a.float() @ b.float(), rtol=1e-4, atol=1e-3)
