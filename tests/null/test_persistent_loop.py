"""T.Persistent: the blocks of a wave take every tile of the domain exactly once, in any rank,
panel size and wave size (interpreter), and a TileLang-style persistent GEMM matches torch."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tilelang_x import knobs
from tilelang_x.errors import TileLangSyntaxError


@tilelang.jit
def visits_2d(d0, d1, blocks, group_size):
    @T.prim_func
    def main(V: T.Tensor((d1, d0), T.int32)):
        with T.Kernel(blocks, threads=32) as pid:
            for x, y in T.Persistent([d0, d1], blocks, pid, group_size):
                T.atomic_add(V[y, x], 1)

    return main


@tilelang.jit
def visits_3d(d0, d1, d2, blocks):
    @T.prim_func
    def main(V: T.Tensor((d2, d1, d0), T.int32)):
        with T.Kernel(blocks, threads=32) as pid:
            for x, y, z in T.Persistent([d0, d1, d2], blocks, pid):
                T.atomic_add(V[z, y, x], 1)

    return main


@pytest.mark.parametrize("d0, d1, blocks, group_size", [(5, 7, 3, 1), (5, 7, 4, 3), (4, 17, 6, 8), (16, 3, 50, 2),
                                                        (1, 1, 1, 8), (9, 9, 81, 4)])
def test_every_tile_once_2d(d0: int, d1: int, blocks: int, group_size: int) -> None:
    v = torch.zeros(d1, d0, dtype=torch.int32)
    with knobs.scope(target_default="interp"):
        visits_2d(d0, d1, blocks, group_size)(v)
    assert torch.equal(v, torch.ones_like(v))


def test_every_tile_once_3d() -> None:
    v = torch.zeros(3, 4, 5, dtype=torch.int32)
    with knobs.scope(target_default="interp"):
        visits_3d(5, 4, 3, 7)(v)
    assert torch.equal(v, torch.ones_like(v))


def test_group_size_must_be_a_positive_int() -> None:
    with pytest.raises(TileLangSyntaxError, match="group_size=0 must be a positive Python int"):
        @T.prim_func
        def main(V: T.Tensor((4, 4), T.int32)):
            with T.Kernel(2) as pid:
                for x, y in T.Persistent([4, 4], 2, pid, 0):
                    T.atomic_add(V[y, x], 1)


@pytest.mark.parametrize("arch, first_fill", [("sm_80", "tlx_cp_async16("), ("sm_90a", "tlx_mbar_init(")])
def test_a_rerun_pipeline_waits_for_the_previous_runs_reads(arch: str, first_fill: str) -> None:
    """Each tile reruns the T.Pipelined loop: all threads meet before its barriers are set up again
    and its first stages refilled, which the previous tile's last iterations may still be reading
    (on sm_90a with the walk kept: its tiles are independent, so it would become a grid)."""
    from tests.kernels import gemm
    from tests.null.cuda_helpers import cuda_source

    source, _ = cuda_source(gemm.matmul_persistent.get_ir(4096, 4096, 4096, 132, block_M=128, block_N=128), arch,
                            {"tlx.tiles_as_grid": False})
    tile_loop = source[source.index("for (int bx_by_wave"):]
    assert "__syncthreads();" in tile_loop[:tile_loop.index(first_fill)]
