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


@tilelang.jit
def column_bits(M, N, kind, tile=False, block_M=16, block_N=32, dtype=T.int32):
    """S combined with every element of its column of X by a bitwise atomic (``kind``: "or", "and",
    "xor"): one element per T.Parallel iteration, or (``tile``) one row of a shared tile per call."""
    atomic = {"or": T.atomic_or, "and": T.atomic_and, "xor": T.atomic_xor}[kind]

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), S: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            if tile:
                rows = T.alloc_shared((block_M, block_N), dtype)
                T.copy(X[by * block_M, bx * block_N], rows)
                for r in T.serial(block_M):
                    atomic(S[bx * block_N], rows[r, :])
            else:
                for i, j in T.Parallel(block_M, block_N):
                    if by * block_M + i < M and bx * block_N + j < N:
                        atomic(S[bx * block_N + j], X[by * block_M + i, bx * block_N + j])

    return main


@tilelang.jit
def flagged_sum(K, N, block_N=128):
    """S = 2 * the column sums of X, split K ways: block k writes 2 * X[k] to P[k] and raises its
    flag F[k] with T.atomic_store; a block that then sees every flag raised (T.atomic_load, seq_cst
    both) sums P into S. No block waits, so any launch order works; seq_cst guarantees that at
    least the last block to raise its flag sees all of them (several may, and write the same S)."""

    @T.prim_func
    def main(X: T.Tensor((K, N), T.float32), P: T.Tensor((K, N), T.float32), F: T.Tensor((K,), T.int32),
             S: T.Tensor((N,), T.float32)):
        with T.Kernel(K, threads=128) as bk:
            for j in T.Parallel(N):
                P[bk, j] = X[bk, j] * 2
            T.atomic_store(F[bk], 1)
            ready = T.alloc_var(T.int32, 1)
            for k in T.serial(K):
                if T.atomic_load(F[k]) == 0:
                    ready = 0
            if ready == 1:
                acc = T.alloc_fragment((block_N,), T.float32)
                for bn in T.serial(T.ceildiv(N, block_N)):
                    T.clear(acc)
                    for k in T.serial(K):
                        for j in T.Parallel(block_N):
                            if bn * block_N + j < N:
                                acc[j] += P[k, bn * block_N + j]
                    for j in T.Parallel(block_N):
                        if bn * block_N + j < N:
                            S[bn * block_N + j] = acc[j]

    return main


@tilelang.jit
def chained_prefix(B, N):
    """Y[b] = X[0] + ... + X[b] over the rows, one block a row: block b spins until block b - 1
    raises its flag (T.atomic_load with acquire, T.atomic_store with release), adds its row of Y to
    its own and raises its flag. A block waits only for the one launched before it."""

    @T.prim_func
    def main(X: T.Tensor((B, N), T.float32), F: T.Tensor((B,), T.int32), Y: T.Tensor((B, N), T.float32)):
        with T.Kernel(B, threads=128) as b:
            acc = T.alloc_fragment((N,), T.float32)
            T.copy(X[b, 0], acc)
            if b > 0:
                while T.atomic_load(F[b - 1], memory_order="acquire") == 0:
                    pass
                for j in T.Parallel(N):
                    acc[j] += Y[b - 1, j]
            T.copy(acc, Y[b, 0])
            T.atomic_store(F[b], 1, memory_order="release")

    return main


