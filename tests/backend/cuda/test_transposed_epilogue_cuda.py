"""The transposed accumulator store (plugins/cuda/lower/transposed_epilogue.py) on the GPU: the same
bits as element stores, and torch's product, with and without tails."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
from tests.null.test_cuda_transposed_epilogue import transposed_gemm


@pytest.mark.parametrize(("m", "n", "k", "bm", "guard"), [(200, 256, 128, 64, True), (1000, 384, 256, 64, True),
                                                          (512, 256, 192, 128, False), (40, 128, 64, 64, True)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_transposed_store_matches_element_stores_and_torch(m: int, n: int, k: int, bm: int, guard: bool,
                                                           dtype: str) -> None:
    gen = torch.Generator(device="cuda").manual_seed(m + n)
    tdt = getattr(torch, dtype)
    a = torch.randn(m, k, device="cuda", generator=gen).to(tdt)
    b = torch.randn(n, k, device="cuda", generator=gen).to(tdt)
    func = transposed_gemm(m, n, k, dtype, bm=bm, guard=guard)
    staged = tilelang.compile(func, out_idx=[2], target="cuda")
    assert "tlx_stsm_x4_t(" in staged.get_kernel_source()
    plain = tilelang.compile(func, out_idx=[2], target="cuda", pass_configs={"tlx.staged_epilogue": False})
    got, ref = staged(a, b), plain(a, b)
    assert torch.equal(got, ref)
    torch.testing.assert_close(got.float(), a.float() @ b.float().T, atol=0.1, rtol=0.02)
