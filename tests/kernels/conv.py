"""2-D convolution as an implicit GEMM, written as TileLang's convolution example is: ``T.im2col``
builds each k-tile of the NHWC input's patches, the HWCF filter is read as a [KH*KW*C, F] matrix
(``T.Tensor(shape, dtype, kernel.data)``: another view of the same memory)."""

import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit(out_idx=[-1])
def conv2d_nhwc(N, C, H, W, F, K, S, D, P, block_M=64, block_N=64, block_K=32, num_stages=2, threads=128):
    """``out[n, oh, ow, f]`` = the convolution of ``data`` (NHWC) with ``kernel`` (KH, KW, C, F),
    stride ``S``, dilation ``D``, padding ``P`` (square kernel ``K``)."""
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1
    dtype, accum_dtype = T.float16, T.float32

    @T.prim_func
    def main(data: T.Tensor((N, H, W, C), dtype), kernel: T.Tensor((K, K, C, F), dtype),
             out: T.Tensor((N, OH, OW, F), dtype)):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(N * OH * OW, block_M), threads=threads) as (bx, by):
            data_shared = T.alloc_shared((block_M, block_K), dtype)
            kernel_shared = T.alloc_shared((block_K, block_N), dtype)
            out_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            kernel_flat = T.Tensor((K * K * C, F), dtype, kernel.data)  # TileLang's spelling of T.reshape
            out_flat = T.Tensor((N * OH * OW, F), dtype, out.data)
            T.clear(out_local)
            for k_iter in T.Pipelined(T.ceildiv(K * K * C, block_K), num_stages=num_stages):
                T.im2col(data, data_shared, by, k_iter, K, S, D, P)
                T.copy(kernel_flat[k_iter * block_K, bx * block_N], kernel_shared)
                T.gemm(data_shared, kernel_shared, out_local)
            T.copy(out_local, out_flat[by * block_M, bx * block_N])

    return main
