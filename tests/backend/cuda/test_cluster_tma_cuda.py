"""The cluster queries, multicast TMA loads (``T.tma_copy(..., cluster_mask=...)``) and arrivals at
a peer's mbarrier (``T.barrier_arrive(bar, cta_id)``) on the GPU: the queries against their
definitions, GEMMs whose clusters share the A tile (a cluster barrier per k-step, or a ring of
stages released on rank 0's cluster barrier) against torch, blocks of a mask receiving the lowest
rank's tile while the others load their own, and blocks handing off through their peers'
barriers (the expected values of tests/null/test_cluster_tma.py, which the interpreter gives).
They need sm_90a; without TMA (``tl.disable_tma_lower``) the multicast copies are each block's own."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
from tests.kernels import cluster_tma as kernels
from tests.null.test_cluster_tma import expected_queries, expected_shared_tiles


def _hopper() -> None:
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("needs sm_90a")


@pytest.mark.parametrize("cluster", [(2, 2, 1), (1, 2, 1), (4, 1, 1), (1, 1, 1)])
def test_cluster_queries(cluster: tuple[int, int, int]) -> None:
    _hopper()
    q = torch.full((4, 8, 8), -1, dtype=torch.int32, device="cuda")
    kernels.queries(8, 4, cluster)(q)
    assert torch.equal(q.cpu(), expected_queries(8, 4, cluster))


@pytest.mark.parametrize(("M", "N", "K", "options"), [
    (256, 256, 192, {}),
    (200, 256, 160, {"block_K": 32}),
    (128, 512, 128, {"cluster": 4}),
    (1024, 1024, 1024, {"block_N": 128}),
])
def test_gemm_sharing_its_a_tile_in_the_cluster(M: int, N: int, K: int, options: dict) -> None:
    _hopper()
    g = torch.Generator().manual_seed(M + N)
    a = torch.randn(M, K, generator=g).half().cuda()
    b = torch.randn(K, N, generator=g).half().cuda()
    for _ in range(3):  # the blocks of a cluster race differently each time
        c = kernels.gemm_multicast_a(M, N, K, **options)(a, b)
        torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)


@pytest.mark.parametrize(("cx", "mask"), [(2, 0b11), (4, 0b0110), (4, 0b1000), (8, 0b10110101), (1, 0b1)])
def test_blocks_of_the_mask_receive_the_leaders_tile(cx: int, mask: int) -> None:
    _hopper()
    x = torch.randn(8 * 64, 64, generator=torch.Generator().manual_seed(cx))
    y = kernels.shared_tiles(8, cx, mask)(x.cuda())
    assert torch.equal(y.cpu(), expected_shared_tiles(x, 8, cx, mask))


def test_without_tma_the_multicast_copies_are_each_blocks_own() -> None:
    _hopper()
    x = torch.randn(8 * 64, 64, generator=torch.Generator().manual_seed(7))
    kernel = tilelang.compile(kernels.shared_tiles.get_ir(8, 4, 0b0110), target="cuda",
                              pass_configs={"tl.disable_tma_lower": True})
    assert "tlx_tma_load" not in kernel.get_kernel_source()
    assert torch.equal(kernel(x.cuda()).cpu(), expected_shared_tiles(x, 8, 4, 0b0110))


@pytest.mark.parametrize(("M", "N", "K", "options"), [
    (256, 256, 320, {}),
    (256, 256, 320, {"stages": 3}),
    (128, 512, 256, {"cluster": 4, "block_K": 32}),
    (1024, 1024, 2048, {"block_N": 128, "stages": 4}),
])
def test_multicast_ring_released_on_the_leaders_cluster_barrier(M: int, N: int, K: int, options: dict) -> None:
    _hopper()
    g = torch.Generator().manual_seed(K)
    a = torch.randn(M, K, generator=g).half().cuda()
    b = torch.randn(K, N, generator=g).half().cuda()
    kernel = kernels.gemm_multicast_ring(M, N, K, **options)
    for _ in range(5):
        torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)


@pytest.mark.parametrize("cx", [2, 4, 8])
def test_blocks_hand_off_through_their_peers_barriers(cx: int) -> None:
    _hopper()
    x = torch.randn(64, 128, device="cuda")
    y = torch.zeros_like(x)
    r = torch.full((64,), -1, dtype=torch.int32, device="cuda")
    kernels.handoff(64, cx)(x, y, r)
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2)
    assert torch.equal(r.cpu(), (torch.arange(64, dtype=torch.int32) + cx - 1) % cx)
