import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit(out_idx=[-1])
def dropout(M, N, p=0.25, seed=1234, block_M=32, block_N=64, dtype=T.float16):
    """Inverted dropout of a tile: element ``(r, c)`` is kept when the first float of stream
    ``r * N + c`` under ``seed`` is at least ``p``, and then scaled by ``1 / (1 - p)``."""
    scale = 1.0 / (1.0 - p)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            x = T.alloc_fragment((block_M, block_N), dtype)
            T.copy(X[by * block_M, bx * block_N], x)
            for i, j in T.Parallel(block_M, block_N):
                T.rng_init(seed, (by * block_M + i) * N + bx * block_N + j)
                x[i, j] = T.if_then_else(T.rng_rand_float() >= p, x[i, j] * scale, 0)
            T.copy(x, Y[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[-1])
def random_bits(n, seed=7, off=5, block=128):
    """Per element ``k``, from stream ``k`` at offset ``off``: the uint32 draw, a float32 draw and a
    float64 draw (two words), as float64 (exact)."""

    @T.prim_func
    def main(Z: T.Tensor((n, 3), T.float64)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                k = bx * block + i
                T.rng_init(seed, k, off)
                if k < n:
                    Z[k, 0] = T.cast(T.rng_rand(), T.float64)
                    Z[k, 1] = T.cast(T.rng_rand_float(), T.float64)
                    Z[k, 2] = T.rng_rand_float(bit=64)

    return main
