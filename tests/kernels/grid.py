"""Kernels that synchronize beyond one block: grid barriers (``T.sync_grid``) and programmatic
dependent launch (``T.pdl_trigger`` / ``T.pdl_sync``)."""

import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit(out_idx=[-1])
def normalize(M, N, block_M=8, threads=128):
    """``Y = X / X.sum()`` in one kernel: each block writes the sums of its rows to ``Partial``,
    waits for every block at the grid barrier, then reads all of them for the total."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Partial: T.Tensor((M,), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // block_M, threads=threads) as bx:
            tile = T.alloc_fragment((block_M, N), T.float32)
            rows = T.alloc_fragment((block_M,), T.float32)
            T.copy(X[bx * block_M, 0], tile)
            T.reduce_sum(tile, rows, dim=1)
            T.copy(rows, Partial[bx * block_M])
            T.sync_grid()
            total = T.alloc_var(T.float32, 0.0)
            for k in T.serial(M):
                total += Partial[k]
            for i, j in T.Parallel(block_M, N):
                tile[i, j] = tile[i, j] / total
            T.copy(tile, Y[bx * block_M, 0])

    return main


@tilelang.jit(out_idx=[-1])
def smooth(N, steps, block=128):
    """``steps`` rounds of ``x[i] = (x[i-1] + x[i] + x[i+1]) / 3`` (zero outside) over a vector
    split across blocks: each round reads its neighbours' elements from the previous round, kept
    in ``Work[t % 2]``, so the blocks meet at a grid barrier inside the serial loop."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), Work: T.Tensor((2, N), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(N // block, threads=block) as bx:
            for i in T.Parallel(block):
                Work[0, bx * block + i] = X[bx * block + i]
            T.sync_grid()
            for t in T.serial(steps):
                src = t % 2
                for i in T.Parallel(block):
                    g = bx * block + i
                    left = T.if_then_else(g > 0, Work[src, T.max(g - 1, 0)], 0.0)
                    right = T.if_then_else(g < N - 1, Work[src, T.min(g + 1, N - 1)], 0.0)
                    Work[1 - src, g] = (left + Work[src, g] + right) / 3.0
                T.sync_grid()
            for i in T.Parallel(block):
                Y[bx * block + i] = Work[steps % 2, bx * block + i]

    return main


@tilelang.jit
def scale_first_rows(N, block=64):
    """``Y[:n] = 2 * X[:n]`` for ``n`` passed at the call, over ``ceildiv(n, block)`` blocks: the grid
    reads an integer parameter (as varlen attention's ``max_seqlen_q`` does)."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), n: T.int32, Y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    Y[bx * block + i] = X[bx * block + i] * 2.0

    return main
