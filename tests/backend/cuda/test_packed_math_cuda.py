"""TileLang's packed x2 math and ``T.fast_rcp`` on the GPU, against the exact references of
``tests/kernels/packed_math.py``: every lane correctly rounded once, as the interpreter computes it."""

from __future__ import annotations

import math

import pytest
import torch

import tilelang_x
import tilelang_x.language as T
from tests.kernels import packed_math as K

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_TL = {torch.float16: T.float16, torch.bfloat16: T.bfloat16, torch.float32: T.float32}


def _run(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    kernel = tilelang_x.compile(K.packed_ops.get_ir(a.numel() // 2, _TL[a.dtype]), out_idx=[-1], target="cuda")
    return kernel(a.cuda(), b.cuda(), c.cuda()).cpu()


def _inputs(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random values, every pair of special values and the fma ties, in one batch."""
    g = torch.Generator().manual_seed(11)
    rand = [(torch.randn(256, generator=g) * 4).to(dtype) for _ in range(3)]
    sv = K.special_values(dtype)
    pairs = [(x, y) for x in sv for y in sv]
    special = [torch.tensor([x for x, _ in pairs], dtype=dtype), torch.tensor([y for _, y in pairs], dtype=dtype),
               torch.tensor([sv[(i * 7) % len(sv)] for i in range(len(pairs))], dtype=dtype)]
    ties = [torch.tensor(v, dtype=dtype) for v in K.tie_cases(dtype)]
    a, b, c = (torch.cat([r, s, t]) for r, s, t in zip(rand, special, ties))
    if a.numel() % 2:
        a, b, c = (torch.cat([t, t[:1]]) for t in (a, b, c))
    return a, b, c


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_packed_ops_round_each_lane_once(dtype):
    a, b, c = _inputs(dtype)
    out = _run(a, b, c)
    for k, op in enumerate(K.OPS):
        torch.testing.assert_close(out[k], K.reference(op, a, b, c), rtol=0, atol=0, equal_nan=True, msg=op)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_packed_max_min_order_signed_zeros(dtype):
    a = torch.tensor([-0.0, 0.0, -0.0, math.nan], dtype=dtype)
    b = torch.tensor([0.0, -0.0, -0.0, 3.0], dtype=dtype)
    out = _run(a, b, a)
    assert [math.copysign(1, v) for v in out[4].tolist()[:3]] == [1, 1, -1]
    assert [math.copysign(1, v) for v in out[5].tolist()[:3]] == [-1, -1, -1]
    assert out[4].tolist()[3] == out[5].tolist()[3] == 3.0


def test_packed_words_on_the_gpu():
    a = torch.tensor([1.0, -2.0, -0.5, 65504.0], dtype=torch.float16)
    w = torch.empty(2, dtype=torch.uint32, device="cuda")
    r = tilelang_x.compile(K.packed_bits.get_ir(2), out_idx=[-1], target="cuda")(a.cuda(), w).cpu()
    bits = a.abs().view(torch.int16).to(torch.int64) & 0xFFFF
    assert w.cpu().to(torch.int64).tolist() == [int(bits[0] | bits[1] << 16), int(bits[2] | bits[3] << 16)]
    torch.testing.assert_close(r, -a.abs(), rtol=0, atol=0)


def test_fast_rcp_within_one_ulp():
    g = torch.Generator().manual_seed(5)
    x = torch.cat([torch.randn(4096, generator=g) * 10.0 ** torch.randint(-30, 30, (4096,), generator=g),
                   torch.tensor([0.0, -0.0, math.inf, -math.inf, 2.0**127, -(2.0**127), 3.0])])
    r = tilelang_x.compile(K.fast_rcp.get_ir(x.numel()), out_idx=[-1], target="cuda")(x.cuda()).cpu()
    exact = (1.0 / x.double()).float()
    normal = exact.abs() >= torch.finfo(torch.float32).smallest_normal
    ulp = torch.nextafter(exact.abs(), torch.tensor(math.inf)) - exact.abs()
    assert ((r - exact).abs() <= ulp)[normal & exact.isfinite()].all()
    assert (r[~normal & exact.isfinite()] == 0).all()  # subnormal results flush to zero
    assert r[-7:-3].tolist() == [math.inf, -math.inf, 0.0, 0.0] and math.copysign(1, r[-4].item()) == -1
