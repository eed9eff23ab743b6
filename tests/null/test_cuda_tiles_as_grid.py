"""A ``T.Persistent`` walk over independent tiles runs as a grid over them on sm_90a, so that the
compiler's persistent, warp-specialized form applies (hopper/tiles_as_grid.py, pass config
``tlx.tiles_as_grid``); a walk whose tiles share state keeps its loop."""

from __future__ import annotations

import pytest

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import gemm
from tests.null.cuda_helpers import assert_compiles, cuda_source


def _persistent_gemm(**kw):
    args = dict(block_M=128, block_N=128, block_K=64, num_stages=4, threads=128)
    return gemm.matmul_persistent.get_ir(4096, 4096, 4096, 132, **{**args, **kw})


def test_a_persistent_gemm_gets_the_compilers_persistent_warp_specialized_form() -> None:
    source, ctx = cuda_source(_persistent_gemm(), "sm_90a")
    body = source[source.index('extern "C"'):]
    assert "bx_by_wave" not in body
    assert "for (int tlx_tile_j = 0;" in body and "if (tx >= 128) {" in body
    assert "__launch_bounds__(256, 1)" in body
    assert_compiles(source, "sm_90a", ctx)


def test_the_coordinates_become_a_grid_the_compiler_orders() -> None:
    """The walk's panel order (group_size 8) gives way to the compiler's: the kernel is the one a
    grid of tiles gets, but for the buffers' names."""
    ours = cuda_source(_persistent_gemm(block_N=256, threads=256), "sm_90a")[0]
    grid = cuda_source(gemm.matmul.get_ir(4096, 4096, 4096, block_M=128, block_N=256, block_K=64, num_stages=4,
                                          threads=256), "sm_90a")[0]
    names = {"A_shared": "A_s", "B_shared": "B_s", "C_local": "C_f", "ko_": "k_"}
    for a, b in names.items():
        grid = grid.replace(a, b)
    assert ours[ours.index('extern "C"'):] == grid[grid.index('extern "C"'):]


