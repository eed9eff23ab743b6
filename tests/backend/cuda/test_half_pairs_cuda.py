"""16-bit fragments computed in pairs (plugins/cuda/half_pairs.py) give the per-operation results
bit for bit on the GPU, on both paths, as the element form does."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
from tests.null.test_cuda_half_pairs import _inputs, elementwise, reference


@pytest.mark.parametrize("pairs", [True, False])
@pytest.mark.parametrize("target", ["cuda", "cuda:sm_90"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_paired_arithmetic_matches_torch_bit_for_bit(dtype: str, target: str, pairs: bool) -> None:
    args = _inputs(dtype)
    expect = reference(dtype, *args[:-1])
    kernel = tilelang.compile(elementwise(dtype), target=target, pass_configs={"tlx.half_pairs": pairs})
    body = kernel.get_kernel_source().split("__global__")[1]
    assert any("tlx_st2_" in line and "(&F[" in line for line in body.splitlines()) == pairs
    gpu = [t.cuda() for t in args]
    kernel(*gpu)
    assert torch.equal(gpu[-1].cpu(), expect)
