"""FlashAttention backward (tests/kernels/attention_bwd.py) on the GPU in the configurations
bench/attention_bwd.py tries, on the device's path and the sm_80-class one, against torch autograd
through float32 attention."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.kernels import attention_bwd
from tilelang_x import knobs

CONFIGS = [(64, 64, 2, 128), (128, 64, 2, 256), (64, 32, 2, 128), (128, 128, 2, 256)]


@pytest.mark.parametrize("target", ["cuda", "cuda:sm_90"])
@pytest.mark.parametrize("config", CONFIGS, ids=["x".join(map(str, c)) for c in CONFIGS])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dim", [64, 128])
def test_backward_matches_autograd(dim: int, causal: bool, config: tuple[int, ...], target: str) -> None:
    shape = (2, 3, 512, dim)
    gen = torch.Generator(device="cuda").manual_seed(dim)
    q, k, v, do = (torch.randn(*shape, device="cuda", generator=gen).half() for _ in range(4))
    block_m, block_n, stages, threads = config
    with knobs.scope(target_default=target):
        o, lse = attention_bwd.flash_attention_lse(*shape, causal)(q, k, v)
        grads = attention_bwd.attention_backward(q, k, v, o, lse, do, causal, block_M=block_m, block_N=block_n,
                                                 num_stages=stages, threads=threads)
    leaves = [x.float().requires_grad_() for x in (q, k, v)]
    F.scaled_dot_product_attention(*leaves, is_causal=causal).backward(do.float())
    for ours, ref in zip(grads, leaves):
        torch.testing.assert_close(ours.float(), ref.grad, atol=2e-2, rtol=2e-2)
