"""FlashAttention on the Hopper forms (sm_90a): the plain TMA pipeline, the warp-specialized
compute loop, its two consumer warpgroups in ping-pong, K/V on their own barriers, and the
FlashAttention-3 rotation (with and without ping-pong; one key block: prologue and epilogue only),
against torch. Skipped below sm_90."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tilelang_x
from tests.kernels import attention

NO_ROT = {"tlx.softmax_rotation": False}
FORMS = {
    "plain": {"tlx.ws_compute_loops": False},
    "warp_specialized": {"tlx.ws_compute_loops": True, "tlx.pingpong": False, **NO_ROT},
    "pingpong": {"tlx.ws_compute_loops": True, "tlx.pingpong": True, **NO_ROT},
    "barrier_groups": {"tlx.ws_compute_loops": True, "tlx.barrier_groups": True, "tlx.pingpong": True, **NO_ROT},
    "rotation": {"tlx.ws_compute_loops": True},
    "rotation_no_pingpong": {"tlx.ws_compute_loops": True, "tlx.pingpong": False},
}


@pytest.fixture(autouse=True)
def _hopper() -> None:
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("needs sm_90a")


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dim,seq,block_n", [(64, 384, 128), (128, 512, 128), (128, 256, 64), (128, 128, 128)])
def test_flash_attention_forms(form: str, causal: bool, dim: int, seq: int, block_n: int) -> None:
    shape = (2, 3, seq, dim)
    gen = torch.Generator(device="cuda").manual_seed(dim + seq)
    q, k, v = (torch.randn(*shape, device="cuda", generator=gen).half() for _ in range(3))
    func = attention.flash_attention.get_ir(*shape, causal, block_M=128, block_N=block_n, num_stages=2, threads=256)
    kernel = tilelang_x.compile(func, out_idx=[3], pass_configs=FORMS[form])
    out = kernel(q, k, v)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    torch.testing.assert_close(out.float(), ref, atol=2e-3, rtol=2e-3)
    if FORMS[form].get("tlx.pingpong"):
        assert "tlx_pp_wait" in kernel.get_kernel_source()


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_in_clusters(causal: bool) -> None:
    """Pairs of query blocks in a cluster: K and V multicast to both (non-causal; the causal trip
    count differs between them, so each loads its own)."""
    shape = (2, 3, 512, 128)
    gen = torch.Generator(device="cuda").manual_seed(7)
    q, k, v = (torch.randn(*shape, device="cuda", generator=gen).half() for _ in range(3))
    func = attention.flash_attention.get_ir(*shape, causal, block_M=128, block_N=128, num_stages=2, threads=256,
                                            cluster=(2, 1, 1))
    kernel = tilelang_x.compile(func, out_idx=[3])
    out = kernel(q, k, v)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    torch.testing.assert_close(out.float(), ref, atol=2e-3, rtol=2e-3)
    body = kernel.get_kernel_source().split("__global__", 1)[1]
    assert ("tlx_tma_load_mc_" in body) != causal


@pytest.mark.parametrize("rotation", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_with_one_consumer_warpgroup(causal: bool, rotation: bool) -> None:
    """64-row blocks on 128 threads: one consumer warpgroup (no ping-pong), rotated or not."""
    shape = (2, 3, 512, 128)
    gen = torch.Generator(device="cuda").manual_seed(11)
    q, k, v = (torch.randn(*shape, device="cuda", generator=gen).half() for _ in range(3))
    func = attention.flash_attention.get_ir(*shape, causal, block_M=64, block_N=128, num_stages=2, threads=128)
    configs = {"tlx.ws_compute_loops": True, "tlx.softmax_rotation": rotation}
    kernel = tilelang_x.compile(func, out_idx=[3], pass_configs=configs)
    out = kernel(q, k, v)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    torch.testing.assert_close(out.float(), ref, atol=2e-3, rtol=2e-3)
    assert ("TLX_WGMMA_WAIT(1)" in kernel.get_kernel_source()) == rotation



@pytest.mark.parametrize("dim", [64, 128])
def test_persistent_flash_attention(dim: int) -> None:
    """``tlx.persistent`` on a softmax loop: 256 query blocks walked by 132 (not rotated); the stage
    ring, the ping-pong turns and the Q tile carry on from one block's tile to the next."""
    shape = (2, 8, 2048, dim)
    gen = torch.Generator(device="cuda").manual_seed(dim)
    q, k, v = (torch.randn(*shape, device="cuda", generator=gen).half() for _ in range(3))
    func = attention.flash_attention.get_ir(*shape, False, block_M=128, block_N=128, num_stages=2, threads=256)
    configs = {"tlx.persistent": True, "tlx.ws_compute_loops": True}  # D64 would otherwise take the plain pipeline
    kernel = tilelang_x.compile(func, out_idx=[3], pass_configs=configs)
    out = kernel(q, k, v)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    torch.testing.assert_close(out.float(), ref, atol=2e-3, rtol=2e-3)
    assert "tlx_tile_j" in kernel.get_kernel_source()
