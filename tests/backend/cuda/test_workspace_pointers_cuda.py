"""T.alloc_global workspaces and T.ptr parameters on the GPU: integer addresses (TileLang's
``x.data_ptr()``), tensors viewed from their first element, both launchers, repeated calls."""

from __future__ import annotations

import pytest
import torch

from tests.kernels import workspace
from tests.null.test_alloc_global import doubled_plus_one
from tests.null.test_pointers import copy_n, scale_rows
from tilelang_x import knobs
from tilelang_x.errors import ArgumentError


@pytest.mark.parametrize("target", ["cuda", "cuda:sm_90"])
def test_split_k_workspace_repeated_calls(target: str, launcher_kind: str) -> None:
    a = torch.randn(256, 1024, device="cuda").half()
    b = torch.randn(1024, 192, device="cuda").half()
    ref = (a.float() @ b.float()).half()
    with knobs.scope(target_default=target):
        kernel = workspace.matmul_split_k(256, 192, 1024, splits=8)
        for _ in range(3):
            torch.testing.assert_close(kernel(a, b).float(), ref.float(), atol=2e-2, rtol=1e-2)
        c = torch.empty(256, 192, device="cuda", dtype=torch.float16)
        assert kernel(a, b, c) is None
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), ref.float(), atol=2e-2, rtol=1e-2)


def test_workspace_on_a_side_stream(launcher_kind: str) -> None:
    x = torch.randn(1000, device="cuda")
    stream = torch.cuda.Stream()
    with knobs.scope(target_default="cuda"):
        kernel = doubled_plus_one(1000)
        with torch.cuda.stream(stream):
            outs = [kernel(x) for _ in range(4)]
    stream.synchronize()
    for out in outs:
        torch.testing.assert_close(out, x * 2 + 1)


@pytest.mark.parametrize("target", ["cuda", "cuda:sm_90"])
def test_pointer_gemm_with_integer_addresses(target: str, launcher_kind: str) -> None:
    a = torch.randn(128, 96, device="cuda").half()
    b = torch.randn(64, 96, device="cuda").half()
    c = torch.zeros(128, 64, device="cuda")
    with knobs.scope(target_default=target):
        kernel = workspace.matmul_pointers(128, 64, 96)
        kernel(a.data_ptr(), b.data_ptr(), c.data_ptr(), 128, 64, 96)
        torch.cuda.synchronize()
        torch.testing.assert_close(c, a.float() @ b.float().T, atol=1e-3, rtol=1e-3)
        c.zero_()
        kernel(a, b, c, 128, 64, 96)  # tensors work too
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a.float() @ b.float().T, atol=1e-3, rtol=1e-3)


def test_pointer_tensors_slices_strides_and_bounds(launcher_kind: str) -> None:
    with knobs.scope(target_default="cuda"):
        big = torch.arange(40, dtype=torch.float32, device="cuda")
        scale_rows(2, 8)(big[10:], 2)
        grid = torch.arange(24, dtype=torch.float32, device="cuda").reshape(3, 8)
        scale_rows(3, 4, stride=8)(grid, 3)
        x = torch.randn(300, device="cuda").half()
        y = torch.zeros(300, device="cuda").half()
        copy_n()(x.data_ptr(), y, 200)
        with pytest.raises(ArgumentError, match="reaches 16 elements"):
            scale_rows(2, 8)(torch.zeros(12, device="cuda"), 2)
    torch.cuda.synchronize()
    want = torch.arange(40, dtype=torch.float32, device="cuda")
    want[10:26] *= 2
    torch.testing.assert_close(big, want)
    want = torch.arange(24, dtype=torch.float32, device="cuda").reshape(3, 8)
    want[:, :4] *= 2
    torch.testing.assert_close(grid, want)
    torch.testing.assert_close(y[:200], x[:200])
    assert not y[200:].any()
