import tilelang_x as tilelang
import tilelang_x.language as T
from examples.gemm_relu import matmul_relu  # the quick-start kernel (eager style), shared with the demo

__all__ = ["blocksparse_matmul", "matmul", "matmul_dynamic_m", "matmul_persistent", "matmul_relu"]


@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M=128, block_N=128, block_K=32, in_dtype=T.float16, out_dtype=T.float16,
           accum_dtype=T.float32, trans_B=False, relu=False, num_stages=3, threads=128, cluster=None, swizzle=None,
           flat_A=False, fp32_gemm=None, swap_operands=None, staged_C=False, merge_shared=None):
    """``C = A @ B``; with ``flat_A``, ``A`` is passed flat (``M * K`` elements) and reshaped in the kernel;
    ``fp32_gemm``: the precision of float32 operands (pass config ``tlx.fp32_gemm``); ``swap_operands``:
    pass config ``tlx.swap_operands``; ``staged_C``: ``C`` goes out through a shared tile (TileLang's
    ``example_gemm``); ``merge_shared``: pass config ``tlx.merge_shared``."""
    A_shape = (M * K,) if flat_A else (M, K)
    B_shape = (N, K) if trans_B else (K, N)
    B_shared_shape = (block_N, block_K) if trans_B else (block_K, block_N)

    @T.prim_func
    def main(A: T.Tensor(A_shape, in_dtype), B: T.Tensor(B_shape, in_dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads, cluster_dims=cluster) as (bx, by):
            if fp32_gemm is not None:
                T.annotate_pass_configs({"tlx.fp32_gemm": fp32_gemm})
            if swap_operands is not None:
                T.annotate_pass_configs({"tlx.swap_operands": swap_operands})
            if merge_shared is not None:
                T.annotate_pass_configs({"tlx.merge_shared": merge_shared})
            A_rows = T.reshape(A, (M, K)) if flat_A else A
            if swizzle is not None:
                T.use_swizzle(*swizzle)
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared(B_shared_shape, in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A_rows[by * block_M, ko * block_K], A_shared)
                if trans_B:
                    T.copy(B[bx * block_N, ko * block_K], B_shared)
                else:
                    T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=trans_B)
            if relu:
                for i, j in T.Parallel(block_M, block_N):
                    C_local[i, j] = T.max(C_local[i, j], 0)
            if staged_C:
                C_shared = T.alloc_shared((block_M, block_N), out_dtype)
                T.copy(C_local, C_shared)
                T.copy(C_shared, C[by * block_M, bx * block_N])
            else:
                T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def matmul_dynamic_m(cluster=None):
    """C[m, 256] = A[m, 256] @ B[256, 256] with ``m`` bound at call time (128x128 tiles)."""
    m = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((m, 256), T.float16), B: T.Tensor((256, 256), T.float16), C: T.Tensor((m, 256), T.float16)):
        with T.Kernel(2, T.ceildiv(m, 128), threads=256, cluster_dims=cluster) as (bx, by):
            A_s = T.alloc_shared((128, 64), T.float16)
            B_s = T.alloc_shared((64, 128), T.float16)
            C_f = T.alloc_fragment((128, 128), T.float32)
            T.clear(C_f)
            for ko in T.Pipelined(4, num_stages=3):
                T.copy(A[by * 128, ko * 64], A_s)
                T.copy(B[ko * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * 128, bx * 128])

    return main


@tilelang.jit(out_idx=[-1])
def matmul_persistent(M, N, K, blocks, block_M=64, block_N=64, block_K=32, group_size=8, num_stages=2, threads=128):
    """C = A @ B written as TileLang's persistent GEMMs are: ``blocks`` blocks walk the tiles with
    ``T.Persistent`` (the compiler's own persistent form needs no such loop)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(blocks, threads=threads) as block_id:
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_f = T.alloc_fragment((block_M, block_N), T.float32)
            for bx, by in T.Persistent([T.ceildiv(N, block_N), T.ceildiv(M, block_M)], blocks, block_id, group_size):
                T.clear(C_f)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                    T.copy(A[by * block_M, k * block_K], A_s)
                    T.copy(B[k * block_K, bx * block_N], B_s)
                    T.gemm(A_s, B_s, C_f)
                T.copy(C_f, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[-1])
def blocksparse_matmul(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=3, threads=256):
    """C = A @ B over the k-blocks ``BlockMask[by, bx, k]`` keeps, as TileLang's block-sparse GEMM
    example writes it: the whole pipelined body under ``if BlockMask[by, bx, k]``."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             BlockMask: T.Tensor((M // block_M, N // block_N, K // block_K), T.bool),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_K, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for k in T.Pipelined(K // block_K, num_stages=num_stages):
                if BlockMask[by, bx, k]:
                    T.copy(A[by * block_M, k * block_K], A_shared)
                    T.copy(B[k * block_K, bx * block_N], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[-1])
def matmul_short_k_steps(M, N, K, step, block_M=64, block_N=64, block_K=32, num_stages=2, threads=128):
    """C = A @ B advancing ``step`` (< block_K) along K per iteration: each step copies only
    ``step`` rows of B into the [block_K, block_N] tile, whose other rows stay 0 from one T.clear
    before the T.Pipelined loop (TileLang's split decode clears its K tile so), so the A columns
    past the step multiply zeros."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            T.clear(B_s)
            for k in T.Pipelined(T.ceildiv(K, step), num_stages=num_stages):
                T.copy(A[by * block_M, k * step], A_s)
                T.copy(B[k * step:(k + 1) * step, bx * block_N:(bx + 1) * block_N], B_s[0:step, :])
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main
