"""Hopper register control (``T.set_max_nreg`` and its spellings, the register-split hints) and
TileLang's manual wgmma synchronization, written as FlashAttention-3-style kernels write them: a
producer warpgroup that only issues TMA copies gives registers back (``T.dec_max_nreg``), the
consumer warpgroups that hold the accumulators take them (``T.inc_max_nreg``). None of it changes
the results; on sm_90a it is ``setmaxnreg``, elsewhere nothing."""

import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit(out_idx=[2])
def gemm_ws_setmaxnreg(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=3, hints=False,
                       manual_wgmma=False, dtype=T.float16, accum_dtype=T.float32):
    """Warpgroup 2 loads the k-tiles of A and B into a ring of ``num_stages`` stages with TMA
    copies on ``full`` barriers and runs on 24 registers a thread; warpgroups 0 and 1 (one region)
    raise theirs to 240 and multiply, releasing each stage on its ``empty`` barrier. ``hints``:
    the same split spelled ``T.annotate_producer_reg_dealloc()`` / ``T.annotate_consumer_reg_alloc()``
    in the regions. ``manual_wgmma``: the consumers also write TileLang's wgmma fences, commits and
    waits around the gemm (which the compiler places itself)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=384) as (bx, by):
            A_s = T.alloc_shared((num_stages, block_M, block_K), dtype)
            B_s = T.alloc_shared((num_stages, block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), accum_dtype)
            full = T.alloc_barrier([128] * num_stages)
            empty = T.alloc_barrier([256] * num_stages)
            with T.ws(2):
                if hints:
                    T.annotate_producer_reg_dealloc()
                else:
                    T.dec_max_nreg(24)
                for k in T.serial(T.ceildiv(K, block_K)):
                    s = k % num_stages
                    T.barrier_wait(empty[s], (k // num_stages + 1) % 2)
                    T.tma_copy(A[by * block_M, k * block_K], A_s[s, :, :], barrier=full[s])
                    T.tma_copy(B[k * block_K, bx * block_N], B_s[s, :, :], barrier=full[s])
                    T.barrier_arrive(full[s])
            with T.ws(0, 1):
                if hints:
                    T.annotate_consumer_reg_alloc()
                else:
                    T.set_max_nreg(240, 1)
                T.clear(C_l)
                for k in T.serial(T.ceildiv(K, block_K)):
                    s = k % num_stages
                    T.barrier_wait(full[s], (k // num_stages) % 2)
                    if manual_wgmma:
                        T.warpgroup_fence_operand(C_l)
                        T.warpgroup_arrive()
                        T.gemm(A_s[s, :, :], B_s[s, :, :], C_l, wg_wait=-1)
                        T.warpgroup_commit_batch()
                        T.warpgroup_wait(0)
                        T.warpgroup_fence_operand(C_l)
                    else:
                        T.gemm(A_s[s, :, :], B_s[s, :, :], C_l)
                    T.barrier_arrive(empty[s])
                T.copy(C_l, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[2])
def gemm_branch_specialized(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=2, dtype=T.float16,
                            accum_dtype=T.float32):
    """The FlashAttention-3 spelling of ``gemm_ws_setmaxnreg``: the warpgroups are told apart by a
    branch on the thread index, the producer first (``tx < 128``), the consumers in the ``else``."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=384) as (bx, by):
            A_s = T.alloc_shared((num_stages, block_M, block_K), dtype)
            B_s = T.alloc_shared((num_stages, block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), accum_dtype)
            full = T.alloc_barrier([128] * num_stages)
            empty = T.alloc_barrier([256] * num_stages)
            tx = T.get_thread_binding()
            if tx < 128:
                T.dec_max_nreg(24)
                for k in T.serial(T.ceildiv(K, block_K)):
                    s = k % num_stages
                    T.barrier_wait(empty[s], (k // num_stages + 1) % 2)
                    T.tma_copy(A[by * block_M, k * block_K], A_s[s, :, :], barrier=full[s])
                    T.tma_copy(B[k * block_K, bx * block_N], B_s[s, :, :], barrier=full[s])
                    T.barrier_arrive(full[s])
            else:
                T.inc_max_nreg(240)
                T.clear(C_l)
                for k in T.serial(T.ceildiv(K, block_K)):
                    s = k % num_stages
                    T.barrier_wait(full[s], (k // num_stages) % 2)
                    T.gemm(A_s[s, :, :], B_s[s, :, :], C_l)
                    T.barrier_arrive(empty[s])
                T.copy(C_l, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[2])
def gemm_split_hints(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=3, threads=256, producer=None,
                     consumer=None, no_realloc=False, dtype=T.float16, accum_dtype=T.float32):
    """A pipelined GEMM that the compiler warp-specializes on sm_90a (its ``threads`` become the
    consumers of a producer warpgroup it adds), with the kernel's own register split: ``producer``
    / ``consumer`` registers per thread (``None``: the compiler's), or none moved (``no_realloc``)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            if producer is not None:
                T.annotate_producer_reg_dealloc(producer)
            if consumer is not None:
                T.annotate_consumer_reg_alloc(consumer)
            if no_realloc:
                T.disable_warp_group_reg_alloc()
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[1])
def rows_by_warpgroup(N, dtype=T.float32):
    """Per-thread code on the thread index: warpgroup 2 gives registers back and writes ``x + 1``
    into the third part of each 384-element tile, warpgroups 0 and 1 take them and write ``2 x``
    into the rest."""

    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, 384), threads=384) as bx:
            tx = T.get_thread_binding()
            i = bx * 384 + tx
            if tx >= 256:
                T.dec_max_nreg(24)
                if i < N:
                    Y[i] = X[i] + 1.0
            else:
                T.inc_max_nreg(240)
                if i < N:
                    Y[i] = X[i] * 2.0

    return main
