"""The T.gemms that miss the tensor cores by a likely slip (tests/null/test_cuda_gemm_operand_types.py)
on the GPU: the per-element FMA loop the compiler falls back to, with its PerformanceWarning,
computes the product, against torch."""

from __future__ import annotations

import pytest
import torch

import tilelang_x
from tests.null.test_cuda_gemm_operand_types import SLIPS, small_gemm
from tilelang_x.errors import PerformanceWarning

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


@pytest.mark.parametrize("target", ["cuda", "cuda:sm_90"])
@pytest.mark.parametrize("args", [s[0] for s in SLIPS], ids=["two_types", "fp16_accumulator", "96_threads", "k24"])
def test_the_fma_loop_matches_torch(target: str, args: tuple) -> None:
    with pytest.warns(PerformanceWarning):
        kernel = tilelang_x.compile(small_gemm.get_ir(*args), out_idx=[-1], target=target)
    a_dtype, b_dtype = (TORCH[str(d)] for d in args[:2])
    block_k, n = (list(args[4:6]) + [32, 128][len(args[4:6]):])
    k = n // block_k * block_k  # the K the kernel's tiles cover
    a = torch.randn(n, n, device="cuda").to(a_dtype)
    b = torch.randn(n, n, device="cuda").to(b_dtype)
    out = kernel(a, b).float()
    expect = a.float()[:, :k] @ b.float()[:k]
    tol = 0.5 if len(args) > 2 and str(args[2]) == "float16" else 1e-3
    torch.testing.assert_close(out, expect, rtol=1e-2, atol=tol)
