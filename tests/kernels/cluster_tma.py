"""Kernels launched in thread-block clusters that use the cluster queries (``T.get_cluster_dims``,
``T.get_cluster_size``, ``T.get_cluster_id(s)``, ``T.get_cluster_extent(s)``, ``T.ClusterKernel``),
multicast TMA loads (``T.tma_copy(..., cluster_mask=...)``: the blocks of a mask share a tile that
the lowest rank of the mask loads into all of them) and mbarriers their peers arrive on
(``T.alloc_cluster_barrier``, ``T.barrier_arrive(bar, cta_id)``)."""

import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit
def queries(gx: int = 6, gy: int = 4, cluster=(2, 2, 1)):
    """``Q[by, bx, :]`` = the cluster queries of block ``(bx, by)``: dims and extents as 3-digit
    numbers, the size, the cluster ids along x, y (both ways) and z, and the rank."""

    @T.prim_func
    def main(Q: T.Tensor((gy, gx, 8), T.int32)):
        with T.ClusterKernel(gx, gy, cluster_dims=cluster, threads=32) as (bx, by):
            d = T.get_cluster_dims()
            e = T.get_cluster_extents()
            Q[by, bx, 0] = d[0] * 100 + d[1] * 10 + d[2]
            Q[by, bx, 1] = e[0] * 100 + e[1] * 10 + e[2]
            Q[by, bx, 2] = T.get_cluster_size() * 10 + T.get_cluster_extent(1)
            Q[by, bx, 3] = T.get_cluster_id(0)
            Q[by, bx, 4] = T.get_cluster_ids()[1]
            Q[by, bx, 5] = T.get_cluster_id(1)
            Q[by, bx, 6] = T.get_cluster_id(2)
            Q[by, bx, 7] = T.block_rank_in_cluster()

    return main


@tilelang.jit(out_idx=[2])
def gemm_multicast_a(M, N, K, block_M=128, block_N=64, block_K=64, cluster=2, dtype=T.float16,
                     accum_dtype=T.float32):
    """A GEMM in clusters of ``cluster`` blocks along N: the blocks of a cluster share the A tile of
    their row of C, which the block of rank 0 loads into all of them (``cluster_mask`` of every
    rank), while each loads its own B tile; each waits on its own barrier. ``T.cluster_sync()``
    after the barriers' init (a peer's load completes on them) and after each k-step's gemm (the
    next load overwrites the A tile of every block)."""
    mask = (1 << cluster) - 1

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128,
                      cluster_dims=(cluster, 1, 1)) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), accum_dtype)
            bar = T.alloc_barrier(128)
            T.clear(C_l)
            T.cluster_sync()
            for k in T.serial(T.ceildiv(K, block_K)):
                T.tma_copy(A[by * block_M, k * block_K], A_s, barrier=bar, cluster_mask=mask)
                T.tma_copy(B[k * block_K, bx * block_N], B_s, barrier=bar)
                T.barrier_arrive(bar)
                T.mbarrier_wait_parity(bar, k % 2)
                T.gemm(A_s, B_s, C_l)
                T.cluster_sync()
            T.copy(C_l, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[1])
def shared_tiles(n: int, cx: int, mask: int, block_M: int = 64, cols: int = 64, own: bool = False,
                 sync_init: bool = True):
    """Block ``bx`` of ``n`` (clusters of ``cx``) writes twice the tile of ``X`` it receives into
    ``Y``'s tile ``bx``. A block of ``mask`` names the tile of its cluster's lowest rank in the mask
    (``own``: its own tile, which it does not load: it receives the lowest rank's), a block outside
    the mask its own. ``sync_init=False`` drops the ``T.cluster_sync()`` between the barriers' init
    and the loads that complete on them."""
    leader = (mask & -mask).bit_length() - 1

    @T.prim_func
    def main(X: T.Tensor((n * block_M, cols), T.float32), Y: T.Tensor((n * block_M, cols), T.float32)):
        with T.Kernel(n, threads=128, cluster_dims=(cx, 1, 1)) as bx:
            S = T.alloc_shared((block_M, cols), T.float32)
            bar = T.alloc_barrier(1)
            tile = T.alloc_var(T.int32, bx)
            if not own and (mask >> T.block_rank_in_cluster()) & 1 == 1:
                tile = T.get_cluster_id() * cx + leader
            if sync_init:
                T.cluster_sync()
            T.tma_copy(X[tile * block_M, 0], S, barrier=bar, cluster_mask=mask, annotations={"emit_arrive": 1})
            T.mbarrier_wait_parity(bar, 0)
            for i, j in T.Parallel(block_M, cols):
                Y[bx * block_M + i, j] = S[i, j] * 2.0
            T.cluster_sync()

    return main


