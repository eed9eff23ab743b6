"""The cluster barrier (``T.cluster_arrive`` / ``_relaxed``, ``T.cluster_wait``, ``T.cluster_sync``),
``T.block_rank_in_cluster`` and the block's votes (``T.syncthreads_count`` / ``_and`` / ``_or``),
without a GPU: the interpreter (a cluster's blocks side by side) against expected values, the CUDA
source compiled for sm_90a and sm_80, and the errors, each naming the kernel's line."""

from __future__ import annotations

import itertools
import re

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import cluster_barriers as K
from tests.null.cuda_helpers import assert_compiles, cuda_source
from tests.null.located import located_errors
from tilelang_x.core_ir.errors import (
    BackendNotImplementedError,
    RaceError,
    TileLangError,
    VerificationError,
)

where, raises = located_errors(__file__)


def _interp(func: object) -> object:
    return tilelang.compile(func, target="interp")


def _expected_ranks(gx: int, gy: int, cluster: tuple[int, int, int]) -> torch.Tensor:
    cx, cy, _ = cluster
    return torch.tensor([[bx % cx + cx * (by % cy) for bx in range(gx)] for by in range(gy)], dtype=torch.int32)


# ---- the interpreter: ranks and the cluster barrier ---------------------------------------------

@pytest.mark.parametrize("cluster", [(2, 1, 1), (1, 2, 1), (2, 2, 1), (4, 2, 1), (3, 1, 1), (1, 1, 1)])
def test_rank_in_cluster(cluster: tuple[int, int, int]) -> None:
    r = torch.full((4, 6), -1, dtype=torch.int32)
    _interp(K.ranks.get_ir(6, 4, cluster))(r)
    assert torch.equal(r, _expected_ranks(6, 4, cluster))


def test_each_kernel_of_a_function_ranks_in_its_own_clusters() -> None:
    @T.prim_func
    def main(R: T.Tensor((2, 8), T.int32), X: T.Tensor((8, 4), T.int32), Y: T.Tensor((8, 4), T.int32)):
        with T.Kernel(8, threads=32, cluster_dims=2) as bx:
            R[0, bx] = T.block_rank_in_cluster()
        with T.Kernel(8, threads=32, cluster_dims=4) as bx:
            S = T.alloc_shared((1, 4), T.int32)
            T.copy(X[T.cast(T.block_rank_in_cluster(), T.int32), 0], S)  # a tile op's region
            T.copy(S, Y[bx, 0])
            R[1, bx] = T.block_rank_in_cluster()

    r = torch.zeros(2, 8, dtype=torch.int32)
    x = torch.arange(32, dtype=torch.int32).reshape(8, 4)
    y = torch.zeros(8, 4, dtype=torch.int32)
    _interp(main)(r, x, y)
    assert r.tolist() == [[0, 1] * 4, [0, 1, 2, 3] * 2]
    assert torch.equal(y, x[[0, 1, 2, 3] * 2])


def test_rank_is_0_without_clusters() -> None:
    r = torch.full((4, 6), -1, dtype=torch.int32)
    _interp(K.ranks.get_ir(6, 4, None))(r)
    assert torch.equal(r, torch.zeros(4, 6, dtype=torch.int32))


@pytest.mark.parametrize("cx", [2, 4])
def test_blocks_of_a_cluster_meet_at_cluster_sync(cx: int) -> None:
    x = torch.randn(16, 64, generator=torch.Generator().manual_seed(cx))
    y, z = torch.full_like(x, -1), torch.full_like(x, -1)
    _interp(K.neighbours.get_ir(16, cx, 5))(x, y, z, 0)
    peer = [b - b % cx + (b % cx + 1) % cx for b in range(16)]
    torch.testing.assert_close(y, x * 2)
    torch.testing.assert_close(z, (x * 2)[peer])