@tilelang.jit(out_idx=[-1])
def m_first_persistent_gemm(M, N, K, block_M=128, block_N=256, block_K=64, sm_num=132):
    """The walk over (M tiles, N tiles), the accumulator staged through shared memory."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(sm_num, threads=256) as (block_id):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_K, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            C_shared = T.alloc_shared((block_M, block_N), T.float16)
            for bx, by in T.Persistent([T.ceildiv(M, block_M), T.ceildiv(N, block_N)], sm_num, block_id):
                T.clear(C_local)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                    T.copy(A[bx * block_M, k * block_K], A_shared)
                    T.copy(B[k * block_K, by * block_N], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
                T.copy(C_local, C_shared)
                T.copy(C_shared, C[bx * block_M, by * block_N])

    return main


def test_an_m_first_walk_with_a_shared_epilogue_becomes_a_grid_too() -> None:
    body = cuda_source(m_first_persistent_gemm.get_ir(8192, 8192, 8192), "sm_90a")[0]
    body = body[body.index('extern "C"'):]
    assert "bx_by_wave" not in body and "if (tx >= 256) {" in body
    assert "const int bx = " in body and "const int by = " in body


@tilelang.jit
def dynamic_rows(blocks):
    rows = T.dynamic("rows")

    @T.prim_func
    def main(A: T.Tensor((rows, 64), T.float32), Out: T.Tensor((rows, 64), T.float32)):
        with T.Kernel(blocks, threads=128) as pid:
            tile = T.alloc_fragment((64, 64), T.float32)
            for i in T.Persistent([T.ceildiv(rows, 64)], blocks, pid):
                T.copy(A[i * 64, 0], tile)
                T.copy(tile, Out[i * 64, 0])

    return main


def test_a_domain_of_dynamic_size_becomes_a_grid_sized_at_launch() -> None:
    body = cuda_source(dynamic_rows.get_ir(8), "sm_90a")[0]
    assert "i_wave" not in body and "const int tlx_tile = blockIdx.x;" in body
    # every access stays under the dynamic extent, so an empty domain's one block does nothing
    assert body.count("< rows") == 2


def test_a_persistent_gemm_of_dynamic_m_gets_the_warp_specialized_grid() -> None:
    source, ctx = cuda_source(gemm.matmul_persistent.get_ir(T.dynamic("m"), 1024, 512, 132, block_M=128, block_N=128,
                                                            block_K=64, num_stages=3, threads=256), "sm_90a")
    body = source[source.index('extern "C"'):]
    assert "bx_by_wave" not in body and "if (tx >= 256) {" in body and "const int by = blockIdx.y;" in body
    assert_compiles(source, "sm_90a", ctx)


def test_the_switch_keeps_the_walk() -> None:
    body = cuda_source(_persistent_gemm(), "sm_90a", {"tlx.tiles_as_grid": False})[0]
    assert "for (int bx_by_wave = 0;" in body and "tlx_tile_j" not in body


@tilelang.jit
def running_sum(rows, blocks):
    """Out holds, for each 64-row tile, the sum of the tiles its block walked so far."""

    @T.prim_func
    def main(A: T.Tensor((rows, 64), T.float32), Out: T.Tensor((rows, 64), T.float32)):
        with T.Kernel(blocks, threads=128) as pid:
            tile = T.alloc_shared((64, 64), T.float32)
            acc = T.alloc_fragment((64, 64), T.float32)
            T.clear(acc)
            for i in T.Persistent([T.ceildiv(rows, 64)], blocks, pid):
                T.copy(A[i * 64, 0], tile)
                for r, c in T.Parallel(64, 64):
                    acc[r, c] += tile[r, c]
                T.copy(acc, Out[i * 64, 0])

    return main


@tilelang.jit
def tile_walk(rows, blocks, kind):
    """Each step of the walk copies a 64-row tile of A to Out: ``"scaled"`` doubles it (independent
    tiles), ``"per_block"`` adds the block's index (read outside the tile's number),
    ``"clustered"`` runs in clusters of two blocks."""

    @T.prim_func
    def main(A: T.Tensor((rows, 64), T.float32), Out: T.Tensor((rows, 64), T.float32)):
        with T.Kernel(blocks, threads=128, cluster_dims=2 if kind == "clustered" else None) as pid:
            tile = T.alloc_fragment((64, 64), T.float32)
            for i in T.Persistent([T.ceildiv(rows, 64)], blocks, pid):
                T.copy(A[i * 64, 0], tile)
                if kind == "per_block":
                    for r, c in T.Parallel(64, 64):
                        Out[i * 64 + r, c] = tile[r, c] + pid
                else:
                    if kind == "scaled":
                        for r, c in T.Parallel(64, 64):
                            tile[r, c] = tile[r, c] * 2.0
                    T.copy(tile, Out[i * 64, 0])

    return main


@pytest.mark.parametrize("ir", [lambda: running_sum.get_ir(1024, 8), lambda: tile_walk.get_ir(1024, 8, "per_block"),
                                lambda: tile_walk.get_ir(1024, 8, "clustered")])
def test_tiles_that_share_state_keep_the_walk(ir) -> None:
    source, _ = cuda_source(ir(), "sm_90a")
    assert "for (int i_wave = 0;" in source


@tilelang.jit
def product_of_coordinates(blocks):
    @T.prim_func
    def main(Out: T.Tensor((8, 6), T.int32)):
        with T.Kernel(blocks, threads=32) as pid:
            for x, y in T.Persistent([6, 8], blocks, pid, 3):
                Out[y, x] = x * y

    return main


def test_independent_tiles_of_any_kernel_become_a_grid() -> None:
    source, _ = cuda_source(tile_walk.get_ir(1024, 8, "scaled"), "sm_90a")
    assert "i_wave" not in source and "const int tlx_tile = blockIdx.x;" in source


def test_coordinates_read_other_than_linearly_keep_the_users_order() -> None:
    """``x * y`` is no sum of the coordinates: the grid is one of tile numbers, walked in the
    user's panel order."""
    source, _ = cuda_source(product_of_coordinates.get_ir(5), "sm_90a")
    assert "x_y_wave" not in source and "const int tlx_tile = blockIdx.x;" in source


def running_sum_reference(a, rows: int, blocks: int):
    """What ``running_sum`` writes: block ``b`` walks tiles ``b, b + blocks, ...``, each tile's rows
    the sum of the block's tiles so far."""
    import torch

    tiles = -(-rows // 64)
    padded = torch.cat([a, a.new_zeros(tiles * 64 - rows, 64)]).view(tiles, 64, 64)
    sums = [padded[b::blocks].cumsum(0) for b in range(blocks)]
    return torch.cat([sums[t % blocks][t // blocks] for t in range(tiles)])[:rows]


def test_running_sum_in_the_interpreter() -> None:
    import torch

    a = torch.randn(200, 64)
    out = torch.zeros(200, 64)
    tilelang.compile(running_sum.get_ir(200, 3), target="interp")(a, out)
    torch.testing.assert_close(out, running_sum_reference(a, 200, 3))