@tilelang.jit(out_idx=[2])
def gemm_multicast_ring(M, N, K, block_M=128, block_N=64, block_K=64, stages=2, cluster=2, dtype=T.float16,
                        accum_dtype=T.float32):
    """``gemm_multicast_a`` over a ring of ``stages`` shared stages, without a cluster barrier per
    k-step: each block's threads release a stage on rank 0's ``empty`` barrier of the stage
    (``T.alloc_cluster_barrier``, ``T.barrier_arrive(empty[s], 0)``), and rank 0, which multicasts
    the A tiles, waits until every block has released the stage before loading it again."""
    mask = (1 << cluster) - 1

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128,
                      cluster_dims=(cluster, 1, 1)) as (bx, by):
            A_s = T.alloc_shared((stages, block_M, block_K), dtype)
            B_s = T.alloc_shared((stages, block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), accum_dtype)
            full = T.alloc_barrier([128] * stages)
            empty = T.alloc_cluster_barrier([128 * cluster] * stages)
            T.clear(C_l)
            T.cluster_sync()
            for k in T.serial(T.ceildiv(K, block_K)):
                s = k % stages
                if T.block_rank_in_cluster() == 0:
                    T.mbarrier_wait_parity(empty[s], (k // stages + 1) % 2)
                T.tma_copy(A[by * block_M, k * block_K], A_s[s, :, :], barrier=full[s], cluster_mask=mask)
                T.tma_copy(B[k * block_K, bx * block_N], B_s[s, :, :], barrier=full[s])
                T.barrier_arrive(full[s])
                T.mbarrier_wait_parity(full[s], (k // stages) % 2)
                T.gemm(A_s[s, :, :], B_s[s, :, :], C_l)
                T.mbarrier_arrive(empty[s], 0)
            T.copy(C_l, C[by * block_M, bx * block_N])
            T.cluster_sync()

    return main


@tilelang.jit
def handoff(n: int = 8, cx: int = 2, sync_init: bool = True, arrive: bool = True):
    """Each block writes its row of ``Y`` (twice ``X``'s), arrives at the barrier of the next block
    of its cluster (rank + 1, cyclic; ``arrive=False``: not), waits on its own for the previous
    block's arrival, and stores the previous block's rank into ``R``. ``sync_init=False`` drops the
    ``T.cluster_sync()`` between the barriers' init and the peers' arrivals."""

    @T.prim_func
    def main(X: T.Tensor((n, 128), T.float32), Y: T.Tensor((n, 128), T.float32), R: T.Tensor((n,), T.int32)):
        with T.Kernel(n, threads=128, cluster_dims=(cx, 1, 1)) as bx:
            bar = T.alloc_cluster_barrier(128)
            rank = T.cast(T.block_rank_in_cluster(), T.int32)
            if sync_init:
                T.cluster_sync()
            for i in T.Parallel(128):
                Y[bx, i] = X[bx, i] * 2
            if arrive:
                T.barrier_arrive(bar, (rank + 1) % cx)
            T.mbarrier_wait_parity(bar, 0)
            R[bx] = (rank + cx - 1) % cx
            T.cluster_sync()

    return main
