"""``tlx.overlap_epilogue`` on the GPU: persistent GEMMs whose tiles are stored during the next
tile's first k-steps (the last after the tile loop) against torch, with partial tiles, bf16, a
ReLU epilogue and B stored N x K. Skipped below sm_90."""

from __future__ import annotations

import pytest
import torch

import tilelang_x
from tests.kernels import gemm
from tilelang_x.core_ir.dtypes import as_dtype

ON = {"tlx.overlap_epilogue": True}


@pytest.fixture(autouse=True)
def _hopper() -> None:
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("needs sm_90a")


@pytest.mark.parametrize("m, n, k, dtype, kw", [
    (4096, 2048, 512, "float16", {}),  # 256 tiles: about two per block
    (3000, 2000, 328, "float16", {}),  # partial tiles and k-steps
    (4096, 2048, 512, "bfloat16", {"relu": True}),
    (4096, 2048, 512, "float16", {"trans_B": True}),
])
def test_overlapped_epilogue_matches_torch(m: int, n: int, k: int, dtype: str, kw: dict) -> None:
    func = gemm.matmul.get_ir(m, n, k, block_M=128, block_N=256, block_K=64, num_stages=4, threads=256,
                              in_dtype=as_dtype(dtype), out_dtype=as_dtype(dtype), **kw)
    kernel = tilelang_x.compile(func, out_idx=[-1], pass_configs=ON)
    assert "tlx_epi_regs" in kernel.get_kernel_source()
    tdt = getattr(torch, dtype)
    a = torch.randn(m, k, device="cuda").to(tdt)
    b = torch.randn(*((n, k) if kw.get("trans_B") else (k, n)), device="cuda").to(tdt)
    want = (a.float() @ (b.float().T if kw.get("trans_B") else b.float()))
    if kw.get("relu"):
        want = torch.relu(want)
    for _ in range(2):  # a second launch must not see the first one's stores in flight
        torch.testing.assert_close(kernel(a, b).float(), want, rtol=2e-2, atol=2e-1)
