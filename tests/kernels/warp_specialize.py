"""Manual warp specialization (``T.ws``) with explicit mbarriers, as TileLang's
``examples/warp_specialize`` write it: a producer warpgroup loads tiles into shared memory, a
consumer warpgroup computes on them, and barriers hand each tile over."""

import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit(out_idx=[2])
def gemm_producer_consumer(M, N, K, block_M=128, block_N=128, block_K=32, dtype=T.float16, accum_dtype=T.float32,
                           regions_in_loop=False):
    """Warpgroup 1 loads A and B tiles, warpgroup 0 multiplies them; one shared buffer each,
    ``data_ready`` / ``compute_done`` alternate phases every k step. Each region loops over k, or
    (``regions_in_loop``, TileLang's ``example_warp_specialize_gemm_softpipe_stage2``) the regions
    sit inside a ``T.Pipelined(num_stages=2)`` loop, which runs in order (the barriers are the
    pipeline)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), accum_dtype)
            data_ready = T.alloc_barrier(arrive_count=128)
            compute_done = T.alloc_barrier(arrive_count=128)
            if regions_in_loop:
                with T.ws(0):
                    T.clear(C_l)
                for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                    with T.ws(1):
                        T.barrier_wait(compute_done, (ko + 1) % 2)
                        T.copy(A[by * block_M, ko * block_K], A_s)
                        T.copy(B[ko * block_K, bx * block_N], B_s)
                        T.barrier_arrive(data_ready)
                    with T.ws(0):
                        T.barrier_wait(data_ready, ko % 2)
                        T.gemm(A_s, B_s, C_l)
                        T.barrier_arrive(compute_done)
                with T.ws(0):
                    T.copy(C_l, C[by * block_M, bx * block_N])
            else:
                with T.ws(1):
                    for k in range(T.ceildiv(K, block_K)):
                        T.barrier_wait(compute_done, (k + 1) % 2)
                        T.copy(A[by * block_M, k * block_K], A_s)
                        T.copy(B[k * block_K, bx * block_N], B_s)
                        T.barrier_arrive(data_ready)
                with T.ws(0):
                    T.clear(C_l)
                    for k in range(T.ceildiv(K, block_K)):
                        T.barrier_wait(data_ready, k % 2)
                        T.gemm(A_s, B_s, C_l)
                        T.barrier_arrive(compute_done)
                    T.copy(C_l, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[2])
def gemm_two_stage(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=2, dtype=T.float16,
                   accum_dtype=T.float32):
    """The producer runs up to ``num_stages`` tiles ahead: stage ``s = k % num_stages`` has its own
    buffers and its own ``full[s]`` / ``empty[s]`` barriers, whose phase flips every
    ``num_stages`` steps."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_s = T.alloc_shared((num_stages, block_M, block_K), dtype)
            B_s = T.alloc_shared((num_stages, block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), accum_dtype)
            full = T.alloc_barrier([128] * num_stages)
            empty = T.alloc_barrier([128] * num_stages)
            with T.ws(0):
                T.clear(C_l)
                for k in range(T.ceildiv(K, block_K)):
                    T.barrier_wait(full[k % num_stages], (k // num_stages) % 2)
                    T.gemm(A_s[k % num_stages, :, :], B_s[k % num_stages, :, :], C_l)
                    T.barrier_arrive(empty[k % num_stages])
                T.copy(C_l, C[by * block_M, bx * block_N])
            with T.ws(1):
                for k in range(T.ceildiv(K, block_K)):
                    T.barrier_wait(empty[k % num_stages], (k // num_stages + 1) % 2)
                    T.copy(A[by * block_M, k * block_K], A_s[k % num_stages, :, :])
                    T.copy(B[k * block_K, bx * block_N], B_s[k % num_stages, :, :])
                    T.barrier_arrive(full[k % num_stages])

    return main


@tilelang.jit(out_idx=[2])
def gemm_regions_in_loop(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=2, dtype=T.float16,
                         accum_dtype=T.float32):
    """TileLang's ``example_warp_specialize_gemm_barrierpipe_stage2`` spelling: one list of
    mbarriers named by index, and the regions inside the k loop that every warpgroup runs."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_s = T.alloc_shared((num_stages, block_M, block_K), dtype)
            B_s = T.alloc_shared((num_stages, block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.create_list_of_mbarrier([128, 128] * num_stages)
            with T.ws(0):
                T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=0):
                with T.ws(1):
                    T.mbarrier_wait_parity(mbarrier=ko % num_stages + num_stages,
                                           parity=((ko // num_stages) % num_stages) ^ 1)
                    T.copy(A[by * block_M, ko * block_K], A_s[ko % num_stages, :, :])
                    T.copy(B[ko * block_K, bx * block_N], B_s[ko % num_stages, :, :])
                    T.mbarrier_arrive(mbarrier=T.get_mbarrier(ko % num_stages))
                with T.ws(0):
                    T.mbarrier_wait_parity(mbarrier=ko % num_stages, parity=(ko // num_stages) % num_stages)
                    T.gemm(A_s[ko % num_stages, :, :], B_s[ko % num_stages, :, :], C_l)
                    T.mbarrier_arrive(ko % num_stages + num_stages)
            with T.ws(0):
                T.copy(C_l, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[1])
def scale_rows_producer_consumer(M, N, block_M=32, producers=1, dtype=T.float32):
    """Elementwise and reduction work behind a producer: the first ``producers`` warpgroups (one
    region: ``T.ws(0, 1)`` for two, 256 threads arriving per phase) copy row tiles of X into one
    of two shared buffers; the next warpgroup writes ``2 * x + 1`` and, per row, the row sum of x
    into the last column."""
    first = tuple(range(producers))

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N + 1), dtype)):
        with T.Kernel(1, threads=128 * (producers + 1)) as _:
            X_s = T.alloc_shared((2, block_M, N), dtype)
            Y_l = T.alloc_fragment((block_M, N), dtype)
            sums = T.alloc_fragment((block_M,), dtype)
            loaded = T.alloc_barrier([128 * producers] * 2)
            free = T.alloc_barrier([128, 128])
            with T.ws(*first):
                for t in T.serial(M // block_M):
                    T.barrier_wait(free[t % 2], (t // 2 + 1) % 2)
                    T.copy(X[t * block_M, 0], X_s[t % 2, :, :])
                    T.barrier_arrive(loaded[t % 2])
            with T.ws(producers):
                for t in T.serial(M // block_M):
                    T.barrier_wait(loaded[t % 2], (t // 2) % 2)
                    for i, j in T.Parallel(block_M, N):
                        Y_l[i, j] = X_s[t % 2, i, j]
                    T.barrier_arrive(free[t % 2])
                    T.reduce_sum(Y_l, sums, dim=1)
                    for i, j in T.Parallel(block_M, N):
                        Y_l[i, j] = Y_l[i, j] * 2.0 + 1.0
                    T.copy(Y_l, Y[t * block_M, 0])
                    for i in T.Parallel(block_M):
                        Y[t * block_M + i, N] = sums[i]

    return main


@tilelang.jit(out_idx=[1, 2])
def column_sums_beside_regions(M, N, dtype=T.float32):
    """Statements outside the regions are the whole block's: the column sums of X (a reduction
    across warps) before warpgroup 1 hands row 0 of X to warpgroup 0, which doubles it."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Sums: T.Tensor((N,), dtype), Row: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=256) as _:
            tile = T.alloc_fragment((M, N), dtype)
            sums = T.alloc_fragment((N,), dtype)
            S = T.alloc_shared((N,), dtype)
            row = T.alloc_fragment((N,), dtype)
            ready = T.alloc_barrier(128)
            T.copy(X, tile)
            T.reduce_sum(tile, sums, dim=0)
            T.copy(sums, Sums)
            with T.ws(1):
                T.copy(X[0, 0:N], S)
                T.barrier_arrive(ready)
            with T.ws(0):
                T.barrier_wait(ready, 0)
                T.copy(S, row)
                for i in T.Parallel(N):
                    row[i] = row[i] * 2.0
                T.copy(row, Row)

    return main

