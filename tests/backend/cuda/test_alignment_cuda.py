"""A tensor whose address is not aligned for the kernel's vector accesses is refused with an
ArgumentError before the launch (no fault, the CUDA context stays usable)."""

from __future__ import annotations

import pytest
import torch

from tests.kernels import gemm, reductions
from tilelang_x.errors import ArgumentError


def test_misaligned_rms_norm_input_is_refused() -> None:
    kernel = reductions.rms_norm(64, 512)
    base = torch.randn(64 * 512 + 1, device="cuda")
    x = base[1:].view(64, 512)  # contiguous, 4 bytes past a 16-byte boundary
    w = torch.randn(512, device="cuda")
    with pytest.raises(ArgumentError, match="not a multiple of 16 bytes"):
        kernel(x, w)
    torch.cuda.synchronize()
    good = x.clone()
    ref = good * torch.rsqrt(good.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    torch.testing.assert_close(kernel(good, w), ref, atol=1e-4, rtol=1e-4)


def test_misaligned_gemm_operand_is_refused_on_every_path() -> None:
    kernel = gemm.matmul(128, 128, 256, block_M=64, block_N=64)
    base = torch.randn(128 * 256 + 1, device="cuda").half()
    a = base[1:].view(128, 256)
    b = torch.randn(256, 128, device="cuda").half()
    # on Hopper the tensor map cannot describe `a` either: the cp.async build refuses it too
    with pytest.raises(ArgumentError, match="not a multiple of 16 bytes"):
        kernel(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(kernel(a.clone(), b).float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)


def test_misaligned_input_of_a_vector_load_is_refused() -> None:
    from tests.kernels import elementwise

    kernel = elementwise.scaled_tiles(64, 128)
    base = torch.randn(64 * 128 + 1, device="cuda").half()
    x = base[1:].view(64, 128)  # 2 bytes past a 16-byte boundary
    with pytest.raises(ArgumentError, match="not a multiple of 16 bytes"):
        kernel(x)
    torch.testing.assert_close(kernel(x.clone()), 2 * x.float())
