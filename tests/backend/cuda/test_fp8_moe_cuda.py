"""TileLang's DeepSeek-V3 fp8 GEMMs (per-block scales, 2xAcc promotion), grouped GEMM and fused MoE
examples (``tests/kernels/fp8_blockscale``, ``tests/kernels/moe``) on the GPU at the examples' own
sizes against torch, on the device's own path (``cuda``: wgmma on the H200) and the sm_80-class
path (``cuda:sm_90``: mma.sync)."""

from __future__ import annotations

import pytest
import torch

import tilelang_x.language as T
from tests.kernels import fp8_blockscale, moe
from tilelang_x import knobs

TARGETS = ["cuda", "cuda:sm_90"]


def _calc_diff(x: torch.Tensor, y: torch.Tensor) -> float:
    """The examples' own measure: 1 - the cosine-like similarity of ``x`` and ``y``."""
    x, y = x.double(), y.double()
    return float(1 - 2 * (x * y).sum() / (x * x + y * y).sum())


def _check(out: torch.Tensor, ref: torch.Tensor, rel: float) -> None:
    """The examples' ``calc_diff < 1e-3``, and no element off by more than ``rel`` of the largest."""
    torch.cuda.synchronize()
    assert _calc_diff(out, ref) < 1e-3
    torch.testing.assert_close(out.float(), ref.float(), atol=rel * float(ref.abs().max()), rtol=0)


def _float8_mma() -> None:
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("float8 operands need sm_89 or later")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("M, N, K, block_N", [(1024, 1024, 8192, 16), (1024, 1024, 8192, 32),
                                              (1024, 1024, 8192, 64), (1024, 1024, 8192, 128),
                                              (1000, 448, 2048, 64)])
def test_deepgemm_fp8_blockscale(M: int, N: int, K: int, block_N: int, out_dtype: str, target: str) -> None:
    _float8_mma()
    gen = torch.Generator(device="cuda").manual_seed(42)
    a = torch.randn(M, K, device="cuda", generator=gen).bfloat16()
    b = torch.randn(N, K, device="cuda", generator=gen).bfloat16()
    qa, sa = fp8_blockscale.per_token_cast_to_fp8(a)
    qb, sb = fp8_blockscale.per_block_cast_to_fp8(b)
    with knobs.scope(target_default=target):
        out = fp8_blockscale.deepgemm_fp8(M, N, K, block_N, out_dtype=out_dtype)(qa, qb, sa, sb)
    assert out.dtype == getattr(torch, out_dtype)
    _check(out, fp8_blockscale.blockscale_reference(qa, qb, sa, sb), 1e-2)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("block_K", [64, 128])
