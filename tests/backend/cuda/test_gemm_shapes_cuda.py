"""The user's GEMM (tests/kernels/gemm.py) on shapes that do not divide into its tiles, with B
stored either way, through the Hopper path's forms: warp-specialized, persistent or not, the
stream-K split of a last wave. Shapes and configurations are a fixed sample of a random sweep
(2026-11-30: 120 cases on the H200, none wrong) that covers tiny and ragged M, N and K."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import tilelang_x
import tilelang_x.language as T
from tests.kernels import gemm

# (M, N, K), (block_M, block_N, block_K, stages, threads), dtype, B stored [N, K], pass_configs
CASES: list[tuple[tuple[int, int, int], tuple[int, ...], str, bool, dict[str, Any]]] = [
    ((2304, 888, 40), (128, 256, 64, 3, 256), "bfloat16", False, {}),
    ((47, 2048, 5024), (128, 256, 64, 3, 256), "float16", True, {}),
    ((289, 4648, 5096), (64, 128, 32, 3, 128), "float16", False, {}),
    ((2759, 4096, 1264), (128, 128, 64, 4, 256), "bfloat16", True, {"tlx.persistent": False}),
    ((1359, 208, 3584), (128, 128, 64, 4, 256), "bfloat16", False, {"tlx.stream_k": True}),
    ((213, 80, 128), (128, 128, 32, 3, 128), "float16", True, {}),
    ((2048, 1024, 1024), (64, 128, 32, 3, 128), "bfloat16", False, {"tlx.stream_k": True}),
    ((144, 3960, 56), (128, 128, 32, 3, 128), "float16", True, {"tlx.persistent": False}),
    ((2424, 792, 280), (256, 128, 64, 3, 256), "float16", False, {}),
    ((4096, 3904, 4536), (256, 128, 64, 3, 256), "float16", True, {}),
    ((988, 24, 5832), (128, 128, 64, 4, 256), "bfloat16", False, {}),
    ((4096, 216, 280), (64, 128, 32, 3, 128), "float16", True, {"tlx.stream_k": True}),
    ((24, 3952, 2992), (128, 128, 64, 4, 256), "float16", False, {"tlx.stream_k": True}),
    ((1536, 2816, 8192), (256, 128, 64, 3, 256), "float16", False, {}),
    ((2304, 2816, 1024), (128, 256, 64, 3, 256), "bfloat16", True, {}),
    ((4189, 2816, 4096), (128, 128, 64, 4, 256), "float16", True, {}),
]


def _case_id(case: tuple[Any, ...]) -> str:
    (m, n, k), config, dtype, trans_b, configs = case
    parts = [f"{m}x{n}x{k}", "x".join(map(str, config)), dtype] + (["b_nk"] if trans_b else [])
    return "-".join(parts + [f"{key.split('.')[-1]}={value}" for key, value in configs.items()])


@pytest.mark.parametrize("shape, config, dtype, trans_b, configs", CASES, ids=[_case_id(c) for c in CASES])
def test_gemm_matches_torch(shape: tuple[int, int, int], config: tuple[int, ...], dtype: str, trans_b: bool,
                            configs: dict[str, Any]) -> None:
    m, n, k = shape
    bm, bn, bk, stages, threads = config
    tdt = getattr(torch, dtype)
    func = gemm.matmul.get_ir(m, n, k, block_M=bm, block_N=bn, block_K=bk, num_stages=stages, threads=threads,
                              in_dtype=getattr(T, dtype), out_dtype=getattr(T, dtype), trans_B=trans_b)
    kernel = tilelang_x.compile(func, out_idx=[-1], pass_configs=configs)
    gen = torch.Generator(device="cuda").manual_seed(m * 31 + n * 7 + k)
    a = torch.randn(m, k, device="cuda", generator=gen).to(tdt)
    b = torch.randn(*((n, k) if trans_b else (k, n)), device="cuda", generator=gen).to(tdt)
    ref = a.float() @ (b.float().T if trans_b else b.float())
    out = kernel(a, b).float()
    # one rounding of each output to the dtype: 2^-11 (float16) or 2^-8 (bfloat16) relative
    assert ((out - ref).norm() / ref.norm()).item() < (1e-3 if dtype == "float16" else 4e-3)
