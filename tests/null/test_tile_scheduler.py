"""``T.PersistentTileScheduler`` / ``T.BaseTileScheduler``: TileLang's persistent tile walk, in the
interpreter (against torch) and as generated CUDA."""

from __future__ import annotations

import pytest
import torch

import tilelang_x
import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source
from tilelang_x.core_ir.errors import ArgumentError, TileLangError
from tilelang_x.core_ir.stmt import Alloc, While
from tilelang_x.core_ir.visit import walk


def _decode(m_tiles: int, n_tiles: int, **kw) -> list[tuple[int, int]]:
    """The scheduler's tile order, decoded with Python ints (``coord`` builds plain arithmetic)."""
    sched = T.PersistentTileScheduler("s", m_tiles, n_tiles, num_workers=1, stateful=False, **kw)
    rows = -(-m_tiles // kw.get("cluster_size", 1))
    return [tuple(int(x) for x in sched.coord(t)) for t in range(rows * n_tiles)]


@pytest.mark.parametrize("kw", [{}, {"column_major": False}, {"swizzle_size": 2}, {"swizzle_size": 3},
                                {"swizzle_size": 3, "column_major": False}, {"cluster_size": 2, "swizzle_size": 2}])
def test_coord_visits_every_tile_once(kw: dict) -> None:
    order = _decode(5, 4, **kw)
    rows = -(-5 // kw.get("cluster_size", 1))
    assert sorted(order) == [(m, n) for m in range(rows) for n in range(4)]


def test_coord_orders() -> None:
    assert _decode(3, 2)[:4] == [(0, 0), (1, 0), (2, 0), (0, 1)]  # M fastest
    assert _decode(3, 2, column_major=False)[:3] == [(0, 0), (0, 1), (1, 0)]  # N fastest
    # panels of 2 columns: the 3 rows of columns 0-1, then of 2-3, then the narrower panel of column 4
    assert _decode(3, 5, swizzle_size=2) == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1),
                                             (0, 2), (0, 3), (1, 2), (1, 3), (2, 2), (2, 3),
                                             (0, 4), (1, 4), (2, 4)]


def _persistent_gemm(M: int, N: int, K: int, bm: int, bn: int, bk: int, workers: int, **kw):
    m_tiles, n_tiles = T.ceildiv(M, bm), T.ceildiv(N, bn)

    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32),
             Iters: T.Tensor((workers,), T.int32)):
        with T.Kernel(workers, threads=128) as (block_id,):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            C_f = T.alloc_fragment((bm, bn), T.float32)
            sched = T.PersistentTileScheduler("sched", m_tiles, n_tiles, num_workers=workers, **kw)
            sched.init(block_id)
            while sched.valid():
                bx, by = sched.m_idx[0], sched.n_idx[0]
                T.clear(C_f)
                for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                    T.copy(A[bx * bm, ko * bk], A_s)
                    T.copy(B[ko * bk, by * bn], B_s)
                    T.gemm(A_s, B_s, C_f)
                T.copy(C_f, C[bx * bm, by * bn])
                sched.next_tile()
            Iters[block_id] = sched.current_iter[0]

    return gemm


@pytest.mark.parametrize("kw", [{}, {"swizzle_size": 2, "column_major": False}])
def test_persistent_gemm_in_the_interpreter(kw: dict) -> None:
    func = _persistent_gemm(96, 128, 64, 32, 32, 32, workers=5, **kw)  # 12 tiles over 5 blocks
    a = torch.randn(96, 64).half()
    b = torch.randn(64, 128).half()
    c = torch.zeros(96, 128)
    iters = torch.zeros(5, dtype=torch.int32)
    tilelang_x.compile(func, target="interp")(a, b, c, iters)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)
    assert iters.tolist() == [3, 3, 2, 2, 2]
    names = [n.buffer.name for n in walk(func.body) if isinstance(n, Alloc) and n.buffer.name.startswith("sched")]
    assert names == ["sched_m_idx", "sched_n_idx", "sched_linear_idx", "sched_current_iter"]
    assert any(isinstance(n, While) for n in walk(func.body))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_persistent_gemm_generates_cuda(arch: str) -> None:
    source, _ = cuda_source(_persistent_gemm(256, 256, 128, 64, 64, 32, workers=3, swizzle_size=2), arch)
    body = source[source.index('extern "C"'):]
    assert "while (" in body and "sched_linear_idx" in body


def test_stateless_scheduler_decodes_in_a_for_loop() -> None:
    M = N = 64
    waves, workers = 2, 2

    @T.prim_func
    def fill(C: T.Tensor((M, N), T.int32)):
        with T.Kernel(workers, threads=32) as (wid,):
            sched = T.PersistentTileScheduler("s", 2, 2, num_workers=workers, stateful=False)
            for w in T.serial(waves):
                bx, by = sched.coord(workers * w + wid)
                for i, j in T.Parallel(32, 32):
                    C[bx * 32 + i, by * 32 + j] = wid * 10 + w

    c = torch.full((M, N), -1, dtype=torch.int32)
    tilelang_x.compile(fill, target="interp")(c)
    # tiles 0..3 in M-fastest order: (0,0) (1,0) (0,1) (1,1); worker w takes tiles w, w + 2
    assert [int(c[m * 32, n * 32]) for m, n in ((0, 0), (1, 0), (0, 1), (1, 1))] == [0, 10, 1, 11]
    assert not any(isinstance(n, Alloc) and n.buffer.name.startswith("s_") for n in walk(fill.body))


def test_bad_arguments_and_stateless_use_are_refused() -> None:
    with pytest.raises(ArgumentError, match="swizzle_size=0"):
        T.PersistentTileScheduler("s", 4, 4, num_workers=2, swizzle_size=0, stateful=False)

    with pytest.raises(TileLangError, match="stateful=False") as info:
        @T.prim_func
        def bad(C: T.Tensor((4,), T.int32)):
            with T.Kernel(2, threads=32) as (wid,):
                sched = T.PersistentTileScheduler("s", 2, 2, num_workers=2, stateful=False)
                sched.init(wid)
                C[wid] = 0
    assert info.value.loc is not None and info.value.loc.file.endswith("test_tile_scheduler.py")


def test_base_scheduler_needs_a_decoder() -> None:
    with pytest.raises(TileLangError, match="base class"):
        @T.prim_func
        def bad(C: T.Tensor((4,), T.int32)):
            with T.Kernel(2, threads=32) as (wid,):
                sched = T.BaseTileScheduler("s")
                sched.init(wid)
                C[wid] = 0


def test_default_worker_count_needs_a_gpu() -> None:
    if torch.cuda.is_available():
        pytest.skip("the default is the GPU's SM count here")
    with pytest.raises(TileLangError, match="CUDA device") as info:
        T.PersistentTileScheduler("s", 4, 4, stateful=False)
    assert "SM count" in (info.value.hint or "")
