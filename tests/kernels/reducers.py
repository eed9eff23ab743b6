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
            out = T.alloc_fragment((5, bins), T.int32)
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
            T.finalize_reducer(count, out[0, :])
            T.finalize_reducer(low, out[1, :])
            T.finalize_reducer(ors, out[2, :])
            T.finalize_reducer(ands, out[3, :])
            T.finalize_reducer(xors, out[4, :])
            T.copy(out, H)

    return main
