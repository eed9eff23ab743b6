"""Global → fragment copies as vector loads (plugins/cuda/lower/vector_load.py) on the GPU: tails
read as zeros, conversions as the element copy's, on both paths."""

from __future__ import annotations

import pytest
import torch

import tilelang_x.language as T
from tests.kernels import attention_bwd, elementwise
from tilelang_x import knobs


@pytest.mark.parametrize("target", ["cuda", "cuda:sm_90"])
@pytest.mark.parametrize(("dtype", "frag"), [(T.float16, T.float32), (T.float16, T.float16), (T.bfloat16, T.float32),
                                             (T.float32, T.float32)])
@pytest.mark.parametrize(("m", "n", "col0"), [(100, 200, 0), (64, 124, 0), (70, 130, 1)])
def test_tiles_with_tails(target: str, dtype, frag, m: int, n: int, col0: int) -> None:
    tdtype = {T.float16: torch.float16, T.bfloat16: torch.bfloat16, T.float32: torch.float32}[dtype]
    x = torch.randn(m, n + col0, device="cuda").to(tdtype)
    with knobs.scope(target_default=target):
        y = elementwise.scaled_tiles(m, n, dtype=dtype, frag_dtype=frag, col0=col0)(x)
    torch.testing.assert_close(y, 2 * x[:, col0:].float(), rtol=0, atol=0)


def test_preprocess_of_the_attention_backward() -> None:
    o, do = (torch.randn(2, 4, 256, 128, device="cuda", dtype=torch.float16) for _ in range(2))
    delta = attention_bwd.flash_bwd_preprocess(2, 4, 256, 128)(o, do)
    torch.testing.assert_close(delta, (o.float() * do.float()).sum(-1), rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("target", ["cuda", "cuda:sm_90"])
@pytest.mark.parametrize(("src_dtype", "dst_dtype"), [(T.float32, T.float16), (T.float32, T.bfloat16),
                                                      (T.float16, T.float32), (T.bfloat16, T.bfloat16)])
@pytest.mark.parametrize(("m", "n"), [(100, 200), (64, 124), (33, 131)])
def test_casts_with_tails(target: str, src_dtype, dst_dtype, m: int, n: int) -> None:
    tt = {T.float16: torch.float16, T.bfloat16: torch.bfloat16, T.float32: torch.float32}
    x = (torch.randn(m, n, device="cuda") * 3).to(tt[src_dtype])
    with knobs.scope(target_default=target):
        y = elementwise.cast_tiles(m, n, src_dtype=src_dtype, dst_dtype=dst_dtype)(x)
    assert torch.equal(y, x.to(tt[dst_dtype]))


def test_postprocess_of_the_attention_backward() -> None:
    dq = torch.randn(2, 4, 256, 128, device="cuda")
    out = attention_bwd.flash_bwd_postprocess(2, 4, 256, 128)(dq)
    assert torch.equal(out, dq.half())
