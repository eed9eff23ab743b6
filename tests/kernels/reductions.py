import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit(out_idx=[-1])
def softmax(M, N, block_M=4, dtype=T.float16):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), T.float32)
            row_max = T.alloc_fragment((block_M,), T.float32)
            row_sum = T.alloc_fragment((block_M,), T.float32)
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp(x[i, j] - row_max[i])
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / row_sum[i]
            T.copy(x, Y[bx * block_M, 0])

    return main


@tilelang.jit(out_idx=[-1])
def row_bits(M, N, kind, block_M=4, dtype=T.int32):
    """Each row of X reduced with a bitwise ``kind`` ("bitand", "bitor", "bitxor"), through
    ``T.reduce`` in TileLang's argument order."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), dtype)
            bits = T.alloc_fragment((block_M,), dtype)
            T.copy(X[bx * block_M, 0], x)
            T.reduce(x, bits, kind, dim=1)
            T.copy(bits, Y[bx * block_M])

    return main


@tilelang.jit(out_idx=[-1])
def rms_norm(M, N, blk_m=4, eps=1e-6, dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            A_shared = T.alloc_shared((blk_m, N), dtype)
            A_local = T.alloc_fragment((blk_m, N), T.float32)
            A_pow = T.alloc_fragment((blk_m, N), T.float32)
            inv_rms = T.alloc_fragment((blk_m,), T.float32)
            T.copy(A[bx * blk_m:(bx + 1) * blk_m, :], A_shared)
            T.copy(A_shared, A_local)
            for i, j in T.Parallel(blk_m, N):
                A_pow[i, j] = A_local[i, j] * A_local[i, j]
            T.reduce_sum(A_pow, inv_rms, dim=1)
            for i in T.Parallel(blk_m):
                inv_rms[i] = T.rsqrt(inv_rms[i] / N + eps)
            for i, j in T.Parallel(blk_m, N):
                A_local[i, j] *= inv_rms[i] * W[j]
            T.copy(A_local, B[bx * blk_m:(bx + 1) * blk_m, :])

    return main


@tilelang.jit(out_idx=[-1])
def cumsum(M, N, block_M=8, reverse=False, dtype=T.float32, running_max=False):
    """Prefix sums of X's rows (running maxima with ``running_max``: ``T.cummax``)."""
    scan = T.cummax if running_max else T.cumsum

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            tile = T.alloc_shared((block_M, N), dtype)
            T.copy(X[bx * block_M, 0], tile)
            scan(tile, dim=1, reverse=reverse)
            T.copy(tile, Y[bx * block_M, 0])

    return main


@tilelang.jit
def column_sum(M, N, block_M=32, block_N=32):
    """Column sums of X, accumulated into a zero-initialised S with atomic adds."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), S: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            tile = T.alloc_fragment((block_M, block_N), T.float32)
            partial = T.alloc_fragment((block_N,), T.float32)
            T.copy(X[by * block_M, bx * block_N], tile)
            T.reduce_sum(tile, partial, dim=0)
            for j in T.Parallel(block_N):
                if bx * block_N + j < N:
                    T.atomic_add(S[bx * block_N + j], partial[j])

    return main


@tilelang.jit
def packed_atomic_sum(K, M, N, lanes=2, dtype=T.float16, block_M=32, block_N=64):
    """S += the sum over k of X[k], block z adding slice k with TileLang's packed atomics
    (T.atomic_addx2 / T.atomic_addx4: ``lanes`` consecutive elements per call)."""
    add = T.atomic_addx2 if lanes == 2 else T.atomic_addx4

    @T.prim_func
    def main(X: T.Tensor((K, M, N), dtype), S: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), T.ceildiv(N, block_N), K, threads=128) as (bx, by, bz):
            for i, j in T.Parallel(block_M, block_N // lanes):
                add(S[bx * block_M + i, by * block_N + j * lanes], X[bz, bx * block_M + i, by * block_N + j * lanes])

    return main
