"""``T.sync_grid`` and programmatic dependent launch on the GPU: the grid barrier's results against
torch, many barriers and repeated launches (each leaves the per-stream counter ready for the next),
two streams, a grid too large to be resident at once, and a two-kernel function whose second
kernel is launched with programmatic stream serialization (sm_90+). The suite cases
(tests/kernels/grid.py) also run in test_suite_cuda.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import grid, reductions
from tilelang_x.core_ir.errors import ArgumentError


def _smooth_ref(x: torch.Tensor, steps: int) -> torch.Tensor:
    ref = x.clone()
    for _ in range(steps):
        padded = F.pad(ref, (1, 1))
        ref = (padded[:-2] + padded[1:-1] + padded[2:]) / 3
    return ref


def test_many_barriers_and_repeated_launches() -> None:
    kernel = grid.smooth(128 * 64, 101)  # 64 blocks, 102 barriers a launch
    for seed in range(5):
        x = torch.randn(128 * 64, generator=torch.Generator().manual_seed(seed)).cuda()
        work = torch.zeros(2, 128 * 64, device="cuda")
        torch.testing.assert_close(kernel(x, work), _smooth_ref(x, 101), atol=1e-5, rtol=1e-4)


def test_cooperative_kernels_alternate_on_one_stream_and_run_on_two() -> None:
    norm = grid.normalize(256, 64)
    smooth = grid.smooth(1024, 7)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    for stream in (s1, s2, torch.cuda.current_stream()):
        with torch.cuda.stream(stream):
            for _ in range(3):
                x = torch.rand(256, 64, device="cuda")
                torch.testing.assert_close(norm(x, torch.zeros(256, device="cuda")), x / x.sum())
                v = torch.randn(1024, device="cuda")
                torch.testing.assert_close(smooth(v, torch.zeros(2, 1024, device="cuda")), _smooth_ref(v, 7),
                                           atol=1e-5, rtol=1e-4)
    torch.cuda.synchronize()


def test_a_grid_larger_than_the_device_holds_is_refused() -> None:
    @T.prim_func
    def main(A: T.Tensor((1 << 20,), T.float32)):
        with T.Kernel(1 << 14, threads=64) as bx:
            T.sync_grid()
            for i in T.Parallel(64):
                A[bx * 64 + i] = 1.0

    kernel = tilelang.compile(main, target="cuda")
    with pytest.raises(ArgumentError, match=r"calls T.sync_grid\(\).*at most \d+ fit"):
        kernel(torch.zeros(1 << 20, device="cuda"))


def test_pdl_two_kernels() -> None:
    kernel = reductions.split_row_sum(4096, 1024, splits=8, block_M=32, pdl=True)
    for _ in range(20):
        a = torch.randn(4096, 1024, device="cuda")
        torch.testing.assert_close(kernel(a, torch.zeros(8, 4096, device="cuda")), a.sum(1), atol=1e-3, rtol=1e-4)
    assert "tlx_pdl_sync();" in kernel.get_kernel_source()
