"""TileLang's persistent GEMM (``T.Persistent`` over the tiles, one block per SM) on the GPU: on
sm_90a it runs as a grid in the compiler's persistent, warp-specialized form; with the walk kept
(``tlx.tiles_as_grid`` off) and with tiles that share state, as the loop it is. Against torch."""

from __future__ import annotations

import pytest
import torch

import tilelang_x
import tilelang_x.language as T
from tests.kernels import gemm
from tests.null.test_cuda_tiles_as_grid import (
    dynamic_rows,
    m_first_persistent_gemm,
    product_of_coordinates,
    running_sum,
    running_sum_reference,
    tile_walk,
)


def _hopper() -> None:
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("the grid form is sm_90a's")


@pytest.mark.parametrize("pc", [{}, {"tlx.tiles_as_grid": False}])
@pytest.mark.parametrize("m, n, k, tile", [(2048, 2048, 1024, (128, 256, 64, 4, 256)),
                                           (1000, 1000, 520, (128, 128, 64, 3, 256)),
                                           (4096, 4096, 4096, (128, 256, 64, 4, 256))])
def test_persistent_gemm_matches_torch(m: int, n: int, k: int, tile: tuple, pc: dict) -> None:
    _hopper()
    bm, bn, bk, stages, threads = tile
    blocks = torch.cuda.get_device_properties(0).multi_processor_count
    func = gemm.matmul_persistent.get_ir(m, n, k, blocks, block_M=bm, block_N=bn, block_K=bk, num_stages=stages,
                                         threads=threads)
    kernel = tilelang_x.compile(func, out_idx=[-1], pass_configs=pc)
    a = torch.randn(m, k, device="cuda").half()
    b = torch.randn(k, n, device="cuda").half()
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=0.25)


def test_an_m_first_walk_with_a_shared_epilogue() -> None:
    _hopper()
    m, n, k = 1000, 1200, 520
    a = torch.randn(m, k, device="cuda").half()
    b = torch.randn(k, n, device="cuda").half()
    kernel = tilelang_x.compile(m_first_persistent_gemm.get_ir(m, n, k), out_idx=[-1])
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=0.25)


def test_independent_and_dependent_tiles() -> None:
    _hopper()
    rows, blocks = 1000, 5
    a = torch.randn(rows, 64, device="cuda")
    out = torch.zeros(rows, 64, device="cuda")
    tilelang_x.compile(tile_walk.get_ir(rows, blocks, "scaled"))(a, out)
    torch.testing.assert_close(out, a * 2)
    tilelang_x.compile(running_sum.get_ir(rows, blocks))(a, out)
    torch.testing.assert_close(out, running_sum_reference(a, rows, blocks), rtol=1e-4, atol=1e-4)
    grid = torch.zeros(8, 6, dtype=torch.int32, device="cuda")
    tilelang_x.compile(product_of_coordinates.get_ir(5))(grid)
    assert grid.tolist() == [[x * y for x in range(6)] for y in range(8)]


@pytest.mark.parametrize("pc", [{}, {"tlx.tiles_as_grid": False}])
def test_a_domain_of_dynamic_size(pc: dict) -> None:
    """A grid sized at launch, as the walk was: an empty domain (one block, all its accesses out of
    range) writes nothing."""
    _hopper()
    kernel = tilelang_x.compile(dynamic_rows.get_ir(8), pass_configs=pc)
    for rows in (1000, 64, 1, 0):
        a = torch.randn(rows, 64, device="cuda")
        out = torch.full((rows, 64), -1.0, device="cuda")
        kernel(a, out)
        torch.testing.assert_close(out, a)
    fence = torch.full((64, 64), -1.0, device="cuda")
    kernel(fence[:0], fence[:0])
    assert bool((fence == -1).all())


@pytest.mark.parametrize("pc", [{}, {"tlx.tiles_as_grid": False}])
def test_a_persistent_gemm_of_dynamic_m(pc: dict) -> None:
    _hopper()
    blocks = torch.cuda.get_device_properties(0).multi_processor_count
    func = gemm.matmul_persistent.get_ir(T.dynamic("m"), 1024, 512, blocks, block_M=128, block_N=128, block_K=64,
                                         num_stages=3, threads=256)
    kernel = tilelang_x.compile(func, out_idx=[-1], pass_configs=pc)
    b = torch.randn(512, 1024, device="cuda").half()
    for m in (1000, 4096, 64):
        a = torch.randn(m, 512, device="cuda").half()
        torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=0.25)
