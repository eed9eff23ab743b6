"""Stream-K persistent GEMMs on the GPU (sm_90a, ``pass_configs={"tlx.stream_k": True}``): tails in
M, N and K, bf16, a transposed B and a fused epilogue against torch; repeated launches (every launch
must leave its workspace zeroed) and launches on two streams (one workspace each). Skipped below
sm_90."""

from __future__ import annotations

import pytest
import torch

import tilelang_x
from tests.kernels import gemm
from tilelang_x.compiler import clear_cache
from tilelang_x.core_ir.dtypes import as_dtype

ON = {"tlx.stream_k": True}


@pytest.fixture(autouse=True)
def _hopper() -> None:
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("needs sm_90a")


def _kernel(m: int, n: int, k: int, dtype: str = "float16", bm: int = 128, bn: int = 256, stages: int = 3,
            bk: int = 64, **kw: object) -> object:
    func = gemm.matmul.get_ir(m, n, k, block_M=bm, block_N=bn, block_K=bk, num_stages=stages, threads=256,
                              in_dtype=as_dtype(dtype), out_dtype=as_dtype(dtype), **kw)
    kernel = tilelang_x.compile(func, out_idx=[-1], pass_configs=ON)
    assert "tlx_sk_add(" in kernel.get_kernel_source().split("TLX_DEV")[-1]
    return kernel


# (M, N, K, dtype, block_M, block_N, stages, extra) on 132 SMs: last waves of more than half the SMs
# (the tail split evenly between all blocks) and of at most half (each tail tile in equal parts)
CASES = [(4096, 4096, 1024, "float16", 128, 256, 3, {}),  # 512 tiles of 16 iterations
         (3700, 1960, 328, "float16", 128, 256, 3, {}),  # 29 x 8 tiles, every last one partial; K = 5.1 steps
         (4096, 4096, 512, "bfloat16", 128, 128, 4, {}),  # 1024 tiles
         (4096, 4096, 1024, "float16", 128, 256, 3, {"trans_B": True}),
         (4096, 4096, 1024, "float16", 128, 256, 3, {"relu": True}),
         (1536, 4096, 1024, "float16", 128, 256, 3, {}),  # 192 tiles: 60 in the tail, in halves
         (1152, 4096, 2048, "bfloat16", 128, 256, 3, {}),  # 144 tiles: 12 in the tail, in quarters
         (2304, 2816, 1024, "float16", 128, 256, 3, {}),  # 198 tiles: 66 in the tail, half the SMs, in halves
         # TF32 with B stored K x N: a swapped wgmma (C^T = B^T A^T), its accumulator's partial sums
         (1536, 4096, 1024, "float32", 128, 256, 3, {"bk": 32})]


@pytest.mark.parametrize("m,n,k,dtype,bm,bn,stages,extra", CASES)
def test_stream_k_gemm_matches_torch(m: int, n: int, k: int, dtype: str, bm: int, bn: int, stages: int,
                                     extra: dict, launcher_kind: str) -> None:
    clear_cache()  # a fresh launcher of this kind
    kernel = _kernel(m, n, k, dtype, bm, bn, stages, **extra)
    tdt = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", generator=gen).to(tdt)
    b = torch.randn(*((n, k) if extra.get("trans_B") else (k, n)), device="cuda", generator=gen).to(tdt)
    ref = a.float() @ (b.float().t() if extra.get("trans_B") else b.float())
    if extra.get("relu"):
        ref = ref.relu()
    for _ in range(3):  # each launch must leave the flags it waited on cleared
        torch.testing.assert_close(kernel(a, b).float(), ref, atol=0.25, rtol=2e-2)


def test_stream_k_on_two_streams() -> None:
    kernel = _kernel(4096, 4096, 1024)
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    inputs = [(torch.randn(4096, 1024, device="cuda").half(), torch.randn(1024, 4096, device="cuda").half())
              for _ in streams]
    torch.cuda.synchronize()
    outs = []
    for _ in range(4):  # both streams in flight at once, each on its own workspace
        for s, (a, b) in zip(streams, inputs):
            with torch.cuda.stream(s):
                outs.append((kernel(a, b), a, b))
    torch.cuda.synchronize()
    for c, a, b in outs:
        torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.25, rtol=2e-2)


def test_stream_k_in_a_cuda_graph() -> None:
    kernel = _kernel(4096, 4096, 1024)
    a = torch.randn(4096, 1024, device="cuda").half()
    b = torch.randn(1024, 4096, device="cuda").half()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # the first call on the capture stream allocates its workspace there
        c = kernel(a, b)
    for _ in range(3):  # replays reuse the captured workspace, which each launch leaves zeroed
        c.zero_()
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.25, rtol=2e-2)
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), atol=0.25, rtol=2e-2)


def test_stream_k_kernels_of_two_slot_sizes_share_a_stream() -> None:
    """One workspace serves the stream's stream-K kernels: a 128×128 kernel's partials must not
    land on the flags of a 128×256 one run before and after it."""
    wide, narrow = _kernel(4096, 4096, 1024), _kernel(4096, 4096, 512, "bfloat16", 128, 128, 4)
    a, b = torch.randn(4096, 1024, device="cuda").half(), torch.randn(1024, 4096, device="cuda").half()
    a2, b2 = torch.randn(4096, 512, device="cuda").bfloat16(), torch.randn(512, 4096, device="cuda").bfloat16()
    for _ in range(3):
        torch.testing.assert_close(wide(a, b).float(), a.float() @ b.float(), atol=0.25, rtol=2e-2)
        torch.testing.assert_close(narrow(a2, b2).float(), a2.float() @ b2.float(), atol=0.25, rtol=2e-2)
