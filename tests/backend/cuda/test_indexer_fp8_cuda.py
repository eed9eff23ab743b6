"""TileLang's DeepSeek v3.2 indexer logits (``tests/kernels/views.head_weighted_scores``) with float8
e4m3 Q and K on the GPU against torch, through each form its gemm takes: wgmma (``cuda`` on the
H200), mma.sync m16n8k32 (``cuda:sm_90``, the sm_80-class path) and the FMA loop of sm_80 / sm_86,
which have no float8 mma.sync (``cuda:sm_90`` with that capability taken away)."""

from __future__ import annotations

import pytest
import torch

import tilelang_x
from tests.kernels import views
from tilelang_x import knobs
from tilelang_x.compiler import clear_cache
from tilelang_x.core_ir import dtypes
from tilelang_x.plugins.cuda.target import CAPABILITIES

SEQ_Q, SEQ_KV, HEADS, DIM = 16, 1000, 64, 128


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(SEQ_Q * HEADS, DIM, device="cuda", generator=gen).to(torch.float8_e4m3fn)
    k = torch.randn(SEQ_KV, DIM, device="cuda", generator=gen).to(torch.float8_e4m3fn)
    w = torch.randn(SEQ_Q, HEADS, device="cuda", generator=gen)
    ref = (torch.relu(k.float() @ q.float().T).reshape(SEQ_KV, SEQ_Q, HEADS) * w[None]).sum(-1).T
    return q, k, w, ref


def _check(out: torch.Tensor, ref: torch.Tensor) -> None:
    torch.cuda.synchronize()
    # wgmma's float8 sums keep fewer bits than float32 ones
    torch.testing.assert_close(out, ref, atol=5e-2, rtol=1e-2)


@pytest.mark.parametrize("target", ["cuda", "cuda:sm_90"])
def test_float8_indexer_matches_torch(target: str) -> None:
    q, k, w, ref = _inputs()
    with knobs.scope(target_default=target):
        out = views.head_weighted_scores(SEQ_Q, SEQ_KV, HEADS, DIM, dtype=dtypes.float8_e4m3)(q, k, w)
    _check(out, ref)


def test_float8_indexer_fma_fallback_matches_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(CAPABILITIES["sm_90"], "fp8_mma", False)
    clear_cache()  # neither take nor leave an mma.sync kernel of the same function in memory
    try:
        func = views.head_weighted_scores.get_ir(SEQ_Q, SEQ_KV, HEADS, DIM, dtype=dtypes.float8_e4m3)
        kernel = tilelang_x.compile(func, target="cuda:sm_90", out_idx=[-1])
        source = kernel.get_kernel_source()
        assert "tlx_mma_e4m3e4m3(" not in source[source.index('extern "C"'):]
        q, k, w, ref = _inputs()
        _check(kernel(q, k, w), ref)
    finally:
        clear_cache()
