"""Named barriers on the GPU: a consumer warp that did not wait at ``bar.sync`` for the producer's
``bar.arrive`` would read the -1 its shared slots start with (the producer is slowed down by busy
work), a double-buffered pipeline between two warps would read a slot's previous step, and two
groups of warps reducing at their own barriers would read partial sums."""

from __future__ import annotations

import torch

from tests.kernels import named_barriers as K


def test_the_consumer_warp_waits_for_each_step_of_the_producer() -> None:
    kernel = K.handoff(8, 2000)
    for seed in range(5):
        x = torch.randn(8 * 32, generator=torch.Generator().manual_seed(seed)).cuda()
        y = torch.zeros_like(x)
        kernel(x, y, 0)
        torch.testing.assert_close(y, x * 2 + 1)


def test_two_warps_pipeline_through_two_slots() -> None:
    kernel = K.pipelined_warps(64, 500)
    for seed in range(5):
        x = torch.randn(64, 32, generator=torch.Generator().manual_seed(seed)).cuda()
        y = torch.zeros_like(x)
        kernel(x, y, 0)
        torch.testing.assert_close(y, x * 3)


def test_two_groups_of_warps_reduce_at_their_own_barriers() -> None:
    kernel = K.split_reductions()
    for seed in range(5):
        x = torch.randn(256, generator=torch.Generator().manual_seed(seed)).cuda()
        out = torch.zeros(2, device="cuda")
        kernel(x, out)
        torch.testing.assert_close(out, torch.stack([x[:128].sum(), x[128:].max()]), atol=1e-4, rtol=1e-5)