def test_gemm_fp8_2xacc(dtype: torch.dtype, block_K: int, target: str) -> None:
    _float8_mma()
    M, N, K = 1024, 1024, 8192
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = (100 * (2 * torch.rand(M, K, device="cuda", generator=gen) - 1)).to(dtype)
    b = (100 * (2 * torch.rand(N, K, device="cuda", generator=gen) - 1)).to(dtype)
    tl_dtype = T.float8_e4m3 if dtype == torch.float8_e4m3fn else T.float8_e5m2
    with knobs.scope(target_default=target):
        out = fp8_blockscale.gemm_fp8_2xacc(M, N, K, 128, 128, block_K, tl_dtype)(a, b)
    _check(out, a.float() @ b.float().T, 1e-3)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("sizes, tiles", [
    ([64], (64, 64, 64, 2, 128)),
    ([64, 128, 256], (64, 64, 64, 2, 128)),
    ([63], (64, 64, 64, 2, 128)),
    ([100, 200, 300, 400], (64, 64, 64, 2, 128)),
    ([63, 77, 111, 280], (64, 64, 64, 2, 128)),
    ([64, 128], (64, 128, 64, 2, 256)),  # the example's command-line defaults
    ([300, 0, 517, 1], (128, 128, 64, 3, 256)),
])
def test_grouped_gemm(sizes: list[int], tiles: tuple[int, ...], target: str) -> None:
    K = N = 8192
    block_M = tiles[0]
    gen = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(sum(sizes), K, device="cuda", generator=gen).half()
    b = torch.randn(len(sizes), K, N, device="cuda", generator=gen).half()
    offsets, padded = moe.group_offsets(sizes, block_M)
    ints = [torch.tensor(v, dtype=torch.int32, device="cuda") for v in (sizes, offsets, padded)]
    with knobs.scope(target_default=target):
        out = moe.grouped_gemm(sizes, K, N, *tiles)(a, b, *ints)
    ref = torch.cat([a[o:o + n].float() @ b[g].float() for g, (o, n) in enumerate(zip(offsets, sizes))])
    torch.cuda.synchronize()
    torch.testing.assert_close(out.float(), ref, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("tokens, d_hidden, d_expert, experts, top_k", [
    (2048, 7168, 2048, 8, 4),  # the example's model at a shorter sequence
    (1000, 2048, 1024, 16, 2),
])
def test_fused_moe(tokens: int, d_hidden: int, d_expert: int, experts: int, top_k: int, target: str) -> None:
    x, router, shared, routed = moe.moe_inputs(tokens, d_hidden, d_expert, experts, "cuda", seed=81394)
    with knobs.scope(target_default=target):
        out = moe.moe_forward(x, router, shared, routed, top_k, coalesced_width=2)
    ref = moe.moe_reference(x, router, shared, routed, top_k)
    torch.cuda.synchronize()
    torch.testing.assert_close(out.float(), ref.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("sizes", [[1024, 1024, 1024, 1024], [100, 200, 300, 400], [63, 77, 111, 280]])
def test_grouped_gemm_fp8_weights(sizes: list[int], target: str) -> None:
    K = N = 4096
    gen = torch.Generator(device="cuda").manual_seed(2)
    a = torch.randn(sum(sizes), K, device="cuda", generator=gen).bfloat16()
    b = torch.randn(len(sizes), K, N, device="cuda", generator=gen).to(torch.float8_e4m3fn)
    offsets, padded = moe.group_offsets(sizes, 128, spare_block=False)
    ints = [torch.tensor(v, dtype=torch.int32, device="cuda") for v in (sizes, offsets, padded)]
    with knobs.scope(target_default=target):
        out = moe.grouped_gemm_fp8_weights(tuple(sizes), K, N)(a, b, *ints)
    ref = torch.cat([a[o:o + n].float() @ b[g].float() for g, (o, n) in enumerate(zip(offsets, sizes))])
    torch.cuda.synchronize()
    torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("sizes, tiles", [
    ([64, 128], (64, 64, 64, 2, 128)),  # the example's autograd function
    ([64, 128], (64, 128, 64, 2, 256)),  # its command-line defaults
    ([128, 0, 512, 64], (64, 128, 64, 2, 256)),
])
def test_grouped_gemm_bwd(sizes: list[int], tiles: tuple[int, ...], target: str) -> None:
    M = N = 8192
    gen = torch.Generator(device="cuda").manual_seed(3)
    a = torch.randn(sum(sizes), M, device="cuda", generator=gen).half()
    grad = torch.randn(sum(sizes), N, device="cuda", generator=gen).half()
    offsets, _ = moe.group_offsets(sizes, 1)
    ints = [torch.tensor(v, dtype=torch.int32, device="cuda") for v in (sizes, offsets)]
    with knobs.scope(target_default=target):
        out = moe.grouped_gemm_bwd(sum(sizes), len(sizes), M, N, *tiles)(a, grad, *ints)
    ref = torch.stack([a[o:o + n].float().T @ grad[o:o + n].float() for o, n in zip(offsets, sizes)])
    torch.cuda.synchronize()
    torch.testing.assert_close(out.float(), ref, atol=1e-2, rtol=1e-2)
