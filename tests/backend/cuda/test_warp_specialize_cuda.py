"""On the GPU: ``T.ws`` regions with explicit mbarriers (plugins/cuda/warp_specialize.py) give the
interpreter's results, on the Hopper path ("cuda" on an H200) and the sm_80-class one
("cuda:sm_90"). The suite cases of tests/kernels/warp_specialize.py run in test_suite_cuda.py."""

from __future__ import annotations

import pytest
import torch

import tilelang_x
from tests.kernels import warp_specialize as W
from tests.null.test_warp_specialize import consumer_in_a_block_loop, ping_pong

TARGETS = ["cuda", "cuda:sm_90"]


@pytest.mark.parametrize("target", TARGETS)
def test_many_rounds_through_one_buffer(target: str) -> None:
    rounds = 257
    x = torch.randn(rounds, 128)
    y = torch.zeros(rounds, 128, device="cuda")
    tilelang_x.compile(ping_pong(rounds), target=target)(x.cuda(), y)
    torch.cuda.synchronize()
    torch.testing.assert_close(y.cpu(), x + 1)


@pytest.mark.parametrize("target", TARGETS)
def test_consumer_in_a_loop_of_the_block(target: str) -> None:
    x = torch.randn(100, 128)
    y = torch.zeros(100, 128, device="cuda")
    tilelang_x.compile(consumer_in_a_block_loop(100), target=target)(x.cuda(), y)
    torch.cuda.synchronize()
    torch.testing.assert_close(y.cpu(), x + 1)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kernel", [W.gemm_producer_consumer, W.gemm_two_stage, W.gemm_regions_in_loop])
def test_producer_consumer_gemm_at_a_larger_shape(kernel: object, target: str) -> None:
    M, N, K = 1024, 768, 2048
    g = torch.Generator().manual_seed(7)
    a = torch.randn(M, K, generator=g).half().cuda()
    b = torch.randn(K, N, generator=g).half().cuda()
    with tilelang_x.knobs.scope(target_default=target):
        c = kernel(M, N, K, block_K=64)(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), (a.float() @ b.float()), atol=5e-2, rtol=1e-2)


@pytest.mark.parametrize("target", TARGETS)
def test_three_stage_pipeline(target: str) -> None:
    M, N, K = 384, 256, 1024
    g = torch.Generator().manual_seed(8)
    a = torch.randn(M, K, generator=g).half().cuda()
    b = torch.randn(K, N, generator=g).half().cuda()
    with tilelang_x.knobs.scope(target_default=target):
        c = W.gemm_two_stage(M, N, K, block_K=64, num_stages=3)(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), (a.float() @ b.float()), atol=5e-2, rtol=1e-2)
