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


@tilelang.jit(out_idx=[-1])
def transpose_tiles(M, N, block=32):
    """``B = A.T`` a tile at a time: ``T.copy`` in, ``T.transpose`` between two shared tiles, out."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float16), B: T.Tensor((N, M), T.float16)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            tile = T.alloc_shared((block, block), T.float16)
            flipped = T.alloc_shared((block, block), T.float16)
            T.copy(A[by * block, bx * block], tile)
            T.transpose(tile, flipped)
            T.copy(flipped, B[bx * block, by * block])

    return main


@tilelang.jit(out_idx=[-1])
def int8_row_dots(M, K, block_M=32):
    """``C[m] = A[m, :] . B[m, :]`` over int8 rows into int32, four products a ``T.dp4a``."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.int8), B: T.Tensor((M, K), T.int8), C: T.Tensor((M,), T.int32)):
        with T.Kernel(M // block_M, threads=block_M) as bx:
            for i in T.Parallel(block_M):
                acc = T.alloc_local((1,), T.int32)
                acc[0] = 0
                for g in T.serial(K // 4):
                    T.dp4a(A[bx * block_M + i, g * 4], B[bx * block_M + i, g * 4], acc[0])
                C[bx * block_M + i] = acc[0]

    return main


@tilelang.jit
def count_up(blocks, n):
    """``C[b] += n`` and ``C[b] += sum(S)`` by read-modify-writes outside ``T.Parallel``: statements of the
    whole block, done once per block (a shared scratch ``S`` counts along)."""

    @T.prim_func
    def main(C: T.Tensor((blocks,), T.int32)):
        with T.Kernel(blocks, threads=128) as bx:
            S = T.alloc_shared((1,), T.int32)
            S[0] = 0
            for _ in T.serial(n):
                C[bx] = C[bx] + 1
                S[0] = S[0] + 2
            C[bx] = C[bx] + S[0]

    return main


@tilelang.jit
def add_into(n, block=128):
    """``Y += X`` for tensors that may be the same one (``T.annotate_restrict_buffers``)."""

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            T.annotate_restrict_buffers(X, Y)
            T.annotate_l2_hit_ratio({X: 0.5})
            T.annotate_safe_value({X: 0})
            for i in T.Parallel(block):
                if bx * block + i < n:
                    Y[bx * block + i] = Y[bx * block + i] + X[bx * block + i]

    return main


@tilelang.jit(out_idx=[-1])
def scaled_tiles(M, N, block_M=32, block_N=64, dtype=T.float16, frag_dtype=T.float32, col0=0):
    """``Y = 2 X[:, col0:col0 + N]``, each tile copied from global memory into a fragment first:
    ``frag_dtype`` float32 converts the elements of a 16-bit ``X`` as the copy loads them; tiles
    past ``M`` and ``N`` read zeros; ``col0`` odd leaves the columns unaligned for vectors."""

    @T.prim_func
    def main(X: T.Tensor((M, N + col0), dtype), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            x = T.alloc_fragment((block_M, block_N), frag_dtype)
            T.copy(X[by * block_M, col0 + bx * block_N], x)
            for i, j in T.Parallel(block_M, block_N):
                if by * block_M + i < M and bx * block_N + j < N:
                    Y[by * block_M + i, bx * block_N + j] = T.cast(x[i, j], T.float32) * 2

    return main


@tilelang.jit(out_idx=[-1])
def cast_tiles(M, N, block_M=64, block_N=128, src_dtype=T.float32, dst_dtype=T.float16):
    """``Y = X`` converted to ``dst_dtype``, a tile at a time with one global → global ``T.copy``
    (tiles past ``M`` and ``N`` write nothing)."""

    @T.prim_func
    def main(X: T.Tensor((M, N), src_dtype), Y: T.Tensor((M, N), dst_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            T.copy(X[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N],
                   Y[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N])

    return main
