"""FlashAttention backward (fp16, layout BHSD: [batch, heads, seq_len, dim]), written as TileLang's
``examples/flash_attention/example_mha_bwd_bhsd.py`` is: a forward that also writes each row's
log-sum-exp (base 2), a preprocess kernel ``Delta = rowsum(dO * O)``, the main kernel (one block
per key block, head and batch: dK and dV in registers, dQ added to a float32 tensor with
``T.atomic_add``) and a postprocess kernel converting dQ to fp16."""

from __future__ import annotations

from typing import Any

import tilelang_x as tilelang
import tilelang_x.language as T

from .attention import attend_query_block, softmax_state

LOG2E = 1.44269504


@tilelang.jit(out_idx=[3, 4])
def flash_attention_lse(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64, num_stages=1, threads=128):
    """``attention.flash_attention`` that also writes ``lse[b, h, i]``, the log2 of row ``i``'s
    softmax denominator plus its maximum score (both in units of ``scale``)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    shape = [batch, heads, seq_len, dim]
    dtype = T.float16
    accum_dtype = T.float32

    @T.prim_func
    def flash_fwd(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                  Output: T.Tensor(shape, dtype), lse: T.Tensor([batch, heads, seq_len], accum_dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            state = softmax_state(block_M, block_N, dim)
            acc_o, scores_max, logsum = state[2], state[3], state[7]
            attend_query_block(Q, K, V, Q_shared, K_shared, V_shared, state, bx, by, bz, seq_len, is_causal, scale,
                               num_stages)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, Output[bz, by, bx * block_M:(bx + 1) * block_M, :])
            for i in T.Parallel(block_M):
                logsum[i] = T.log2(logsum[i]) + scores_max[i] * scale
            T.copy(logsum, lse[bz, by, bx * block_M:(bx + 1) * block_M])

    return flash_fwd


@tilelang.jit(out_idx=[2])
def flash_bwd_preprocess(batch, heads, seq_len, dim, blk=32):
    """``Delta[b, h, i] = sum_d Out[b, h, i, d] * dO[b, h, i, d]`` in float32."""
    shape = [batch, heads, seq_len, dim]
    dtype = T.float16
    accum_dtype = T.float32

    @T.prim_func
    def flash_bwd_prep(Out: T.Tensor(shape, dtype), dO: T.Tensor(shape, dtype),
                       Delta: T.Tensor([batch, heads, seq_len], accum_dtype)):
        with T.Kernel(heads, T.ceildiv(seq_len, blk), batch) as (bx, by, bz):
            o = T.alloc_fragment([blk, blk], dtype)
            do = T.alloc_fragment([blk, blk], dtype)
            acc = T.alloc_fragment([blk, blk], accum_dtype)
            delta = T.alloc_fragment([blk], accum_dtype)
            T.clear(acc)
            for k in range(T.ceildiv(dim, blk)):
                T.copy(Out[bz, bx, by * blk:(by + 1) * blk, k * blk:(k + 1) * blk], o)
                T.copy(dO[bz, bx, by * blk:(by + 1) * blk, k * blk:(k + 1) * blk], do)
                for i, j in T.Parallel(blk, blk):
                    acc[i, j] += o[i, j] * do[i, j]
            T.reduce_sum(acc, delta, 1)
            T.copy(delta, Delta[bz, bx, by * blk:(by + 1) * blk])

    return flash_bwd_prep


def make_dq_layout(dQ):
    """TileLang's placement of the float32 dQ in memory: each 8 x 8 block of (rows, head dims)
    together, in the order of the mma fragment, for the atomics. Layouts never change results:
    the CUDA backend keeps global tensors row-major."""
    return T.Layout(dQ.shape, lambda b, h, s, d: [b, h, s // 8, d // 8, d % 2, 4 * (s % 8) + (d % 8) // 2])


@tilelang.jit(out_idx=[1])
def flash_bwd_postprocess(batch, heads, seq_len, dim, blk=64):
    """dQ accumulated in float32 converted to fp16."""
    shape = [batch, heads, seq_len, dim]

    @T.prim_func
    def flash_bwd_post(dQ: T.Tensor(shape, T.float32), dQ_out: T.Tensor(shape, T.float16)):
        with T.Kernel(T.ceildiv(seq_len, blk), heads, batch, threads=128) as (bx, by, bz):
            T.annotate_layout({dQ: make_dq_layout(dQ)})
            T.copy(dQ[bz, by, bx * blk:(bx + 1) * blk, :], dQ_out[bz, by, bx * blk:(bx + 1) * blk, :])

    return flash_bwd_post


@tilelang.jit(out_idx=[7, 8])
def flash_bwd(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64, num_stages=2, threads=128,
              tile_atomic=True, wgmma_pipelined=False):
    """dK and dV of one block of ``block_M`` keys (K and V tiles loaded once) over the query blocks
    that see it, ``block_N`` rows at a time; each query block's part of dQ is added to the float32
    ``dQ`` (zeroed by the caller) atomically: one ``T.atomic_add`` of the tile (TileLang's newer
    examples), or with ``tile_atomic=False`` one per element in a ``T.Parallel`` loop (its older ones).
    ``wgmma_pipelined``: the loop as TileLang's ``example_mha_bwd_wgmma_pipelined`` writes it (both
    first gemms issued before the softmax, ``wg_wait`` and ``T.wait_wgmma`` placing the waits)."""
    sm_scale = (1.0 / dim) ** 0.5
    scale = sm_scale * LOG2E
    shape = [batch, heads, seq_len, dim]
    dtype = T.float16
    accum_dtype = T.float32

    @T.macro
    def probabilities(lse, lse_shared, qkT, bx, by, bz, k):
        """qkT: the scores of key block ``by`` and query block ``k`` as probabilities (causal: masked)."""
        T.copy(lse[bz, bx, k * block_N:(k + 1) * block_N], lse_shared)
        for i, j in T.Parallel(block_M, block_N):
            qkT[i, j] = T.exp2(qkT[i, j] * scale - lse_shared[j])
        if is_causal:
            for i, j in T.Parallel(block_M, block_N):
                qkT[i, j] = T.if_then_else(by * block_M + i <= k * block_N + j, qkT[i, j], 0)

    @T.prim_func
    def flash_bwd_main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                       dO: T.Tensor(shape, dtype), lse: T.Tensor([batch, heads, seq_len], accum_dtype),
                       Delta: T.Tensor([batch, heads, seq_len], accum_dtype), dQ: T.Tensor(shape, accum_dtype),
                       dK: T.Tensor(shape, dtype), dV: T.Tensor(shape, dtype)):
        with T.Kernel(heads, T.ceildiv(seq_len, block_M), batch, threads=threads) as (bx, by, bz):
            K_shared = T.alloc_shared([block_M, dim], dtype)
            V_shared = T.alloc_shared([block_M, dim], dtype)
            q = T.alloc_shared([block_N, dim], dtype)
            do = T.alloc_shared([block_N, dim], dtype)
            dsT_shared = T.alloc_shared([block_M, block_N], dtype)
            lse_shared = T.alloc_shared([block_N], accum_dtype)
            delta = T.alloc_shared([block_N], accum_dtype)
            qkT = T.alloc_fragment([block_M, block_N], accum_dtype)
            dsT = T.alloc_fragment([block_M, block_N], accum_dtype)
            qkT_cast = T.alloc_fragment([block_M, block_N], dtype)
            dsT_cast = T.alloc_fragment([block_M, block_N], dtype)
            dv = T.alloc_fragment([block_M, dim], accum_dtype)
            dk = T.alloc_fragment([block_M, dim], accum_dtype)
            dq = T.alloc_fragment([block_N, dim], accum_dtype)
            dv_shared = T.alloc_shared([block_M, dim], dtype)
            dk_shared = T.alloc_shared([block_M, dim], dtype)

            T.annotate_layout({
                dQ: make_dq_layout(dQ),
                K_shared: tilelang.layout.make_swizzled_layout(K_shared),
                dv_shared: tilelang.layout.make_swizzled_layout(dv_shared),
                dk_shared: tilelang.layout.make_swizzled_layout(dk_shared),
            })
            T.copy(K[bz, bx, by * block_M:(by + 1) * block_M, :], K_shared)
            T.copy(V[bz, bx, by * block_M:(by + 1) * block_M, :], V_shared)
            T.clear(dv)
            T.clear(dk)
            loop_st = T.floordiv(by * block_M, block_N) if is_causal else 0
            loop_ed = T.ceildiv(seq_len, block_N)
            for k in T.Pipelined(loop_st, loop_ed, num_stages=num_stages):
                if wgmma_pipelined:
                    T.copy(Q[bz, bx, k * block_N:(k + 1) * block_N, :], q)
                    T.clear(qkT)
                    T.gemm(K_shared, q, qkT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow, wg_wait=-1)
                    T.copy(dO[bz, bx, k * block_N:(k + 1) * block_N, :], do)
                    T.clear(dsT)
                    T.gemm(V_shared, do, dsT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow, wg_wait=-1)
                    T.wait_wgmma(1)
                    probabilities(lse, lse_shared, qkT, bx, by, bz, k)
                    T.wait_wgmma(0)
                    T.copy(qkT, qkT_cast)
                    T.gemm(qkT_cast, do, dv, policy=T.GemmWarpPolicy.FullRow, wg_wait=-1)
                    T.copy(Delta[bz, bx, k * block_N:(k + 1) * block_N], delta)
                    for i, j in T.Parallel(block_M, block_N):
                        dsT_cast[i, j] = qkT[i, j] * (dsT[i, j] - delta[j]) * sm_scale
                    T.gemm(dsT_cast, q, dk, policy=T.GemmWarpPolicy.FullRow, wg_wait=1)
                    T.copy(dsT_cast, dsT_shared)
                    T.clear(dq)
                    T.gemm(dsT_shared, K_shared, dq, transpose_A=True, wg_wait=1)
                    T.wait_wgmma(0)
                    T.atomic_add(dQ[bz, bx, k * block_N:(k + 1) * block_N, :], dq)
                else:
                    T.copy(Q[bz, bx, k * block_N:(k + 1) * block_N, :], q)
                    T.clear(qkT)
                    T.gemm(K_shared, q, qkT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                    probabilities(lse, lse_shared, qkT, bx, by, bz, k)
                    T.copy(dO[bz, bx, k * block_N:(k + 1) * block_N, :], do)
                    T.clear(dsT)
                    T.gemm(V_shared, do, dsT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                    T.copy(qkT, qkT_cast)
                    T.gemm(qkT_cast, do, dv, policy=T.GemmWarpPolicy.FullRow)
                    T.copy(Delta[bz, bx, k * block_N:(k + 1) * block_N], delta)
                    for i, j in T.Parallel(block_M, block_N):
                        dsT_cast[i, j] = qkT[i, j] * (dsT[i, j] - delta[j]) * sm_scale
                    T.gemm(dsT_cast, q, dk, policy=T.GemmWarpPolicy.FullRow)
                    T.copy(dsT_cast, dsT_shared)
                    T.clear(dq)
                    T.gemm(dsT_shared, K_shared, dq, transpose_A=True)
                    if tile_atomic:
                        T.atomic_add(dQ[bz, bx, k * block_N:(k + 1) * block_N, :], dq)
                    else:
                        for i, j in T.Parallel(block_N, dim):
                            T.atomic_add(dQ[bz, bx, k * block_N + i, j], dq[i, j])
            T.copy(dv, dv_shared)
            T.copy(dk, dk_shared)
            T.copy(dv_shared, dV[bz, bx, by * block_M:(by + 1) * block_M, :])
            T.copy(dk_shared, dK[bz, bx, by * block_M:(by + 1) * block_M, :])

    return flash_bwd_main


def attention_backward(q: Any, k: Any, v: Any, o: Any, lse: Any, do: Any, is_causal: bool, block_M: int = 64,
                       block_N: int = 64, num_stages: int = 2, threads: int = 128,
                       tile_atomic: bool = True, wgmma_pipelined: bool = False) -> tuple[Any, Any, Any]:
    """(dQ, dK, dV) of attention over BHSD fp16 tensors, given the forward's output ``o`` and its
    ``lse`` (``flash_attention_lse``) and the output's gradient ``do``: preprocess, main kernel,
    postprocess."""
    import torch

    batch, heads, seq_len, dim = q.shape
    delta = flash_bwd_preprocess(batch, heads, seq_len, dim)(o, do)
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    main = flash_bwd(batch, heads, seq_len, dim, is_causal, block_M=block_M, block_N=block_N,
                     num_stages=num_stages, threads=threads, tile_atomic=tile_atomic, wgmma_pipelined=wgmma_pipelined)
    dk, dv = main(q, k, v, do, lse, delta, dq)
    return flash_bwd_postprocess(batch, heads, seq_len, dim)(dq), dk, dv
