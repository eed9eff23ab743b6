"""Kernels that leave IR loops early (``break``, ``continue`` and ``T.loop_break``), and TVMScript's
statement ``if`` (``T.If`` / ``T.Then`` / ``T.Else``)."""

import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit(out_idx=[-1])
def block_sparse_row_sum(M, N, block_M=32, block_N=64, dtype=T.float32):
    """``Out[r] = sum of A[r, :]`` over the column tiles that ``mask`` keeps: a tile whose entry is
    0 is skipped (``continue``), and a negative entry ends the row (``break``)."""
    tiles = N // block_N

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), mask: T.Tensor((M // block_M, tiles), T.int32),
             Out: T.Tensor((M,), dtype)):
        with T.Kernel(M // block_M, threads=128) as bx:
            A_shared = T.alloc_shared((block_M, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), dtype)
            row = T.alloc_fragment((block_M,), dtype)
            T.clear(acc)
            for k in T.serial(tiles):
                if mask[bx, k] == 0:
                    continue
                if mask[bx, k] < 0:
                    break
                T.copy(A[bx * block_M, k * block_N], A_shared)
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] += A_shared[i, j]
            T.reduce_sum(acc, row, dim=1)
            T.copy(row, Out[bx * block_M])

    return main


@T.macro
def _stop_if(cond):
    if cond:
        T.loop_break()


@tilelang.jit(out_idx=[-1])
def first_below(M, N, threshold=0.0, dtype=T.float32):
    """``Out[r]``: the first column where ``A[r, :]`` drops below ``threshold`` (``N`` if none),
    found by a ``while`` loop that a macro leaves with ``T.loop_break``."""

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), Out: T.Tensor((M,), T.int32)):
        with T.Kernel(M, threads=32) as bx:
            col = T.alloc_var(T.int32, 0)
            while col < N:
                _stop_if(A[bx, col] < threshold)
                col += 1
            Out[bx] = col

    return main


@tilelang.jit
def block_sparse_matmul(M, N, K, blocks, block_M=64, block_N=64, block_K=32, num_stages=2):
    """``C += A @ B`` on the output tiles ``tile_mask`` keeps (``continue`` skips the others), by
    ``blocks`` blocks walking the tiles with ``T.Persistent``."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             tile_mask: T.Tensor((M // block_M, N // block_N), T.int32), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(blocks, threads=128) as block_id:
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_f = T.alloc_fragment((block_M, block_N), T.float32)
            for bx, by in T.Persistent([N // block_N, M // block_M], blocks, block_id, 4):
                if tile_mask[by, bx] == 0:
                    continue
                T.clear(C_f)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                    T.copy(A[by * block_M, k * block_K], A_s)
                    T.copy(B[k * block_K, bx * block_N], B_s)
                    T.gemm(A_s, B_s, C_f)
                T.copy(C_f, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[-1])
def row_flags(M, N, block_M=16):
    """``Out[r]``: 1 where any of ``A[r, :N // 2]`` is nonzero, plus 2 where all of ``A[r, N // 2:]``
    are, plus 4 where ``A[r, 0]`` and ``A[r, 1]`` both are (``T.any_of`` / ``T.all_of``)."""
    half = N // 2

    @T.prim_func
    def main(A: T.Tensor((M, N), T.int32), Out: T.Tensor((M,), T.int32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=32) as bx:
            for i in T.Parallel(block_M):
                r = bx * block_M + i
                if r < M:
                    Out[r] = (T.if_then_else(T.any_of(A[r, 0:half]), 1, 0)
                              + T.if_then_else(T.all_of(A[r, half:N]), 2, 0)
                              + T.if_then_else(T.all_of(A[r, 0:2]), 4, 0))

    return main


@tilelang.jit(out_idx=[-1])
def leading_rows_scaled(M, N, block_M=16):
    """Y = 2 X on the first ``rows[0]`` rows and -X below them, plus 100 in column 0, written with
    TVMScript's statement if (``with T.If(c): with T.Then(): ... with T.Else(): ...`` and the
    one-line ``with T.If(c), T.Then():`` of TileLang's grouped MoE kernels) in a T.Parallel body."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), rows: T.Tensor((1,), T.int32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                r = bx * block_M + i
                with T.If(r < rows[0]):
                    with T.Then():
                        Y[r, j] = X[r, j] * 2
                    with T.Else():
                        Y[r, j] = -X[r, j]
                with T.If(j == 0), T.Then():
                    Y[r, j] = Y[r, j] + 100

    return main