@tilelang.jit(out_idx=[-1])
def split_row_sum(M, N, splits=4, block_M=32, pdl=False):
    """``Out[r] = sum(A[r, :])`` in two kernels of one function, as split-KV decoding is written:
    the first sums each of ``splits`` column slices into ``Partial``, the second adds the slices.
    ``pdl``: programmatic dependent launch, the first kernel letting the second start once its
    blocks have stored their slices, the second waiting for them before it reads ``Partial``."""
    part = N // splits

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), Partial: T.Tensor((splits, M), T.float32),
             Out: T.Tensor((M,), T.float32)):
        with T.Kernel(M // block_M, splits, threads=128) as (bx, by):
            tile = T.alloc_fragment((block_M, part), T.float32)
            sums = T.alloc_fragment((block_M,), T.float32)
            T.copy(A[bx * block_M, by * part], tile)
            T.reduce_sum(tile, sums, dim=1)
            T.copy(sums, Partial[by, bx * block_M])
            if pdl:
                T.pdl_trigger()
        with T.Kernel(M // block_M, threads=128) as bx:
            if pdl:
                T.pdl_sync()
            for i in T.Parallel(block_M):
                total = Partial[0, bx * block_M + i]
                for k in list(range(1, splits)):  # a Python loop: unrolled when traced
                    total = total + Partial[k, bx * block_M + i]
                Out[bx * block_M + i] = total

    return main


@tilelang.jit(out_idx=[-1])
def row_lse_and_squares(M, N, BN=64, threads=64):
    """Per row of X, over chunks of BN columns: the log-sum-exp (each chunk a 1-D tile reduced into
    a one-element fragment, merged online) and the sum of squares (a [1, BN] accumulator cleared
    with T.clear, reduced into a [1, 1] fragment). S[m] = (lse, sum of squares)."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), S: T.Tensor((M, 2), T.float32)):
        with T.Kernel(M, threads=threads) as row:
            chunk = T.alloc_fragment((1, BN), T.float32)
            x = T.alloc_fragment((BN,), T.float32)
            squares = T.alloc_fragment((1, BN), T.float32)
            chunk_max = T.alloc_fragment((1,), T.float32)
            chunk_sum = T.alloc_fragment((1,), T.float32)
            lse = T.alloc_fragment((1,), T.float32)
            total = T.alloc_fragment((1, 1), T.float32)
            T.fill(lse, -T.infinity(T.float32))
            T.clear(squares)
            for c in T.serial(N // BN):
                T.copy(X[row:row + 1, c * BN:(c + 1) * BN], chunk)
                for j in T.Parallel(BN):
                    x[j] = chunk[0, j]
                for i, j in T.Parallel(1, BN):
                    squares[i, j] += chunk[i, j] * chunk[i, j]
                T.reduce_max(x, chunk_max, dim=0)
                for j in T.Parallel(BN):
                    x[j] = T.exp(x[j] - chunk_max[0])
                T.reduce_sum(x, chunk_sum, dim=0)
                m = T.max(lse[0], chunk_max[0])
                lse[0] = m + T.log(T.exp(lse[0] - m) + T.exp(chunk_max[0] - m) * chunk_sum[0])
            T.reduce_sum(squares, total, dim=1)
            S[row, 0] = lse[0]
            S[row, 1] = total[0, 0]

    return main


@tilelang.jit(out_idx=[1, 2])
def group_absmax_scale(M, N, blk_m=4, group=64, threads=128):
    """Each [blk_m, group] tile of X divided by its rows' absolute maximum / 127 (clamped to
    ±127), and the scales; the tile's fragment layout is annotated with a thread map only (the
    register index inferred: TileLang's Fragment(shape, forward_thread_fn=...))."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Q: T.Tensor((M, N), T.float32),
             S: T.Tensor((M, T.ceildiv(N, group)), T.float32)):
        with T.Kernel(T.ceildiv(M, blk_m), T.ceildiv(N, group), threads=threads) as (bx, by):
            x = T.alloc_fragment((blk_m, group), T.float32)
            amax = T.alloc_fragment((blk_m,), T.float32)
            T.annotate_layout({x: T.Fragment(x.shape, forward_thread_fn=lambda i, j: (j % 32) * blk_m + i)})
            T.copy(X[bx * blk_m, by * group], x)
            T.reduce_absmax(x, amax, dim=1)
            for i in T.Parallel(blk_m):
                amax[i] = T.max(amax[i], 1e-6) / 127.0
            for i, j in T.Parallel(blk_m, group):
                x[i, j] = T.clamp(x[i, j] / amax[i], -127.0, 127.0)
            T.copy(x, Q[bx * blk_m, by * group])
            for i in T.Parallel(blk_m):
                S[bx * blk_m + i, by] = amax[i]

    return main
