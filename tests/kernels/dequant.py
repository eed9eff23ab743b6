"""Weight-only int4 GEMM (W4A16), written as TileLang's dequantize-GEMM examples are.

Quantization convention: ``B_packed[n, k // 2]`` (uint8) holds the unsigned 4-bit codes ``q`` of
weights ``W[n, k]``, the even ``k`` in the low nibble; ``Scales[k // group_size, n]`` (fp16, the
layout GPTQ and AWQ store) is one scale per row and group of ``group_size`` consecutive ``k``;
``W[n, k] = (q - 8) * scale`` (zero point 8, so ``q`` in [0, 15] stands for [-8, 7]). ``C = A @
W^T``, as a ``torch.nn.Linear``. The scales of a tile are contiguous in that layout, so they travel
through the pipeline with the A and B tiles instead of being read from global memory in the unpack.
"""

import torch

import tilelang_x as tilelang
import tilelang_x.language as T

__all__ = ["dequant_w4", "matmul_w4a16", "matmul_w4a16_split_k", "pack_w4"]


def _check_tiles(N: int, K: int, group_size: int, block_N: int, block_K: int, split_k: int = 1) -> None:
    if N % block_N or K % (block_K * split_k) or K % group_size:
        raise ValueError(f"N={N} must be a multiple of block_N={block_N}, K={K} of block_K * split_k="
                         f"{block_K * split_k} and of group_size={group_size}")


