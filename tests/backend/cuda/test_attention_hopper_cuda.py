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


@pytest.mark.parametrize("dim,block,threads,stages,pingpong", [(128, 128, 256, 2, True), (128, 128, 256, 2, False),
                                                               (64, 64, 128, 2, True), (128, 64, 128, 3, True)])
def test_blocksparse_attention_guarded_pipeline(dim: int, block: int, threads: int, stages: int,
                                                pingpong: bool) -> None:
    """The body under ``if block_mask[k]`` pipelined: warp-specialized (hopper/guard.py) when the
    block owns its SM, else over the list of kept blocks (pipelining.compact_guarded); runs of
    skipped blocks longer than the stage ring, rows that keep one block, rows that keep all."""
    b, h, s = 2, 3, 1024
    n = s // block
    gen = torch.Generator(device="cuda").manual_seed(dim + block)
    q, k, v = (torch.randn(b, h, s, dim, device="cuda", generator=gen).half() for _ in range(3))
    mask = torch.rand(b, h, n, n, device="cuda", generator=gen) > 0.5
    mask[..., 0] = True
    mask[0, 0, 1] = False
    mask[0, 0, 1, 0] = True  # one block kept
    mask[0, 1, 2] = True  # every block kept
    mask[1, 2, 3, 1:n - 1] = False  # a long run skipped
    func = attention.blocksparse_attention.get_ir(b, h, s, dim, block_M=block, block_N=block, num_stages=stages,
                                                  threads=threads)
    kernel = tilelang_x.compile(func, out_idx=[4], pass_configs={"tlx.pingpong": pingpong})
    source = kernel.get_kernel_source()
    assert ("tlx_taken" in source) == (dim == 128 and block == 128) and ("k_taken" in source) != ("tlx_taken" in source)
    out = kernel(q, k, v, mask)
    keep = mask.repeat_interleave(block, -2).repeat_interleave(block, -1)
    scores = (q.float() @ k.float().transpose(-1, -2)) / dim ** 0.5
    ref = torch.softmax(scores.masked_fill(~keep, float("-inf")), -1) @ v.float()
    torch.testing.assert_close(out.float(), ref, atol=2e-3, rtol=2e-3)