def test_split_arrive_and_wait_in_a_2d_cluster() -> None:
    n = 8
    v, s, other = (torch.zeros(n, n, dtype=torch.int32) for _ in range(3))
    _interp(K.split_phases.get_ir(n, 2, 2))(v, s, other)
    ids = torch.arange(n * n, dtype=torch.int32).reshape(n, n)
    expected = ids.reshape(n // 2, 2, n // 2, 2).sum(dim=(1, 3), dtype=torch.int32)
    assert torch.equal(v, ids)
    assert torch.equal(s, expected.repeat_interleave(2, 0).repeat_interleave(2, 1))
    assert torch.equal(other, torch.arange(n)[None, :] - torch.arange(n)[:, None])


@pytest.mark.parametrize("cluster", [None, 1, (1, 1, 1)])
def test_without_clusters_cluster_sync_is_a_block_barrier(cluster: object) -> None:
    y = torch.zeros(4, 128, dtype=torch.int32)
    r = torch.full((4,), -1, dtype=torch.int32)
    _interp(K.block_barrier.get_ir(4, cluster))(y, r)
    tx = torch.arange(128, dtype=torch.int32)
    assert torch.equal(y, ((tx + 1) % 128 * 3)[None, :] + torch.arange(4, dtype=torch.int32)[:, None])
    assert torch.equal(r, torch.zeros(4, dtype=torch.int32))


def test_reading_another_cluster_is_a_race() -> None:
    @T.prim_func
    def main(A: T.Tensor((8,), T.int32), B: T.Tensor((8,), T.int32)):
        with T.Kernel(8, threads=32, cluster_dims=2) as bx:
            A[bx] = bx  # E:other-store
            T.cluster_sync()
            B[bx] = A[bx ^ 2]

    err = raises(RaceError, "other-store", lambda: _interp(main)(torch.zeros(8, dtype=torch.int32),
                                                                     torch.zeros(8, dtype=torch.int32)),
                 "data race between clusters")
    assert "cluster (1)" in str(err) and "cluster (0)" in str(err)


def test_unpaired_arrive_and_wait_are_errors() -> None:
    @T.prim_func
    def wait_first(A: T.Tensor((4,), T.int32)):
        with T.Kernel(4, threads=32, cluster_dims=2) as bx:
            T.cluster_wait()  # E:wait-first
            A[bx] = 1

    @T.prim_func
    def arrive_twice(A: T.Tensor((4,), T.int32)):
        with T.Kernel(4, threads=32, cluster_dims=2) as bx:
            T.cluster_arrive()
            T.cluster_arrive_relaxed()  # E:arrive-twice
            A[bx] = 1

    a = torch.zeros(4, dtype=torch.int32)
    raises(TileLangError, "wait-first", lambda: _interp(wait_first)(a), "without arriving first")
    raises(TileLangError, "arrive-twice", lambda: _interp(arrive_twice)(a), "again before waiting")


def test_a_block_that_ends_no_longer_holds_the_cluster_back() -> None:
    @T.prim_func
    def main(A: T.Tensor((4,), T.int32)):
        with T.Kernel(4, threads=32, cluster_dims=2) as bx:
            if bx % 2 == 0:
                T.cluster_sync()
            A[bx] = bx + 1

    a = torch.zeros(4, dtype=torch.int32)
    _interp(main)(a)
    assert a.tolist() == [1, 2, 3, 4]


def test_grid_not_a_multiple_of_the_cluster_is_an_error() -> None:
    @T.prim_func
    def main(A: T.Tensor((6,), T.int32)):
        with T.Kernel(6, threads=32, cluster_dims=4) as bx:  # E:grid
            T.cluster_sync()
            A[bx] = 1

    raises(TileLangError, "grid", lambda: _interp(main)(torch.zeros(6, dtype=torch.int32)),
           "cannot be launched in clusters of (4, 1, 1)")


def test_divergent_cluster_barrier_is_an_error() -> None:
    @T.prim_func
    def main(A: T.Tensor((4,), T.int32)):
        with T.Kernel(4, threads=64, cluster_dims=2) as bx:
            tx = T.get_thread_binding()
            if tx < 32:
                T.cluster_sync()  # E:divergent
            A[bx] = 1

    raises(VerificationError, "divergent", lambda: _interp(main)(torch.zeros(4, dtype=torch.int32)),
           "T.cluster_sync() under a condition that differs between the threads")


def test_cluster_barrier_with_grid_sync_is_not_run_by_the_interpreter() -> None:
    @T.prim_func
    def main(A: T.Tensor((4,), T.int32)):
        with T.Kernel(4, threads=32, cluster_dims=2) as bx:  # E:with-grid
            T.cluster_sync()
            T.sync_grid()
            A[bx] = 1

    raises(BackendNotImplementedError, "with-grid", lambda: _interp(main)(torch.zeros(4, dtype=torch.int32)),
           "both T.sync_grid() and cluster barriers")


def test_cluster_barrier_in_a_kernel_with_named_barriers() -> None:
    @T.prim_func
    def main(A: T.Tensor((4, 64), T.int32), B: T.Tensor((4, 64), T.int32)):
        with T.Kernel(4, threads=64, cluster_dims=2) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((64,), T.int32)
            S[tx] = tx + bx * 100
            T.sync_threads(1, 64)
            A[bx, tx] = S[63 - tx]
            T.cluster_sync()
            B[bx, tx] = A[bx ^ 1, tx] + 1

    a, b = torch.zeros(4, 64, dtype=torch.int32), torch.zeros(4, 64, dtype=torch.int32)
    _interp(main)(a, b)
    rows = torch.tensor([1, 0, 3, 2], dtype=torch.int32)[:, None] * 100
    assert torch.equal(b, 64 - torch.arange(64, dtype=torch.int32)[None, :] + rows)


def test_cluster_barrier_in_a_kernel_with_regions_is_an_error() -> None:
    @T.prim_func
    def main(A: T.Tensor((2,), T.int32)):
        with T.Kernel(2, threads=256, cluster_dims=2) as bx:
            with T.ws(0):
                A[bx] = 1
            T.cluster_sync()  # E:regions

    raises(VerificationError, "regions", lambda: _interp(main), "T.cluster_sync() in a kernel with T.ws regions")


def test_a_block_vote_steers_a_tile_op() -> None:
    @T.prim_func
    def main(X: T.Tensor((4, 64), T.float32), Y: T.Tensor((4, 64), T.float32)):
        with T.Kernel(4, threads=64) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((64,), T.float32)
            T.copy(X[bx, :], S)
            if T.syncthreads_or(X[bx, tx] > 2):
                T.copy(S, Y[bx, :])

    x = torch.zeros(4, 64)
    x[1, 5] = x[3, 60] = 3
    y = torch.zeros(4, 64)
    _interp(main)(x, y)
    torch.testing.assert_close(y, x * torch.tensor([0.0, 1, 0, 1])[:, None])
    src, ctx = cuda_source(main, "sm_80")
    assert "if (__syncthreads_or(" in _body(src)
    assert_compiles(src, "sm_80", ctx)


def test_outside_a_kernel_is_an_error() -> None:
    with pytest.raises(TileLangError, match="T.cluster_sync"):
        T.cluster_sync()
    with pytest.raises(TileLangError, match="T.block_rank_in_cluster"):
        T.block_rank_in_cluster()


# ---- the interpreter: the block's votes ---------------------------------------------------------

@pytest.mark.parametrize("threads", [32, 40, 96, 128, 256])
@pytest.mark.parametrize("pattern", ["random", "all", "none", "one"])
def test_votes_of_the_block(threads: int, pattern: str) -> None:
    blocks = 3
    gen = torch.Generator().manual_seed(threads)
    x = {"random": torch.randint(0, 3, (blocks, threads), generator=gen),
         "all": torch.full((blocks, threads), 5), "none": torch.zeros(blocks, threads),
         "one": torch.zeros(blocks, threads).index_fill_(1, torch.tensor([threads - 1]), -1)}[pattern]
    x = x.to(torch.int32)
    c = torch.full((blocks, 3), -1, dtype=torch.int32)
    _interp(K.votes.get_ir(threads, blocks))(x, c)
    nz = x != 0
    expected = torch.stack([nz.sum(1), nz.all(1), nz.any(1)], dim=1).to(torch.int32)
    assert torch.equal(c, expected)


def test_votes_of_a_2d_block() -> None:
    x = torch.randn(3, 32, generator=torch.Generator().manual_seed(1))
    c = torch.zeros(3, dtype=torch.int32)
    _interp(K.votes_2d.get_ir(32, 3))(x, c)
    assert c.tolist() == [int((x > 0).sum()), 0, 1]


def test_while_some_thread_of_the_block_still_counts() -> None:
    limit = torch.randint(0, 50, (128,), generator=torch.Generator().manual_seed(3), dtype=torch.int32)
    out, rounds = torch.zeros(128, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    _interp(K.vote_loop.get_ir(128))(limit, out, rounds)
    assert torch.equal(out, limit) and int(rounds) == int(limit.max())


def test_a_uniform_predicate_counts_the_block() -> None:
    @T.prim_func
    def main(C: T.Tensor((2,), T.int32), flag: T.int32):
        with T.Kernel(1, threads=48):
            n = T.syncthreads_count(flag)
            if T.syncthreads_and(flag):
                C[0] = n
            else:
                C[1] = n

    c = torch.zeros(2, dtype=torch.int32)
    kernel = _interp(main)
    kernel(c, 1)
    kernel(c, 0)
    assert c.tolist() == [48, 0]


def test_vote_errors_name_the_line() -> None:
    @T.prim_func
    def divergent(A: T.Tensor((4,), T.int32)):
        with T.Kernel(4, threads=64) as bx:
            tx = T.get_thread_binding()
            if tx < 32:
                n = T.syncthreads_count(tx)  # E:vote-divergent
                A[bx] = n

    @T.prim_func
    def stored(A: T.Tensor((4,), T.int32)):
        with T.Kernel(4, threads=64) as bx:
            tx = T.get_thread_binding()
            A[bx] = T.syncthreads_or(tx == 3)  # E:vote-stored

    @T.prim_func
    def in_parallel(A: T.Tensor((64,), T.int32)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                A[i] = T.syncthreads_and(A[i])  # E:vote-parallel

    @T.prim_func
    def named(A: T.Tensor((64,), T.int32)):
        with T.Kernel(1, threads=64):  # E:vote-named
            tx = T.get_thread_binding()
            n = T.syncthreads_count(tx)
            T.sync_threads(1, 64)
            A[tx] = n

    a = torch.zeros(64, dtype=torch.int32)
    raises(VerificationError, "vote-divergent", lambda: _interp(divergent)(a), "T.syncthreads_count under a condition")
    raises(VerificationError, "vote-stored", lambda: _interp(stored)(a), "assign it to a variable first")
    raises(VerificationError, "vote-parallel", lambda: _interp(in_parallel)(a), "inside a T.Parallel loop")
    raises(BackendNotImplementedError, "vote-named", lambda: _interp(named)(a), "with named barriers")


# ---- CUDA ---------------------------------------------------------------------------------------

def _body(source: str) -> str:
    return source[source.index('extern "C"'):]


def test_cuda_cluster_barriers_on_sm90a() -> None:
    src, ctx = cuda_source(K.split_phases.get_ir(8, 2, 2), "sm_90a")
    body = _body(src)
    assert "__cluster_dims__(2, 2, 1)" in body and ctx.data["cuda.meta"].cluster == (2, 2, 1)
    assert re.findall(r"tlx_cluster_\w+\(\);", body) == ["tlx_cluster_arrive();", "tlx_cluster_wait();",
                                                          "tlx_cluster_arrive_relaxed();", "tlx_cluster_wait();"]
    assert src.count("#define TLX_CLUSTER_LAUNCH") == 1 and "barrier.cluster.wait.aligned" in src
    assert_compiles(src, "sm_90a", ctx)
    src, ctx = cuda_source(K.neighbours.get_ir(16, 2, 5), "sm_90a")
    assert "tlx_cluster_barrier();" in _body(src) and "tlx_cluster_rank()" in _body(src)
    assert_compiles(src, "sm_90a", ctx)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_without_clusters_the_barrier_is_the_blocks(arch: str) -> None:
    src, ctx = cuda_source(K.block_barrier.get_ir(4, None), arch)
    assert "tlx_cluster_barrier();" in _body(src) and "#define TLX_CLUSTER_LAUNCH" not in src
    assert "TLX_DEV void tlx_cluster_wait() { __syncthreads(); }" in src and "__cluster_dims__(" not in _body(src)
    assert_compiles(src, arch, ctx)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cuda_clusters_of_several_blocks_without_cluster_hardware_are_an_error(arch: str) -> None:
    @T.prim_func
    def barrier(A: T.Tensor((4,), T.int32)):
        with T.Kernel(4, threads=32, cluster_dims=2) as bx:
            A[bx] = 1
            T.cluster_sync()  # E:cuda-barrier
            A[bx ^ 1] = 2

    @T.prim_func
    def rank(A: T.Tensor((4,), T.int32)):
        with T.Kernel(4, threads=32, cluster_dims=(2, 1, 1)) as bx:
            A[bx] = T.block_rank_in_cluster()  # E:cuda-rank

    raises(BackendNotImplementedError, "cuda-barrier", lambda: cuda_source(barrier, arch),
           f"T.cluster_sync() in a kernel of T.Kernel(cluster_dims=(2, 1, 1)): {arch} has no thread-block clusters")
    raises(BackendNotImplementedError, "cuda-rank", lambda: cuda_source(rank, arch), "T.block_rank_in_cluster()")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_votes(arch: str) -> None:
    src, ctx = cuda_source(K.votes.get_ir(96, 3), arch)
    body = _body(src)
    for op in ("count", "and", "or"):
        assert re.search(rf"int \w+ = __syncthreads_{op}\(", body), op
    assert_compiles(src, arch, ctx)
    src, ctx = cuda_source(K.vote_loop.get_ir(128), arch)
    assert "while (__syncthreads_or(" in _body(src)
    assert_compiles(src, arch, ctx)


def _gemm_with_cluster_sync(swizzle: bool) -> object:
    m = n = 1024
    k, bm, bn, bk = 512, 128, 256, 64

    @T.prim_func
    def main(A: T.Tensor((m, k), T.float16), B: T.Tensor((k, n), T.float16), C: T.Tensor((m, n), T.float16)):
        with T.Kernel(n // bn, m // bm, threads=256, cluster_dims=(2, 1, 1)) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            C_f = T.alloc_fragment((bm, bn), T.float32)
            if swizzle:
                T.use_swizzle(4)
            T.clear(C_f)
            for kk in T.Pipelined(k // bk, num_stages=3):
                T.copy(A[by * bm, kk * bk], A_s)
                T.copy(B[kk * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f)
            T.cluster_sync()
            T.copy(C_f, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("swizzle", [False, True])
def test_cuda_a_kernel_with_cluster_barriers_keeps_its_blocks_and_drops_multicast(swizzle: bool) -> None:
    src, ctx = cuda_source(_gemm_with_cluster_sync(swizzle), "sm_90a")
    body = _body(src)
    assert "__cluster_dims__(2, 1, 1)" in body and "tlx_cluster_barrier();" in body
    assert "tlx_tma_load_mc" not in body and "tlx_cluster_sync" not in body  # not warp-specialized
    assert "tlx_bid" not in body and "const int bx = blockIdx.x;" in body  # the hardware's block order
    assert_compiles(src, "sm_90a", ctx)


def test_every_cluster_shape_of_8_blocks_ranks_in_x_order() -> None:
    for cluster in itertools.product([1, 2, 4, 8], [1, 2, 4], [1]):
        if cluster[0] * cluster[1] > 8:
            continue
        r = torch.zeros(4, 8, dtype=torch.int32)
        _interp(K.ranks.get_ir(8, 4, cluster))(r)
        assert torch.equal(r, _expected_ranks(8, 4, cluster)), cluster
