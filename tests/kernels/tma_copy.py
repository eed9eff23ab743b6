"""Hand-written asynchronous copies. TMA copies on user-managed mbarriers (TileLang's
``T.tma_copy``): a producer warpgroup loads the k-tiles of A and B into a ring of shared stages,
each stage's ``full`` barrier completing once the producer has arrived and the tiles' bytes have
landed; consumer warpgroups multiply and release the stage on its ``empty`` barrier. cp.async
copies with explicit groups (``T.async_copy``, ``T.ptx_wait_group``): a double-buffered GEMM."""

import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit(out_idx=[2])
def gemm_tma_ring(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=3, consumers=1, dtype=T.float16,
                  accum_dtype=T.float32):
    """Warpgroup ``consumers`` (the last) produces; warpgroups 0..consumers-1 consume, all of them
    on the whole C tile (``consumers`` > 1: a region of several warpgroups)."""
    threads = 128 * (consumers + 1)
    users = tuple(range(consumers))

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((num_stages, block_M, block_K), dtype)
            B_s = T.alloc_shared((num_stages, block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), accum_dtype)
            full = T.alloc_barrier([128] * num_stages)
            empty = T.alloc_barrier([128 * consumers] * num_stages)
            with T.ws(consumers):
                for k in T.serial(T.ceildiv(K, block_K)):
                    s = k % num_stages
                    T.mbarrier_wait_parity(empty[s], (k // num_stages + 1) % 2)
                    T.tma_copy(A[by * block_M, k * block_K], A_s[s, :, :], barrier=full[s])
                    T.tma_copy(B[k * block_K:(k + 1) * block_K, bx * block_N:(bx + 1) * block_N], B_s[s, :, :],
                               barrier=full[s])
                    T.barrier_arrive(full[s])
            with T.ws(*users):
                T.clear(C_l)
                for k in T.serial(T.ceildiv(K, block_K)):
                    s = k % num_stages
                    T.mbarrier_wait_parity(full[s], (k // num_stages) % 2)
                    T.gemm(A_s[s, :, :], B_s[s, :, :], C_l)
                    T.barrier_arrive(empty[s])
                T.copy(C_l, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[2])
def gemm_tma_pipelined(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=2, dtype=T.float16,
                       accum_dtype=T.float32):
    """TileLang's ``test_tilelang_language_tma_copy``: one warpgroup issues the copies, arrives
    and waits itself; the ``T.Pipelined`` loop of a kernel with barriers runs in order."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            mbar_A = T.alloc_barrier(128)
            mbar_B = T.alloc_barrier(128)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.tma_copy(A[by * block_M, k * block_K], A_shared, barrier=mbar_A)
                T.barrier_arrive(mbar_A)
                T.tma_copy(B[k * block_K, bx * block_N], B_shared, barrier=mbar_B)
                T.barrier_arrive(mbar_B)
                T.mbarrier_wait_parity(mbar_A, k % 2)
                T.mbarrier_wait_parity(mbar_B, k % 2)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[1])
def rows_arrive_expect_tx(M, N, block_M=64, extra_bytes=0, dtype=T.float32):
    """One barrier of count 1 per tile: the copy's ``emit_arrive`` is its only arrival (TileLang's
    ``annotations={"emit_arrive": 1}``); ``T.mbarrier_expect_tx`` of ``extra_bytes`` more than
    arrive makes the wait a deadlock. A ``T.fence_proxy_async`` orders the zero fill before the
    copy."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            S = T.alloc_shared((block_M, N), dtype)
            bar = T.alloc_barrier(1)
            T.fill(S, 0)
            T.fence_proxy_async()
            if extra_bytes:
                T.mbarrier_expect_tx(bar, extra_bytes)
            T.tma_copy(X[bx * block_M, 0], S, barrier=bar, annotations={"emit_arrive": 1})
            T.mbarrier_wait_parity(bar, 0)  # E:expect_wait
            for i, j in T.Parallel(block_M, N):
                Y[bx * block_M + i, j] = S[i, j] * 2.0

    return main


@tilelang.jit(out_idx=[2])
def gemm_async_copy(M, N, K, block_M=64, block_N=64, block_K=32, dtype=T.float16, accum_dtype=T.float32):
    """The next k-tile's copies are in flight while the current one is multiplied: each
    ``T.async_copy`` is a group of its own, ``T.ptx_wait_group(2)`` leaves the two just issued."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((2, block_M, block_K), dtype)
            B_s = T.alloc_shared((2, block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), accum_dtype)
            n = T.ceildiv(K, block_K)
            T.clear(C_l)
            T.async_copy(A[by * block_M, 0], A_s[0, :, :])
            T.async_copy(B[0, bx * block_N], B_s[0, :, :])
            for k in T.serial(n):
                if k + 1 < n:
                    T.async_copy(A[by * block_M, (k + 1) * block_K], A_s[(k + 1) % 2, :, :])
                    T.async_copy(B[(k + 1) * block_K, bx * block_N], B_s[(k + 1) % 2, :, :])
                    T.ptx_wait_group(2)
                else:
                    T.ptx_wait_group(0)
                T.gemm(A_s[k % 2, :, :], B_s[k % 2, :, :], C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[2])
def gemm_tma_store(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=2, dtype=T.float16,
                   accum_dtype=T.float32):
    """TileLang's ``matmul_tma_copy_store``: the compiler pipelines the loads, the kernel stores
    its C tile from shared memory with a TMA store and waits for it."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_shared = T.alloc_shared((block_M, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C_shared)
            T.tma_copy(C_shared, C[by * block_M, bx * block_N])
            T.tma_store_wait()

    return main
