"""DeepSeek-V3 style float8 GEMMs written as TileLang's examples write them (deepseek_deepgemm's
``example_deepgemm_fp8_2xAcc`` and gemm_fp8's ``example_tilelang_gemm_fp8_2xAcc``): e4m3 operands,
each k-block's tensor-core partial sums promoted into a second float32 accumulator."""

import torch

import tilelang_x as tilelang
import tilelang_x.language as T

__all__ = ["blockscale_reference", "deepgemm_fp8", "gemm_fp8_2xacc", "per_block_cast_to_fp8",
           "per_token_cast_to_fp8"]


@tilelang.jit(out_idx=[2])
def deepgemm_fp8(M, N, K, block_N, in_dtype="e4m3_float8", out_dtype="bfloat16", accum_dtype="float32",
                 num_stages=4):
    """``C = A @ B^T`` with per-block scales: ``scales_a[m, k // 128]`` per row of A and k-block,
    ``scales_b[n // 128, k // 128]`` per 128 x 128 block of B; every k-block's partial product is
    scaled by both and added to ``C_local_accum``."""
    group_size = 128
    block_M = 128
    block_K = 128

    A_shape = (M, K)
    Scales_A_shape = (M, T.ceildiv(K, group_size))
    B_shape = (N, K)
    Scales_B_shape = (T.ceildiv(N, group_size), T.ceildiv(K, group_size))
    A_shared_shape = (block_M, block_K)
    B_shared_shape = (block_N, block_K)
    C_shared_shape = (block_M, block_N)

    @T.prim_func
    def main(
            A: T.Tensor(A_shape, in_dtype),
            B: T.Tensor(B_shape, in_dtype),
            C: T.Tensor((M, N), out_dtype),
            scales_a: T.Tensor(Scales_A_shape, "float32"),
            scales_b: T.Tensor(Scales_B_shape, "float32"),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared(A_shared_shape, in_dtype)
            B_shared = T.alloc_shared(B_shared_shape, in_dtype)
            C_shared = T.alloc_shared(C_shared_shape, out_dtype)
            Scale_C_shared = T.alloc_shared((block_M), "float32")
            C_local = T.alloc_fragment(C_shared_shape, accum_dtype)
            C_local_accum = T.alloc_fragment(C_shared_shape, accum_dtype)

            T.use_swizzle(panel_size=10)

            T.clear(C_local)
            T.clear(C_local_accum)
            K_iters = T.ceildiv(K, block_K)
            for k in T.Pipelined(K_iters, num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                # one scale for this block's columns, one a row: their products scale the k-block
                Scale_B = scales_b[bx * block_N // group_size, k]
                for i in T.Parallel(block_M):
                    Scale_C_shared[i] = scales_a[by * block_M + i, k] * Scale_B

                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    C_local_accum[i, j] += C_local[i, j] * Scale_C_shared[i]
                T.clear(C_local)
            T.copy(C_local_accum, C_shared)
            T.copy(C_shared, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[-1])
def gemm_fp8_2xacc(M, N, K, block_M, block_N, block_K, dtype=T.float8_e4m3, accum_dtype=T.float32, num_stages=3):
    """``C = A @ B^T`` in float32 with the tensor cores' sums promoted every 128 columns of K:
    after ``128 // block_K`` k-blocks (every k-block when ``block_K >= 128``), and once more for
    the k-blocks left at the end."""
    update_interval = 128 // block_K if block_K < 128 else 1

    @T.prim_func
    def main(
            A: T.Tensor((M, K), dtype),
            B: T.Tensor((N, K), dtype),
            C: T.Tensor((M, N), accum_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_shared = T.alloc_shared((block_M, block_N), accum_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            C_local_accum = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.clear(C_local)
            T.clear(C_local_accum)
            K_iters = T.ceildiv(K, block_K)
            for k in T.Pipelined(K_iters, num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
                if (k + 1) % update_interval == 0:
                    for i, j in T.Parallel(block_M, block_N):
                        C_local_accum[i, j] += C_local[i, j]
                    T.clear(C_local)
            if K_iters % update_interval != 0:
                for i, j in T.Parallel(block_M, block_N):
                    C_local_accum[i, j] += C_local[i, j]
            T.copy(C_local_accum, C_shared)
            T.copy(C_shared, C[by * block_M, bx * block_N])

    return main


def per_token_cast_to_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` [m, n] (n a multiple of 128) as e4m3 with one float32 scale per row and 128 columns."""
    m, n = x.shape
    groups = x.float().view(m, n // 128, 128)
    amax = groups.abs().amax(dim=2).clamp(min=1e-4)
    q = (groups * (448.0 / amax.unsqueeze(2))).to(torch.float8_e4m3fn).view(m, n)
    return q, amax / 448.0


def per_block_cast_to_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` [m, n] as e4m3 with one float32 scale per 128 x 128 block (partial blocks at the edges)."""
    m, n = x.shape
    mb, nb = -(-m // 128), -(-n // 128)
    padded = torch.zeros(mb * 128, nb * 128, dtype=torch.float32, device=x.device)
    padded[:m, :n] = x.float()
    blocks = padded.view(mb, 128, nb, 128)
    amax = blocks.abs().amax(dim=(1, 3), keepdim=True).clamp(min=1e-4)
    q = (blocks * (448.0 / amax)).to(torch.float8_e4m3fn).view(mb * 128, nb * 128)[:m, :n].contiguous()
    return q, (amax / 448.0).view(mb, nb)


def blockscale_reference(a: torch.Tensor, b: torch.Tensor, scales_a: torch.Tensor,
                         scales_b: torch.Tensor) -> torch.Tensor:
    """``A @ B^T`` in float32 from the dequantized operands (``a`` [M, K], ``b`` [N, K] in e4m3)."""
    sa = scales_a.repeat_interleave(128, dim=1)[:, :a.shape[1]]
    sb = scales_b.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)[:b.shape[0], :b.shape[1]]
    return (a.float() * sa) @ (b.float() * sb).T
