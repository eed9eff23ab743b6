"""16-bit float chains on the GPU give the interpreter's results bit for bit: every operation
rounded to its dtype (plugins/cuda/narrow_math.py)."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
from tests.null.test_cuda_narrow_math import N, _chain, _inputs, _unpack


@pytest.mark.parametrize("target", ["cuda", "cuda:sm_90"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_chain_matches_the_interpreter_bit_for_bit(dtype: str, target: str) -> None:
    a, b = _inputs(dtype)
    expect = torch.empty_like(a)
    tilelang.compile(_chain(dtype), target="interp")(a, b, expect)
    got = torch.empty_like(a).cuda()
    tilelang.compile(_chain(dtype), target=target)(a.cuda(), b.cuda(), got)
    assert torch.equal(got.cpu(), expect)


def test_the_weight_unpacks_match_torch_exactly() -> None:
    gen = torch.Generator().manual_seed(3)
    p = torch.randint(0, 256, (N,), generator=gen, dtype=torch.uint8)
    s = torch.rand(N, generator=gen).half()
    w, v = torch.empty(N).half().cuda(), torch.empty(N).half().cuda()
    tilelang.compile(_unpack(), target="cuda")(p.cuda(), s.cuda(), w, v)
    ref = ((p & 15).half() - 8) * s
    assert torch.equal(w.cpu(), ref) and torch.equal(v.cpu(), ref)