def _w4_tile(group_size, block_M, block_N, block_K, num_stages, registers, bytes_fragment=False):
    """The macro that accumulates the output tile (``bx``, ``by``) over ``k_tiles`` k-tiles from
    ``k_tile0``: the dequantizing main loop every form shares. ``acc`` is ``C``'s tile
    [block_M, block_N], or with ``registers`` its transpose [block_N, block_M] = W @ A^T, where the
    dequantized weights stay in registers as the MMA's first operand (no shared-memory round trip,
    and the weights fill the MMA's 64-row side when A has few rows). ``bytes_fragment``: the packed
    bytes pass through a fragment read as ``B_local[i, j // 2]``, as TileLang's examples write it."""
    groups = max(1, block_K // group_size)  # scale rows a k-tile spans

    @T.macro
    def tile(A, B_packed, Scales, acc, bx, by, k_tile0, k_tiles):
        A_shared = T.alloc_shared((block_M, block_K), T.float16)
        B_shared = T.alloc_shared((block_N, block_K // 2), T.uint8)
        S_shared = T.alloc_shared((groups, block_N), T.float16)
        W_local = T.alloc_fragment((block_N, block_K), T.float16)
        B_bytes = T.alloc_fragment((block_N, block_K // 2), T.uint8) if bytes_fragment else B_shared
        if not registers:
            W_shared = T.alloc_shared((block_N, block_K), T.float16)
        T.clear(acc)
        for k in T.Pipelined(k_tiles, num_stages=num_stages):
            kk = k_tile0 + k
            T.copy(A[by * block_M, kk * block_K], A_shared)
            T.copy(B_packed[bx * block_N, kk * block_K // 2], B_shared)
            T.copy(Scales[kk * block_K // group_size, bx * block_N], S_shared)
            if bytes_fragment:
                T.copy(B_shared, B_bytes)
            for i, j in T.Parallel(block_N, block_K):
                q = T.bitwise_and(T.shift_right(B_bytes[i, j // 2], (j % 2) * 4), 0xF)
                scale = S_shared[j // group_size if groups > 1 else 0, i]
                W_local[i, j] = (T.cast(q, T.float16) - T.float16(8)) * scale
            if registers:
                T.gemm(W_local, A_shared, acc, transpose_B=True)
            else:
                T.copy(W_local, W_shared)
                T.gemm(A_shared, W_shared, acc, transpose_B=True)

    return tile


def _w4_store(M, block_M, block_N, registers):
    """The macro that writes the tile ``acc`` to ``dest[*lead, by * block_M:, bx * block_N:]``."""

    @T.macro
    def store(acc, dest, lead, bx, by):
        if registers:
            for i, j in T.Parallel(block_N, block_M):
                if by * block_M + j < M:
                    dest[(*lead, by * block_M + j, bx * block_N + i)] = acc[i, j]
        else:
            T.copy(acc, dest[(*lead, by * block_M, bx * block_N)])

    return store


def _acc_shape(block_M, block_N, registers):
    return (block_N, block_M) if registers else (block_M, block_N)


@tilelang.jit(out_idx=[-1])
def matmul_w4a16(M, N, K, group_size=128, block_M=128, block_N=128, block_K=64, num_stages=3, threads=256,
                 registers=False, bytes_fragment=False):
    """``C[M, N] = A[M, K] @ dequant(B_packed, Scales)^T`` in fp16 with fp32 accumulation; ``M`` may
    have a tail, ``N`` and ``K`` must be whole tiles and ``K`` whole groups. ``registers``: compute
    the transposed tile with the dequantized weights as the register operand; ``bytes_fragment``:
    the packed bytes through a fragment, as TileLang writes it (see ``_w4_tile``)."""
    _check_tiles(N, K, group_size, block_N, block_K)
    tile = _w4_tile(group_size, block_M, block_N, block_K, num_stages, registers, bytes_fragment)
    store = _w4_store(M, block_M, block_N, registers)

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B_packed: T.Tensor((N, K // 2), T.uint8),
             Scales: T.Tensor((K // group_size, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            acc = T.alloc_fragment(_acc_shape(block_M, block_N, registers), T.float32)
            tile(A, B_packed, Scales, acc, bx, by, 0, K // block_K)
            store(acc, C, (), bx, by)

    return main


@tilelang.jit(out_idx=[-1])
def matmul_w4a16_split_k(M, N, K, split_k=4, group_size=128, block_M=16, block_N=32, block_K=128, num_stages=4,
                         threads=128, registers=False):
    """``matmul_w4a16`` for few rows (decode): the k-tiles split ``split_k`` ways over blocks of
    their own (``split_k`` times the blocks to stream the weights with), each writing its fp32 sum
    to ``Partial[s]``; a second kernel adds the parts. Two ``T.Kernel`` blocks in one function."""
    _check_tiles(N, K, group_size, block_N, block_K, split_k)
    tile = _w4_tile(group_size, block_M, block_N, block_K, num_stages, registers)
    store = _w4_store(M, block_M, block_N, registers)
    k_tiles = K // block_K // split_k
    cols = 128

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B_packed: T.Tensor((N, K // 2), T.uint8),
             Scales: T.Tensor((K // group_size, N), T.float16), Partial: T.Tensor((split_k, M, N), T.float32),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // block_N, T.ceildiv(M, block_M), split_k, threads=threads) as (bx, by, bz):
            acc = T.alloc_fragment(_acc_shape(block_M, block_N, registers), T.float32)
            tile(A, B_packed, Scales, acc, bx, by, bz * k_tiles, k_tiles)
            store(acc, Partial, (bz,), bx, by)
        with T.Kernel(T.ceildiv(N, cols), M, threads=cols) as (bx, m):
            for j in T.Parallel(cols):
                n = bx * cols + j
                if n < N:
                    total = Partial[0, m, n]
                    for s in list(range(1, split_k)):  # a Python loop: unrolled when traced
                        total = total + Partial[s, m, n]
                    C[m, n] = total

    return main


def pack_w4(q: torch.Tensor) -> torch.Tensor:
    """uint8 bytes of the 4-bit codes ``q`` [N, K] (values 0..15), the even ``k`` in the low nibble."""
    return (q[:, 0::2] | (q[:, 1::2] << 4)).to(torch.uint8)


def dequant_w4(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """The fp32 weights [N, K] of ``matmul_w4a16``: ``(q - 8) * scale`` of each k-group (``scales``
    [K // group_size, N])."""
    q = torch.stack([packed & 0xF, packed >> 4], dim=-1).reshape(packed.shape[0], -1).float()
    return (q - 8) * scales.float().T.repeat_interleave(q.shape[1] // scales.shape[0], dim=1)
