"""TileLang's linear-attention and native-sparse-attention examples (``tests/kernels/linear_attention``,
``tests/kernels/sparse_attention``) at the sizes their ``main()`` run, on the GPU against torch:
through the device's own path (``cuda``: wgmma on an H200) and the sm_80-class one (``cuda:sm_90``:
mma.sync, cp.async)."""

from __future__ import annotations

import pytest
import torch

from tests.kernels import linear_attention, sparse_attention
from tilelang_x import knobs

TARGETS = ["cuda", "cuda:sm_90"]


def _check(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> None:
    torch.cuda.synchronize()
    torch.testing.assert_close(actual.float(), expected.float(), atol=atol, rtol=rtol)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dim", [128, 256])
def test_chunk_linear_attention_matches_torch(target: str, dim: int) -> None:
    # the example's defaults are B=8, S=4096, H=32, D=256; outputs reach ~360 there, and its fp16 copies
    # of each chunk's scores and of the state (as TileLang's) put ~0.1 of error on them
    with knobs.scope(target_default=target):
        actual, expected = linear_attention.run_linear_attn("cuda", 2, 4096, 8, dim)
    _check(actual, expected, atol=0.15, rtol=1e-2)


@pytest.mark.parametrize("target", TARGETS)
def test_chunk_linear_attention_example_tiles_128(target: str) -> None:
    # the example's comment: BK = BV = 128 "can be faster"
    with knobs.scope(target_default=target):
        actual, expected = linear_attention.run_linear_attn("cuda", 1, 2048, 4, 256, BK=128, BV=128)
    _check(actual, expected, atol=0.15, rtol=1e-2)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("tiles", [
    {},  # the defaults: block_M = block_N = block_K = 64, 2 stages
    {"block_M": 64, "block_N": 64, "block_K": 64, "num_stages": 2, "threads": 128},  # the example's main()
    {"block_M": 128, "block_N": 64, "block_K": 64, "num_stages": 3},
])
def test_mamba2_chunk_scan_matches_torch(target: str, tiles: dict[str, int]) -> None:
    # the example's sizes (batch 8, 80 heads, 4096 tokens, chunk 256, headdim 64, dstate 128) with fewer
    # batches and heads, which changes only the grid
    with knobs.scope(target_default=target):
        actual, expected = linear_attention.run_chunk_scan("cuda", 2, 4096, 256, 1, 16, 64, 128, **tiles)
    _check(actual, expected, atol=2e-2, rtol=1e-2)


@pytest.mark.parametrize("target", TARGETS)
def test_mamba2_chunk_scan_groups_match_torch(target: str) -> None:
    with knobs.scope(target_default=target):
        actual, expected = linear_attention.run_chunk_scan("cuda", 1, 2048, 256, 4, 16, 64, 128)
    _check(actual, expected, atol=2e-2, rtol=1e-2)


@pytest.mark.parametrize("target", TARGETS)
def test_nsa_forward_example_main_matches_torch(target: str) -> None:
    # the example's main(): B=2, 64 tokens, 1 KV head of 16 query heads, D=32, 1 selected block of 32
    with knobs.scope(target_default=target):
        actual, expected = sparse_attention.run_nsa("cuda", 2, 64, 16, 1, 32, 1, 32, scale=0.1)
    _check(actual, expected, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("causal", [True, False])
def test_nsa_forward_matches_torch(target: str, causal: bool) -> None:
    # DeepSeek-like: 64 query heads over 4 KV heads, D=128, 16 selected blocks of 64 keys
    with knobs.scope(target_default=target):
        actual, expected = sparse_attention.run_nsa("cuda", 2, 2048, 64, 4, 128, 16, 64, is_causal=causal)
    _check(actual, expected, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("target", TARGETS)
def test_nsa_forward_four_warps_matches_torch(target: str) -> None:
    with knobs.scope(target_default=target):
        actual, expected = sparse_attention.run_nsa("cuda", 1, 1024, 64, 2, 64, 8, 32, threads=128, num_stages=3)
    _check(actual, expected, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("tiles", [
    {"block_DV": 32, "threads": 128, "num_stages": 2},  # the example's main()
    {"block_DV": 64, "threads": 128, "num_stages": 1},
    {"block_DV": 64, "threads": 256, "num_stages": 2},
])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_gated_delta_net_chunk_state_matches_torch(target: str, tiles: dict[str, int], dtype: str) -> None:
    # the example's DK = DV = 128, chunk 64, over 4096 tokens of 8 heads (its main(): 32768 tokens, 32 heads);
    # the reference stages the state and the new values in the input dtype where the kernel does
    with knobs.scope(target_default=target):
        actual, expected = linear_attention.run_gated_delta_h("cuda", 1, 4096, 8, 128, 128, dtype=dtype, **tiles)
    _check(actual, expected, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("num_stages", [0, 2])  # the example's 0, and a pipelined loop over a bound read from memory
def test_nsa_forward_varlen_matches_torch(target: str, num_stages: int) -> None:
    # four sequences of uneven lengths, 64 query heads over 4 KV heads, D=128, up to 16 blocks of 64 keys
    with knobs.scope(target_default=target):
        actual, expected = sparse_attention.run_nsa_varlen("cuda", [1000, 37, 2048, 515], 64, 4, 128, 16, 64,
                                                           num_stages=num_stages)
    _check(actual, expected, atol=1e-2, rtol=1e-2)
