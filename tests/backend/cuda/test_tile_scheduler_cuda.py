"""``T.PersistentTileScheduler`` on the GPU: a persistent GEMM whose blocks walk the tiles in a
``while sched.valid()`` loop (TMA + wgmma on sm_90a, the cp.async path on ``cuda:sm_90``; the
k trip count per tile odd per stage, so each tile's barriers must start afresh) against torch."""

from __future__ import annotations

import pytest
import torch

import tilelang_x
from tests.null.test_tile_scheduler import _persistent_gemm


@pytest.mark.parametrize("target", ["cuda", "cuda:sm_90"])
@pytest.mark.parametrize("kw", [{}, {"swizzle_size": 3, "column_major": False}])
def test_persistent_gemm_with_the_scheduler(target: str, kw: dict) -> None:
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("the targets here are Hopper's")
    m, n, k, workers = 384, 320, 96, 7  # 6 x 5 tiles of 64 over 7 blocks; 3 k-steps of 32
    kernel = tilelang_x.compile(_persistent_gemm(m, n, k, 64, 64, 32, workers=workers, **kw), target=target)
    a = torch.randn(m, k, device="cuda").half()
    b = torch.randn(k, n, device="cuda").half()
    c = torch.zeros(m, n, device="cuda")
    iters = torch.zeros(workers, dtype=torch.int32, device="cuda")
    kernel(a, b, c, iters)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    assert iters.tolist() == [5, 5, 4, 4, 4, 4, 4]
