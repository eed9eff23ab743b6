"""Global memory that is not a tensor parameter: a ``T.alloc_global`` workspace that one kernel
fills and the next reads (split-K partial sums), and ``T.ptr`` parameters typed by
``T.make_tensor`` (TileLang's pointer GEMM, sizes from scalar parameters)."""

import tilelang_x as tilelang
import tilelang_x.language as T

__all__ = ["matmul_pointers", "matmul_split_k"]


@tilelang.jit(out_idx=[-1])
def matmul_split_k(M, N, K, splits=4, block_M=64, block_N=64, block_K=32, num_stages=2, threads=128):
    """``C = A @ B`` in two kernels: each of ``splits`` k-slices is multiplied into its own plane of
    a float32 workspace, then a second kernel adds the planes and rounds to float16."""
    k_part = K // splits

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        Partial = T.alloc_global((splits, M, N), T.float32)
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), splits, threads=threads) as (bx, by, bz):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(k_part, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, bz * k_part + ko * block_K], A_s)
                T.copy(B[bz * k_part + ko * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, Partial[bz, by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N])
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                total = Partial[0, by * block_M + i, bx * block_N + j]
                for s in list(range(1, splits)):  # a Python loop: unrolled when traced
                    total = total + Partial[s, by * block_M + i, bx * block_N + j]
                C[by * block_M + i, bx * block_N + j] = T.cast(total, T.float16)

    return main


@tilelang.jit
def matmul_pointers(M, N, K, block_M=64, block_N=64, block_K=32, num_stages=2, dtype=T.float16):
    """``C = A @ Bᵀ`` (float32 ``C``) over three pointers, the sizes passed as scalars, as TileLang's
    pointer test writes it; the grid is sized for ``M`` x ``N``."""

    @T.prim_func
    def main(a_ptr: T.ptr, b_ptr: T.ptr, c_ptr: T.ptr, m: T.int32, n: T.int32, k: T.int32):
        A = T.make_tensor(a_ptr, (m, k), dtype)
        B = T.make_tensor(b_ptr, (n, k), dtype)
        C = T.make_tensor(c_ptr, (m, n), T.float32)
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_N, block_K), dtype)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(k, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[bx * block_N, ko * block_K], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main
