"""2:4 structured-sparse GEMM, written as TileLang's ``examples/gemm_sp``: A_sparse, E and B tiles
copied to shared memory in a ``T.Pipelined`` loop over K, ``T.gemm_sp`` into a float32 fragment,
the result stored through a shared tile. The host side compresses A with
``tilelang.utils.sparse.compress``."""

import tilelang_x as tilelang
import tilelang_x.language as T
from tilelang_x.layout import make_metadata_layout

__all__ = ["matmul_sp"]

#: metadata (columns per element, dtype) per arch, as TileLang's example declares it
ARCH_INFO = {"8.0": (16, "int16"), "9.0": (8, "uint8")}


@tilelang.jit(out_idx=[-1])
def matmul_sp(M, N, K, block_M=128, block_N=128, block_K=64, in_dtype="float16", out_dtype="float16",
              accum_dtype="float", trans_A=False, trans_B=False, num_stages=2, threads=128, arch="8.0",
              policy=T.GemmWarpPolicy.Square, annotate_meta=True):
    e_factor, e_dtype = ARCH_INFO[arch]
    A_sparse_shape = (K // 2, M) if trans_A else (M, K // 2)
    A_shared_shape = (block_K // 2, block_M) if trans_A else (block_M, block_K // 2)
    B_shape = (N, K) if trans_B else (K, N)
    B_shared_shape = (block_N, block_K) if trans_B else (block_K, block_N)

    @T.prim_func
    def gemm_sp(
        A_sparse: T.Tensor(A_sparse_shape, in_dtype),
        E: T.Tensor((M, K // e_factor), e_dtype),
        B: T.Tensor(B_shape, in_dtype),
        C: T.Tensor((M, N), out_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared(A_shared_shape, in_dtype)
            E_shared = T.alloc_shared((block_M, block_K // e_factor), e_dtype)
            B_shared = T.alloc_shared(B_shared_shape, in_dtype)
            C_shared = T.alloc_shared((block_M, block_N), out_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            if annotate_meta:
                T.annotate_layout({
                    E: make_metadata_layout(E, mma_dtype=in_dtype, backend="cutlass", block_k=block_K, arch=arch),
                    E_shared: make_metadata_layout(E_shared, mma_dtype=in_dtype, backend="cutlass", block_k=block_K,
                                                   arch=arch),
                })
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                if trans_A:
                    T.copy(A_sparse[k * block_K // 2, by * block_M], A_shared)
                else:
                    T.copy(A_sparse[by * block_M, k * block_K // 2], A_shared)
                T.copy(E[by * block_M, k * block_K // e_factor], E_shared)
                if trans_B:
                    T.copy(B[bx * block_N, k * block_K], B_shared)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm_sp(A_shared, E_shared, B_shared, C_local, transpose_A=trans_A, transpose_E=False,
                          transpose_B=trans_B, policy=policy)
            T.copy(C_local, C_shared)
            T.copy(C_shared, C[by * block_M, bx * block_N])

    return gemm_sp
