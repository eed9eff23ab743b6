import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit(out_idx=[-1])
def leaky_add(M, N, block_M=32, block_N=32, slope=0.1, dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                y = by * block_M + i
                x = bx * block_N + j
                if y < M and x < N:
                    s = A[y, x] + B[y, x]
                    C[y, x] = T.if_then_else(s > 0, s, s * slope)

    return main


@tilelang.jit(out_idx=[-1])
def fma_rows(M, N, block_M=32, dtype=T.float32):
    """``C = A * B + 1`` a row per thread, through the TileLang spellings kernels carry over:
    ``T.Serial`` / ``T.Unroll`` / ``T.Vectorized``, ``T.fma``, ``T.likely`` and ``T.assume``."""
    half = N // 2

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i in T.Parallel(block_M):
                row = bx * block_M + i
                T.assume(row >= 0)
                if T.likely(row < M):
                    for j in T.Serial(half):
                        C[row, j] = T.fma(A[row, j], B[row, j], 1.0)
                    for j in T.Unroll(half, half + 4):
                        C[row, j] = T.fma(A[row, j], B[row, j], 1.0)
                    for j in T.Vectorized(half + 4, N):
                        C[row, j] = T.fma(A[row, j], B[row, j], 1.0)

    return main


@tilelang.jit(out_idx=[-1])
def vector_add(block=256, dtype=T.float32):
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                idx = bx * block + i
                if idx < n:
                    C[idx] = A[idx] + B[idx]

    return main
