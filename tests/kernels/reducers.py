"""Kernels that reduce with ``T.alloc_reducer``: several ``T.Parallel`` iterations update the same
element of the reducer, which is combined by ``T.finalize_reducer``."""

import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit(out_idx=[-1])
def column_sums(M, N, block_M=32, threads=128, dtype=T.float32):
    """The sum of each column of X, per block of ``block_M`` rows (TileLang's first spelling:
    ``T.clear``, ``r[j] += ...``, ``T.finalize_reducer(r)``)."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), S: T.Tensor((T.ceildiv(M, block_M), N), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            tile = T.alloc_shared((block_M, N), dtype)
            sums = T.alloc_reducer((N,), T.float32, op="sum", replication="all")
            T.copy(X[bx * block_M, 0], tile)
            T.clear(sums)
            for i, j in T.Parallel(block_M, N):
                sums[j] += tile[i, j]
            T.finalize_reducer(sums)
            T.copy(sums, S[bx, 0])

    return main


@tilelang.jit(out_idx=[-2, -1])
def row_col_max(M, N, threads=128):
    """The maximum of each row and of each column of one [M, N] tile, the row maxima through
    TileLang's newer spelling (``T.reducer_init``, ``T.reducer_update``, ``T.finalize_reducer(r,
    dst)``), the column maxima seeded with -1 (a column whose values are all below -1 reads -1)."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), R: T.Tensor((M,), T.float32), C: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=threads):
            x = T.alloc_fragment((M, N), T.float32)
            row_max = T.alloc_reducer((M,), T.float32, op="max")
            col_max = T.alloc_reducer((N,), T.float32, op="max")
            rows = T.alloc_fragment((M,), T.float32)
            T.copy(X, x)
            T.reducer_init(row_max)
            T.fill(col_max, -1.0)
            for i, j in T.Parallel(M, N):
                T.reducer_update(row_max[i], x[i, j])
                col_max[j] = T.max(col_max[j], x[i, j])
            T.finalize_reducer(row_max, rows)
            T.finalize_reducer(col_max)
            T.copy(rows, R)
            T.copy(col_max, C)

    return main


@tilelang.jit(out_idx=[-1])
def histogram_bits(M, bins, threads=128):
    """Per bin ``X[i] % bins``: the count of values (sum), their minimum, and the bitwise or, and
    and xor of the values falling into it: updates to the same bin collide on purpose."""

    @T.prim_func
    def main(X: T.Tensor((M,), T.int32), H: T.Tensor((5, bins), T.int32)):
        with T.Kernel(1, threads=threads):
            count = T.alloc_reducer((bins,), T.int32, op="sum")
            low = T.alloc_reducer((bins,), T.int32, op="min")
            ors = T.alloc_reducer((bins,), T.int32, op="bitor")
            ands = T.alloc_reducer((bins,), T.int32, op="bitand")
            xors = T.alloc_reducer((bins,), T.int32, op="bitxor")
            outs = [T.alloc_fragment((bins,), T.int32) for _ in range(5)]
            T.reducer_init(count)
            T.reducer_init(low, T.max_value(T.int32))
            T.reducer_init(ors)
            T.reducer_init(ands)
            T.reducer_init(xors)
            for i in T.Parallel(M):
                if X[i] >= 0:
                    T.reducer_update(count[X[i] % bins], 1)
                    T.reducer_update(low[X[i] % bins], X[i])
                    T.reducer_update(ors[X[i] % bins], X[i])
                    T.reducer_update(ands[X[i] % bins], X[i])
                    T.reducer_update(xors[X[i] % bins], X[i])
            for k, r in enumerate((count, low, ors, ands, xors)):
                T.finalize_reducer(r, outs[k])
                T.copy(outs[k], H[k, :])

    return main


@tilelang.jit(out_idx=[-1])
def column_sums_pipelined(M, N, block_M=32, block_N=32, num_stages=2, threads=128):
    """The sum of each column of X: each block walks all rows of its ``block_N`` columns in a
    pipelined loop, every iteration adding its tile into the same reducer."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float16), S: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            tile = T.alloc_shared((block_M, block_N), T.float16)
            sums = T.alloc_reducer((block_N,), T.float32)
            T.fill(sums, 0)
            for k in T.Pipelined(T.ceildiv(M, block_M), num_stages=num_stages):
                T.copy(X[k * block_M, bx * block_N], tile)
                for i, j in T.Parallel(block_M, block_N):
                    sums[j] += tile[i, j]
            T.finalize_reducer(sums)
            T.copy(sums, S[bx * block_N])

    return main
