"""The cluster barrier, ``T.block_rank_in_cluster`` and the block's votes on the GPU: ranks against
``%cluster_ctarank``'s definition, blocks that read what their cluster-mates wrote before
``T.cluster_sync()`` (odd blocks slowed down by busy work, so a reader that did not wait would
read the -1 the outputs start with), split arrive / wait rounds, the barrier of a cluster of one,
and ``__syncthreads_count/and/or`` against torch. The cluster tests need sm_90a."""

from __future__ import annotations

import pytest
import torch

from tests.kernels import cluster_barriers as K


def _hopper() -> None:
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("needs sm_90a")


@pytest.mark.parametrize("cluster", [(2, 1, 1), (1, 2, 1), (2, 2, 1), (4, 2, 1), (8, 1, 1)])
def test_rank_in_cluster(cluster: tuple[int, int, int]) -> None:
    _hopper()
    r = torch.full((8, 8), -1, dtype=torch.int32, device="cuda")
    K.ranks(8, 8, cluster)(r)
    cx, cy, _ = cluster
    expected = torch.tensor([[bx % cx + cx * (by % cy) for bx in range(8)] for by in range(8)], dtype=torch.int32)
    assert torch.equal(r.cpu(), expected)


@pytest.mark.parametrize("cx", [2, 4, 8])
def test_blocks_of_a_cluster_meet_at_cluster_sync(cx: int) -> None:
    _hopper()
    kernel = K.neighbours(64, cx, 2000)
    peer = [b - b % cx + (b % cx + 1) % cx for b in range(64)]
    for seed in range(5):
        x = torch.randn(64, 64, generator=torch.Generator().manual_seed(seed)).cuda()
        y, z = torch.full_like(x, -1), torch.full_like(x, -1)
        kernel(x, y, z, 0)
        torch.testing.assert_close(y, x * 2)
        torch.testing.assert_close(z, (x * 2)[peer])


def test_split_arrive_and_wait_in_a_2d_cluster() -> None:
    _hopper()
    n = 8
    v, s, other = (torch.zeros(n, n, dtype=torch.int32, device="cuda") for _ in range(3))
    K.split_phases(n, 2, 2)(v, s, other)
    ids = torch.arange(n * n, dtype=torch.int32).reshape(n, n)
    sums = ids.reshape(n // 2, 2, n // 2, 2).sum(dim=(1, 3), dtype=torch.int32)
    assert torch.equal(s.cpu(), sums.repeat_interleave(2, 0).repeat_interleave(2, 1))
    assert torch.equal(other.cpu(), torch.arange(n)[None, :] - torch.arange(n)[:, None])


@pytest.mark.parametrize("cluster", [None, 1])
def test_without_clusters_cluster_sync_is_a_block_barrier(cluster: object) -> None:
    y = torch.zeros(4, 128, dtype=torch.int32, device="cuda")
    r = torch.full((4,), -1, dtype=torch.int32, device="cuda")
    K.block_barrier(4, cluster)(y, r)
    tx = torch.arange(128, dtype=torch.int32)
    assert torch.equal(y.cpu(), ((tx + 1) % 128 * 3)[None, :] + torch.arange(4, dtype=torch.int32)[:, None])
    assert torch.equal(r.cpu(), torch.zeros(4, dtype=torch.int32))


@pytest.mark.parametrize("threads", [32, 40, 96, 256, 1024])
def test_votes_of_the_block(threads: int) -> None:
    blocks = 5
    x = torch.randint(0, 3, (blocks, threads), generator=torch.Generator().manual_seed(threads), dtype=torch.int32)
    x[1] = 1
    x[2] = 0
    c = torch.full((blocks, 3), -1, dtype=torch.int32, device="cuda")
    K.votes(threads, blocks)(x.cuda(), c)
    nz = x != 0
    assert torch.equal(c.cpu(), torch.stack([nz.sum(1), nz.all(1), nz.any(1)], dim=1).to(torch.int32))


def test_votes_of_a_2d_block() -> None:
    x = torch.randn(3, 32, generator=torch.Generator().manual_seed(1))
    c = torch.zeros(3, dtype=torch.int32, device="cuda")
    K.votes_2d(32, 3)(x.cuda(), c)
    assert c.cpu().tolist() == [int((x > 0).sum()), 0, 1]


def test_while_some_thread_of_the_block_still_counts() -> None:
    limit = torch.randint(0, 50, (128,), generator=torch.Generator().manual_seed(3), dtype=torch.int32)
    out = torch.zeros(128, dtype=torch.int32, device="cuda")
    rounds = torch.zeros(1, dtype=torch.int32, device="cuda")
    K.vote_loop(128)(limit.cuda(), out, rounds)
    assert torch.equal(out.cpu(), limit) and int(rounds) == int(limit.max())
