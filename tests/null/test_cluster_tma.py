"""The cluster queries (``T.get_cluster_dims`` & co., ``T.ClusterKernel``), multicast TMA loads
(``T.tma_copy(..., cluster_mask=...)``) and arrivals at a peer's mbarrier
(``T.alloc_cluster_barrier``, ``T.barrier_arrive(bar, cta_id)``) without a GPU: the interpreter
(a cluster's blocks side by side, the leader's load landing in its peers) against torch and
expected values, its deadlocks and unsynchronized peers, the CUDA source for sm_90a (compiled
where a compiler is installed), and the errors at the user's line."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import cluster_tma as kernels
from tests.null.cuda_helpers import assert_compiles, cuda_source
from tests.null.located import located_errors
from tilelang_x.core_ir.errors import BackendNotImplementedError, DeadlockError, TileLangError, TileLangSyntaxError

where, raises = located_errors(__file__)


def _interp(func: object) -> object:
    return tilelang.compile(func, target="interp")


def expected_queries(gx: int, gy: int, cluster: tuple[int, int, int]) -> torch.Tensor:
    """What ``kernels.queries`` writes, from the definitions (x fastest ranks, ceil-divided extents)."""
    cx, cy, cz = cluster
    ex, ey = -(-gx // cx), -(-gy // cy)
    q = torch.zeros(gy, gx, 8, dtype=torch.int32)
    for by in range(gy):
        for bx in range(gx):
            q[by, bx] = torch.tensor([cx * 100 + cy * 10 + cz, ex * 100 + ey * 10 + 1, cx * cy * cz * 10 + ey,
                                      bx // cx, by // cy, by // cy, 0, bx % cx + cx * (by % cy)])
    return q


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(torch.float16)


# ---- the cluster queries ------------------------------------------------------------------------

@pytest.mark.parametrize("cluster", [(2, 2, 1), (1, 2, 1), (2, 1, 1), (1, 1, 1), (4, 1, 1)])
def test_cluster_queries_in_the_interpreter(cluster: tuple[int, int, int]) -> None:
    q = torch.full((4, 8, 8), -1, dtype=torch.int32)
    _interp(kernels.queries.get_ir(8, 4, cluster))(q)
    assert torch.equal(q, expected_queries(8, 4, cluster))


def test_cluster_queries_without_clusters_and_over_a_dynamic_grid() -> None:
    @T.prim_func
    def main(Q: T.Tensor((3, 64), T.int32), n: T.int32):
        with T.Kernel(n, threads=32) as bx:
            Q[0, bx] = T.get_cluster_size() * 1000 + T.get_cluster_extent(0)
            Q[1, bx] = T.get_cluster_id(0)
            Q[2, bx] = T.get_cluster_extents()[1] * 10 + T.get_cluster_dims()[0]

    q = torch.full((3, 64), -1, dtype=torch.int32)
    _interp(main)(q, 40)
    assert torch.equal(q[0, :40], torch.full((40,), 1040, dtype=torch.int32))
    assert torch.equal(q[1, :40], torch.arange(40, dtype=torch.int32))
    assert torch.equal(q[2, :40], torch.full((40,), 11, dtype=torch.int32))

    @T.prim_func
    def clustered(Q: T.Tensor((64,), T.int32), n: T.int32):
        with T.Kernel(n, threads=32, cluster_dims=4) as bx:
            Q[bx] = T.get_cluster_extent(0) * 100 + T.get_cluster_id(0)

    q = torch.full((64,), -1, dtype=torch.int32)
    _interp(clustered)(q, 32)
    assert torch.equal(q[:32], 800 + torch.arange(32, dtype=torch.int32) // 4)


def _bad_dim() -> object:
    @T.prim_func
    def main(Q: T.Tensor((4,), T.int32)):
        with T.Kernel(4, threads=32, cluster_dims=2) as bx:
            Q[bx] = T.get_cluster_id(3)  # E:bad-dim

    return main


def test_a_cluster_query_of_a_bad_dim_names_the_line() -> None:
    raises(TileLangSyntaxError, "bad-dim", _bad_dim, "T.get_cluster_id(dim=3)", "three dims")


def test_cuda_cluster_queries_are_block_index_arithmetic() -> None:
    src, ctx = cuda_source(kernels.queries.get_ir(8, 4, (2, 2, 1)), "sm_90a")
    body = src[src.index('extern "C"'):]
    assert "__cluster_dims__(2, 2, 1)" in body and "= bx >> 1;" in body and "= by >> 1;" in body
    assert "= 221;" in body and "= 421;" in body and "= 42;" in body  # dims, extents, size: constants
    assert_compiles(src, "sm_90a", ctx)


# ---- multicast TMA loads in the interpreter -----------------------------------------------------

@pytest.mark.parametrize(("M", "N", "K", "options"), [
    (256, 256, 192, {}),
    (200, 256, 160, {"block_K": 32}),  # a partial row of tiles
    (128, 512, 128, {"cluster": 4}),
])
def test_gemm_sharing_its_a_tile_in_the_cluster_matches_torch(M: int, N: int, K: int, options: dict) -> None:
    a, b = _randn(M, K, seed=1), _randn(K, N, seed=2)
    c = _interp(kernels.gemm_multicast_a.get_ir(M, N, K, **options))(a, b)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)


def expected_shared_tiles(x: torch.Tensor, n: int, cx: int, mask: int, block_M: int = 64) -> torch.Tensor:
    leader = (mask & -mask).bit_length() - 1
    tiles = [b - b % cx + leader if mask >> (b % cx) & 1 else b for b in range(n)]
    return torch.cat([x[t * block_M:(t + 1) * block_M] * 2 for t in tiles])


@pytest.mark.parametrize(("cx", "mask"), [(2, 0b11), (4, 0b0110), (4, 0b1000), (8, 0b10110101), (1, 0b1)])
def test_blocks_of_the_mask_share_the_leaders_tile_and_the_others_load_their_own(cx: int, mask: int) -> None:
    x = torch.randn(8 * 64, 64, generator=torch.Generator().manual_seed(cx))
    y = _interp(kernels.shared_tiles.get_ir(8, cx, mask))(x)
    assert torch.equal(y, expected_shared_tiles(x, 8, cx, mask))


def test_a_block_of_the_mask_receives_the_leaders_tile_whatever_tile_it_names() -> None:
    x = torch.randn(8 * 64, 64)
    y = _interp(kernels.shared_tiles.get_ir(8, 4, 0b0110, own=True))(x)
    assert torch.equal(y, expected_shared_tiles(x, 8, 4, 0b0110))
    y = _interp(kernels.shared_tiles.get_ir(8, 4, 0b0100, own=True))(x)  # a mask of one block: its own load
    assert torch.equal(y, x * 2)


def test_a_load_into_a_peer_that_has_not_initialized_its_barrier_is_an_error() -> None:
    with pytest.raises(TileLangError) as info:
        _interp(kernels.shared_tiles.get_ir(8, 4, 0b0110, sync_init=False))(torch.randn(8 * 64, 64))
    text = str(info.value)
    assert "cluster_tma.py:" in text
    assert "T.tma_copy(cluster_mask=0b110): block (2,) (rank 2) has not initialized" in text
    assert "T.cluster_sync() after allocating the barriers" in text


# ---- arrivals at a peer's barrier ---------------------------------------------------------------

@pytest.mark.parametrize(("M", "N", "K", "options"), [
    (256, 256, 320, {}),
    (256, 256, 320, {"stages": 3}),
    (128, 512, 256, {"cluster": 4, "block_K": 32}),
])
def test_multicast_ring_released_on_the_leaders_cluster_barrier_matches_torch(M: int, N: int, K: int,
                                                                                options: dict) -> None:
    a, b = _randn(M, K, seed=3), _randn(K, N, seed=4)
    c = _interp(kernels.gemm_multicast_ring.get_ir(M, N, K, **options))(a, b)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)


@pytest.mark.parametrize("cx", [2, 4, 8])
def test_blocks_hand_off_through_their_peers_barriers(cx: int) -> None:
    x, y = torch.randn(8, 128), torch.zeros(8, 128)
    r = torch.full((8,), -1, dtype=torch.int32)
    _interp(kernels.handoff.get_ir(8, cx))(x, y, r)
    assert torch.equal(y, x * 2) and torch.equal(r, (torch.arange(8, dtype=torch.int32) + cx - 1) % cx)


def test_a_wait_no_peer_arrives_at_is_a_deadlock_of_the_cluster() -> None:
    with pytest.raises(DeadlockError) as info:
        _interp(kernels.handoff.get_ir(8, 2, arrive=False))(torch.zeros(8, 128), torch.zeros(8, 128),
                                                             torch.zeros(8, dtype=torch.int32))
    text = str(info.value)
    assert "deadlock in a cluster" in text and "block (0,): warpgroup 0 at T.barrier_wait(bar[0], 0)" in text
    assert "block (1,): warpgroup 0 at T.barrier_wait(bar[0], 0)" in text and "cluster_tma.py:" in text


def test_an_arrival_at_a_peer_that_has_not_initialized_its_barrier_is_an_error() -> None:
    with pytest.raises(TileLangError) as info:
        _interp(kernels.handoff.get_ir(8, 2, sync_init=False))(torch.zeros(8, 128), torch.zeros(8, 128),
                                                               torch.zeros(8, dtype=torch.int32))
    assert "T.barrier_arrive(`bar`, cta_id=1): block (1,) (rank 1) has not initialized `bar` yet" in str(info.value)


# ---- CUDA ---------------------------------------------------------------------------------------

def _body(source: str) -> str:
    return source[source.index('extern "C"'):]


def test_cuda_multicast_gemm_on_sm90a() -> None:
    src, ctx = cuda_source(kernels.gemm_multicast_a.get_ir(256, 256, 192), "sm_90a")
    body = _body(src)
    assert "__cluster_dims__(2, 1, 1)" in body and ctx.data["cuda.meta"].cluster == (2, 1, 1)
    assert body.count("tlx_tma_load_mc_2d(") == 1 and "if (tlx_cluster_rank() == 0u)" in body
    assert "multicast::cluster" in src and "#define TLX_CLUSTER_LAUNCH" in src
    assert body.count("tlx_ws_expect_tx(") == 2  # every block expects its A tile's bytes itself
    assert_compiles(src, "sm_90a", ctx)


def test_cuda_multicast_leader_and_blocks_outside_the_mask() -> None:
    src, ctx = cuda_source(kernels.shared_tiles.get_ir(8, 4, 0b0110), "sm_90a")
    body = _body(src)
    assert "if (tlx_cluster_rank() == 1u)" in body and "tlx_tma_load_mc_2d(" in body
    assert "((6u >> tlx_cluster_rank()) & 1u) == 0u" in body and "tlx_tma_load_2d(" in body
    assert_compiles(src, "sm_90a", ctx)
    src, _ = cuda_source(kernels.shared_tiles.get_ir(8, 4, 0b0100), "sm_90a")  # one block: every block's own load
    assert "tlx_tma_load_mc" not in _body(src) and "tlx_tma_load_2d(" in _body(src)


def test_cuda_multicast_ring_and_handoff_arrive_at_peers_barriers() -> None:
    src, ctx = cuda_source(kernels.gemm_multicast_ring.get_ir(256, 256, 320), "sm_90a")
    body = _body(src)
    assert "tlx_cluster_arrive_remote(empty_s + " in body and ", 0u);" in body
    assert "mapa.shared::cluster.u32" in src and "mbarrier.arrive.release.cluster.shared::cluster.b64" in src
    assert "if (tlx_cluster_rank() == 0u) {" in body and "tlx_tma_load_mc_2d(" in body
    assert_compiles(src, "sm_90a", ctx)
    src, ctx = cuda_source(kernels.handoff.get_ir(8, 4), "sm_90a")
    assert "tlx_cluster_arrive_remote(bar_s + " in _body(src)
    assert_compiles(src, "sm_90a", ctx)
    src, ctx = cuda_source(kernels.handoff.get_ir(8, 1), "sm_80")  # a cluster of one: the caller's own barrier
    assert "tlx_cluster_arrive_remote(" in _body(src) and "#define TLX_CLUSTER_LAUNCH" not in src
    assert_compiles(src, "sm_80", ctx)


def test_cuda_multicast_without_tma_is_each_blocks_own_copy() -> None:
    src, _ = cuda_source(kernels.shared_tiles.get_ir(8, 2, 0b11), "sm_90a", {"tl.disable_tma_lower": True})
    assert "tlx_tma_load" not in _body(src)


# ---- errors at the user's line ------------------------------------------------------------------

def _mask_kernel(mask: object, cluster: object = 2, store: bool = False) -> object:
    @T.prim_func
    def main(X: T.Tensor((256, 64), T.float32), Y: T.Tensor((256, 64), T.float32)):
        with T.Kernel(4, threads=128, cluster_dims=cluster) as bx:
            S = T.alloc_shared((64, 64), T.float32)
            bar = T.alloc_barrier(1)
            if store:
                T.tma_copy(S, Y[bx * 64, 0], cluster_mask=mask)  # E:mask-store
            T.tma_copy(X[(bx // 2) * 64, 0], S, barrier=bar, cluster_mask=mask)  # E:mask
            T.mbarrier_wait_parity(bar, 0)

    return main


def test_bad_cluster_masks_name_the_line() -> None:
    raises(TileLangSyntaxError, "mask", lambda: _mask_kernel(0b100), "names rank 2, outside the cluster of 2 blocks",
           "use bits 0..1")
    raises(TileLangSyntaxError, "mask", lambda: _mask_kernel(0b111000, (4, 1, 1)), "names ranks 4, 5")
    raises(TileLangSyntaxError, "mask", lambda: _mask_kernel(0), "a positive Python int")
    raises(TileLangSyntaxError, "mask", lambda: _mask_kernel(True), "a positive Python int")
    raises(TileLangSyntaxError, "mask", lambda: _mask_kernel(0b11, None), "launched without clusters",
           "cluster_dims=(2, 1, 1)")
    raises(TileLangSyntaxError, "mask-store", lambda: _mask_kernel(0b11, store=True), "a TMA store is not multicast")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cuda_multicast_without_cluster_hardware_is_an_error(arch: str) -> None:
    raises(BackendNotImplementedError, "mask", lambda: cuda_source(_mask_kernel(0b11), arch),
           f"T.tma_copy(..., cluster_mask=0b11) in a kernel of T.Kernel(cluster_dims=(2, 1, 1)): {arch} has no "
           "thread-block clusters", "compile for sm_90a")


def _remote(cta: object, cluster: object = 2) -> object:
    @T.prim_func
    def main(Y: T.Tensor((4,), T.int32)):
        with T.Kernel(4, threads=128, cluster_dims=cluster) as bx:
            bar = T.alloc_cluster_barrier(128)
            T.cluster_sync()
            T.mbarrier_arrive(bar, cta)  # E:remote
            T.mbarrier_wait_parity(bar, 0)
            Y[bx] = 1

    return main


def test_bad_cta_ids_name_the_line() -> None:
    raises(TileLangSyntaxError, "remote", lambda: _remote(2), "T.barrier_arrive(..., cta_id=2): the cluster holds 2 "
           "blocks (ranks 0..1)")
    raises(TileLangSyntaxError, "remote", lambda: _remote(1, None), "the cluster holds 1 block (ranks 0..0)")
    raises(TileLangSyntaxError, "remote", lambda: _remote(-1), "cta_id=-1")
    _remote(1)  # a rank of the cluster


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cuda_arrivals_at_peers_without_cluster_hardware_are_an_error(arch: str) -> None:
    @T.prim_func
    def main(Y: T.Tensor((4,), T.int32)):
        with T.Kernel(4, threads=128, cluster_dims=2) as bx:
            bar = T.alloc_cluster_barrier(128)
            T.barrier_arrive(bar, 1)  # E:remote-cuda
            T.mbarrier_wait_parity(bar, 0)
            Y[bx] = 1

    raises(BackendNotImplementedError, "remote-cuda", lambda: cuda_source(main, arch),
           f"T.barrier_arrive(..., cta_id=...) in a kernel of T.Kernel(cluster_dims=(2, 1, 1)): {arch} has no "
           "thread-block clusters")


def test_copy_cluster_points_at_the_multicast_tma_copy() -> None:
    with pytest.raises(TileLangError) as info:
        T.copy_cluster  # noqa: B018
    assert "T.tma_copy(src, shared_tile, barrier=bar, cluster_mask=m)" in str(info.value)
