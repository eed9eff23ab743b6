"""Weight-only int4 GEMM (W4A16), written as TileLang's dequantize-GEMM examples are.

Quantization convention: ``B_packed[n, k // 2]`` (uint8) holds the unsigned 4-bit codes ``q`` of
weights ``W[n, k]``, the even ``k`` in the low nibble; ``Scales[n, k // group_size]`` (fp16) is one
scale per row and group of ``group_size`` consecutive ``k``; ``W[n, k] = (q - 8) * scale`` (zero
point 8, so ``q`` in [0, 15] stands for [-8, 7]). ``C = A @ W^T``, as a ``torch.nn.Linear``.
"""

import torch

import tilelang_x as tilelang
import tilelang_x.language as T

__all__ = ["dequant_w4", "matmul_w4a16", "pack_w4"]


@tilelang.jit(out_idx=[-1])
def matmul_w4a16(M, N, K, group_size=128, block_M=128, block_N=128, block_K=64, num_stages=3, threads=256):
    """``C[M, N] = A[M, K] @ dequant(B_packed, Scales)^T`` in fp16 with fp32 accumulation; ``M`` may
    have a tail, ``N`` and ``K`` must be whole tiles and ``K`` whole groups."""
    if N % block_N or K % block_K or K % group_size:
        raise ValueError(f"N={N} must be a multiple of block_N={block_N}, K={K} of block_K={block_K} "
                         f"and of group_size={group_size}")

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B_packed: T.Tensor((N, K // 2), T.uint8),
             Scales: T.Tensor((N, K // group_size), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_N, block_K // 2), T.uint8)
            B_dequant_local = T.alloc_fragment((block_N, block_K), T.float16)
            B_dequant_shared = T.alloc_shared((block_N, block_K), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for k in T.Pipelined(K // block_K, num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B_packed[bx * block_N, k * block_K // 2], B_shared)
                for i, j in T.Parallel(block_N, block_K):
                    q = T.bitwise_and(T.shift_right(B_shared[i, j // 2], (j % 2) * 4), 0xF)
                    scale = Scales[bx * block_N + i, (k * block_K + j) // group_size]
                    B_dequant_local[i, j] = (T.cast(q, T.float16) - T.float16(8)) * scale
                T.copy(B_dequant_local, B_dequant_shared)
                T.gemm(A_shared, B_dequant_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def pack_w4(q: torch.Tensor) -> torch.Tensor:
    """uint8 bytes of the 4-bit codes ``q`` [N, K] (values 0..15), the even ``k`` in the low nibble."""
    return (q[:, 0::2] | (q[:, 1::2] << 4)).to(torch.uint8)


def dequant_w4(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """The fp32 weights [N, K] of ``matmul_w4a16``: ``(q - 8) * scale`` of each k-group."""
    q = torch.stack([packed & 0xF, packed >> 4], dim=-1).reshape(packed.shape[0], -1).float()
    return (q - 8) * scales.float().repeat_interleave(q.shape[1] // scales.shape[1], dim=1)
