"""Chunked linear attention and Mamba-2's chunk scan, written as TileLang's
examples/linear_attention kernels are: a classic ``@T.prim_func`` factory, TileLang's pass-config
strings, swizzle annotations, a state carried across the chunks of a ``T.Pipelined`` loop."""

import torch

import tilelang_x as tl
import tilelang_x.language as T


@tl.jit(out_idx=[3, 4], pass_configs={"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True})
def chunk_linear_attn_fwd(B, S, H, DK, DV, dtype="float16", scale=None, chunk_size=64, BK=64, BV=64):
    """Causal linear attention without normalization, one chunk of ``chunk_size`` tokens per step:
    ``o = (q kᵀ ⊙ causal) v + q h`` then ``h += kᵀ v``; each of the ``NK`` key slices writes its own
    partial output (summed on the host), the last ``h`` is the final state."""
    if scale is None:
        scale = DK ** -0.5
    accum_dtype = "float"
    assert S % chunk_size == 0 and DK % BK == 0 and DV % BV == 0
    NK = tl.cdiv(DK, BK)
    NV = tl.cdiv(DV, BV)
    NT = tl.cdiv(S, chunk_size)

    @T.prim_func
    def main(Q: T.Tensor([B, S, H, DK], dtype), K: T.Tensor([B, S, H, DK], dtype),
             V: T.Tensor([B, S, H, DV], dtype), O: T.Tensor([NK, B, S, H, DV], dtype),  # noqa: E741 (the example's name)
             final_state: T.Tensor([B, H, DK, DV], accum_dtype)):
        with T.Kernel(NV, NK, B * H) as (i_v, i_k, i_bh):
            i_b = i_bh // H
            i_h = i_bh % H

            q = T.alloc_shared([chunk_size, BK], dtype)
            k = T.alloc_shared([chunk_size, BK], dtype)
            v = T.alloc_shared([chunk_size, BV], dtype)
            h = T.alloc_fragment([BK, BV], accum_dtype)
            h_shared = T.alloc_shared([BK, BV], dtype)
            s = T.alloc_fragment([chunk_size, chunk_size], accum_dtype)
            s_shared = T.alloc_shared([chunk_size, chunk_size], dtype)
            o = T.alloc_fragment([chunk_size, BV], accum_dtype)
            T.clear(h)

            T.annotate_layout({
                q: tl.layout.make_swizzled_layout(q),
                k: tl.layout.make_swizzled_layout(k),
                v: tl.layout.make_swizzled_layout(v),
                h_shared: tl.layout.make_swizzled_layout(h_shared),
                s_shared: tl.layout.make_swizzled_layout(s_shared),
            })
            T.use_swizzle(10)

            for i in T.Pipelined(0, NT, num_stages=2):
                for row, col in T.Parallel(chunk_size, BK):
                    q[row, col] = Q[i_b, i * chunk_size + row, i_h, i_k * BK + col] * scale
                T.copy(K[i_b, i * chunk_size:(i + 1) * chunk_size, i_h, i_k * BK:(i_k + 1) * BK], k)
                T.copy(V[i_b, i * chunk_size:(i + 1) * chunk_size, i_h, i_v * BV:(i_v + 1) * BV], v)

                T.gemm(q, k, s, clear_accum=True, transpose_B=True)
                for row, col in T.Parallel(chunk_size, chunk_size):
                    s_shared[row, col] = T.if_then_else(row >= col, s[row, col], 0)

                T.gemm(s_shared, v, o, clear_accum=True)
                T.copy(h, h_shared)
                T.gemm(k, v, h, transpose_A=True)
                T.gemm(q, h_shared, o)
                T.copy(o, O[i_k, i_b, i * chunk_size:(i + 1) * chunk_size, i_h, i_v * BV:(i_v + 1) * BV])

            T.copy(h, final_state[i_b, i_h, i_k * BK:(i_k + 1) * BK, i_v * BV:(i_v + 1) * BV])

    return main


def run_linear_attn(device: str, B: int, S: int, H: int, D: int, **tiles: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``chunk_linear_attn_fwd`` on random inputs (its key slices summed, as TileLang's example
    does) against ``linear_attn_reference``: the outputs then the final states, flattened, float32."""
    g = torch.Generator().manual_seed(60)
    q, k, v = (torch.randn(B, S, H, D, generator=g).half().to(device) for _ in range(3))
    o, h = chunk_linear_attn_fwd(B, S, H, D, D, **tiles)(q, k, v)
    ref_o, ref_h = linear_attn_reference(q, k, v)
    return torch.cat([o.float().sum(0).flatten(), h.flatten()]), torch.cat([ref_o.flatten(), ref_h.flatten()])


def linear_attn_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                          scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal unnormalized linear attention in float32 (``[B, S, H, D]`` tensors): the output
    ``o_t = Σ_{s ≤ t} (q_t · k_s) v_s`` (``q`` scaled by ``scale``) and the final state ``Σ_s k_sᵀ v_s``."""
    qf, kf, vf = (x.float().transpose(1, 2) for x in (q, k, v))  # [B, H, S, D]
    qf = qf * (q.shape[-1] ** -0.5 if scale is None else scale)
    scores = (qf @ kf.transpose(-1, -2)).tril()
    o = (scores @ vf).transpose(1, 2)
    return o, kf.transpose(-1, -2) @ vf


@tl.jit(out_idx=[7])
def chunk_scan_fwd(batch, seqlen, chunk_size, ngroups, nheads, headdim, dstate, block_M=64, block_N=64, block_K=64,
                   block_Dstate=128, num_stages=2, threads=128):
    """Mamba-2's SSD chunk scan: each chunk's output is the intra-chunk part (``cb`` decayed by
    ``exp(dA_cs[l] - dA_cs[s])``, scaled by ``dt``, causal, times ``x``) plus the previous chunks'
    state read through ``C`` (decayed by ``exp(dA_cs[l])``) plus the skip ``D * x``."""
    dtype = "float16"
    accum_dtype = "float"
    nchunks = T.ceildiv(seqlen, chunk_size)
    p = 1.44269504

    @T.prim_func
    def main(cb: T.Tensor((batch, nchunks, ngroups, chunk_size, chunk_size), dtype),
             x: T.Tensor((batch, seqlen, nheads, headdim), dtype),
             dt: T.Tensor((batch, nheads, nchunks, chunk_size), dtype),
             dA_cumsum: T.Tensor((batch, nheads, nchunks, chunk_size), dtype),
             C: T.Tensor((batch, seqlen, ngroups, dstate), dtype),
             prev_states: T.Tensor((batch, nchunks, nheads, headdim, dstate), dtype),
             D: T.Tensor((nheads), dtype),
             Output: T.Tensor((batch, seqlen, nheads, headdim), dtype)):
        with T.Kernel(nheads, T.ceildiv(chunk_size, block_M) * T.ceildiv(headdim, block_N), batch * nchunks,
                      threads=threads) as (bz, bx, by):
            acc_o = T.alloc_fragment((block_M, block_N), accum_dtype)
            acc_o_shared = T.alloc_shared((block_M, block_N), dtype)
            cb_shared = T.alloc_shared((block_M, block_K), dtype, scope="shared.dyn")
            cb_local = T.alloc_fragment((block_M, block_K), dtype)
            dA_cs_k_shared = T.alloc_shared((block_K), dtype, scope="shared")
            dA_cs_k_local = T.alloc_fragment((block_K), accum_dtype)
            dA_cs_m_local = T.alloc_fragment((block_M), accum_dtype)
            dt_shared = T.alloc_shared((block_K), dtype, scope="shared")
            dt_local = T.alloc_fragment((block_K), accum_dtype)
            x_shared = T.alloc_shared((block_K, block_N), dtype, scope="shared.dyn")
            dA_cs_m_shared = T.alloc_shared((block_M), dtype, scope="shared")
            scale_m_local = T.alloc_fragment((block_M), accum_dtype)
            C_shared = T.alloc_shared((block_M, block_Dstate), dtype)
            prev_state_shared = T.alloc_shared((block_N, block_Dstate), dtype)
            D_local = T.alloc_fragment((1), accum_dtype)
            x_residual_shared = T.alloc_shared((block_M, block_N), dtype, scope="shared.dyn")
            x_residual_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            batch_idx = by % batch
            chunk_idx = by // batch
            m_idx = bx // T.ceildiv(headdim, block_N)  # rows of the chunk
            n_idx = bx % T.ceildiv(headdim, block_N)  # columns of headdim

            T.annotate_layout({
                acc_o_shared: tl.layout.make_swizzled_layout(acc_o_shared),
                cb_shared: tl.layout.make_swizzled_layout(cb_shared),
                x_residual_shared: tl.layout.make_swizzled_layout(x_residual_shared),
            })

            T.copy(dA_cumsum[batch_idx, bz, chunk_idx, m_idx * block_M:(m_idx + 1) * block_M], dA_cs_m_shared)
            T.copy(dA_cs_m_shared, dA_cs_m_local)
            T.clear(acc_o)

            for i in T.Parallel(block_M):
                scale_m_local[i] = T.exp2(dA_cs_m_local[i] * p)
            row0 = chunk_idx * chunk_size + m_idx * block_M
            T.copy(C[batch_idx, row0:row0 + block_M, bz // (nheads // ngroups), 0:block_Dstate], C_shared)
            T.copy(prev_states[batch_idx, chunk_idx, bz, n_idx * block_N:(n_idx + 1) * block_N, 0:block_Dstate],
                   prev_state_shared)
            T.gemm(C_shared, prev_state_shared, acc_o, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                acc_o[i, j] *= scale_m_local[i]

            loop_range = T.ceildiv((m_idx + 1) * block_M, block_K)  # the causal part of the chunk only

            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(cb[batch_idx, chunk_idx, bz // (nheads // ngroups), m_idx * block_M:(m_idx + 1) * block_M,
                          k * block_K:(k + 1) * block_K], cb_shared)
                T.copy(cb_shared, cb_local)
                T.copy(dA_cumsum[batch_idx, bz, chunk_idx, k * block_K:(k + 1) * block_K], dA_cs_k_shared)
                T.copy(dA_cs_k_shared, dA_cs_k_local)
                for i, j in T.Parallel(block_M, block_K):
                    cb_local[i, j] = cb_local[i, j] * T.exp2(dA_cs_m_local[i] * p - dA_cs_k_local[j] * p)
                T.copy(dt[batch_idx, bz, chunk_idx, k * block_K:(k + 1) * block_K], dt_shared)
                T.copy(dt_shared, dt_local)
                for i, j in T.Parallel(block_M, block_K):
                    cb_local[i, j] *= dt_local[j]
                for i, j in T.Parallel(block_M, block_K):
                    cb_local[i, j] = T.if_then_else(m_idx * block_M + i >= k * block_K + j, cb_local[i, j], 0)
                T.copy(x[batch_idx, chunk_idx * chunk_size + k * block_K:chunk_idx * chunk_size + (k + 1) * block_K,
                         bz, n_idx * block_N:(n_idx + 1) * block_N], x_shared)
                T.gemm(cb_local, x_shared, acc_o)

            D_local[0] = D[bz]
            T.copy(x[batch_idx, row0:row0 + block_M, bz, n_idx * block_N:(n_idx + 1) * block_N], x_residual_shared)
            T.copy(x_residual_shared, x_residual_local)
            for i, j in T.Parallel(block_M, block_N):
                acc_o[i, j] += x_residual_local[i, j] * D_local[0]

            T.copy(acc_o, acc_o_shared)
            T.copy(acc_o_shared, Output[batch_idx, chunk_idx * chunk_size + m_idx * block_M:chunk_idx * chunk_size
                                        + (m_idx + 1) * block_M, bz, n_idx * block_N:(n_idx + 1) * block_N])

    return main


def chunk_scan_inputs(batch: int, seqlen: int, chunk_size: int, ngroups: int, nheads: int, headdim: int, dstate: int,
                      device: str, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """``chunk_scan_fwd``'s inputs (float16): ``dA_cumsum`` a running sum of negative steps along
    each chunk, as Mamba-2 makes it, so the decays stay in (0, 1]."""
    g = torch.Generator().manual_seed(seed)
    nchunks = seqlen // chunk_size

    def randn(*shape: int, std: float = 1.0) -> torch.Tensor:
        return (torch.randn(*shape, generator=g) * std).half().to(device)

    cb = randn(batch, nchunks, ngroups, chunk_size, chunk_size, std=0.5)
    x = randn(batch, seqlen, nheads, headdim)
    dt = (torch.rand(batch, nheads, nchunks, chunk_size, generator=g) * 0.1).half().to(device)
    decay = torch.rand(batch, nheads, nchunks, chunk_size, generator=g) * 0.05
    dA_cumsum = (-decay.cumsum(-1)).half().to(device)
    C = randn(batch, seqlen, ngroups, dstate, std=0.5)
    prev_states = randn(batch, nchunks, nheads, headdim, dstate, std=0.1)
    D = randn(nheads)
    return cb, x, dt, dA_cumsum, C, prev_states, D


def run_chunk_scan(device: str, batch: int, seqlen: int, chunk_size: int, ngroups: int, nheads: int, headdim: int,
                   dstate: int, **tiles: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``chunk_scan_fwd`` on ``chunk_scan_inputs`` against ``chunk_scan_reference`` (float16)."""
    sizes = (batch, seqlen, chunk_size, ngroups, nheads, headdim, dstate)
    inputs = chunk_scan_inputs(*sizes, device=device, seed=61)
    return chunk_scan_fwd(*sizes, **tiles)(*inputs), chunk_scan_reference(*inputs).half()


def chunk_scan_reference(cb: torch.Tensor, x: torch.Tensor, dt: torch.Tensor, dA_cumsum: torch.Tensor,
                         C: torch.Tensor, prev_states: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
    """``chunk_scan_fwd`` in float32 torch (the kernel's dataflow, unfused)."""
    batch, seqlen, nheads, headdim = x.shape
    _, nchunks, ngroups, chunk_size, _ = cb.shape
    rep = nheads // ngroups
    cbf = cb.float().repeat_interleave(rep, dim=2)  # [b, c, h, l, s]
    Cf = C.float().repeat_interleave(rep, dim=2).reshape(batch, nchunks, chunk_size, nheads, -1)
    xf = x.float().reshape(batch, nchunks, chunk_size, nheads, headdim)
    dA = dA_cumsum.float().permute(0, 2, 1, 3)  # [b, c, h, l]
    decay = torch.exp(dA[..., :, None] - dA[..., None, :])
    causal = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=x.device).tril()
    scores = (cbf * decay * dt.float().permute(0, 2, 1, 3)[..., None, :]).masked_fill(~causal, 0)
    intra = torch.einsum("bchls,bcshp->bclhp", scores, xf)
    inter = torch.einsum("bclhn,bchpn->bclhp", Cf, prev_states.float()) * torch.exp(dA).permute(0, 1, 3, 2)[..., None]
    out = (intra + inter).reshape(batch, seqlen, nheads, headdim) + x.float() * D.float()[:, None]
    return out


@tl.jit(out_idx=[-3, -2, -1], pass_configs={tl.PassConfigKey.TL_ENABLE_FAST_MATH: True})
def chunk_gated_delta_rule_fwd_h(B, S, H, DK, DV, input_dtype, output_dtype, accum_dtype, gate_dtype, state_dtype,
                                 chunk_size, use_g, use_initial_state, store_final_state, save_new_value,
                                 block_DK=64, block_DV=32, threads=128, num_stages=1):
    """Gated DeltaNet's chunk recurrence (TileLang's examples/gdn/example_chunk_delta_h.py): per chunk
    the state so far goes to ``h``, ``V_new = U - W h`` (decayed by the gates ``G`` to the chunk's end),
    then ``h = exp(g_last) h + Kᵀ V_new``."""
    block_S = chunk_size
    BS = S // block_S

    @T.prim_func
    def main(
        K: T.Tensor((B, S, H, DK), dtype=input_dtype),
        W: T.Tensor((B, S, H, DK), dtype=input_dtype),
        U: T.Tensor((B, S, H, DV), dtype=input_dtype),
        G: T.Tensor((B, S, H), dtype=gate_dtype),
        initial_state: T.Tensor((B, H, DK, DV), dtype=input_dtype),
        h: T.Tensor((B, BS, H, DK, DV), dtype=output_dtype),
        final_state: T.Tensor((B, H, DK, DV), dtype=state_dtype),
        V_new: T.Tensor((B, S, H, DV), dtype=output_dtype),
    ):
        with T.Kernel(T.ceildiv(DV, block_DV), B * H, threads=threads) as (bv, bbh):
            bb, bh = bbh // H, bbh % H

            b_h_shared = T.alloc_shared((DK, block_DV), dtype=input_dtype)
            b_h_fragment = T.alloc_fragment((DK, block_DV), dtype=accum_dtype)
            U_shared = T.alloc_shared((block_S, block_DV), dtype=input_dtype)
            U_fragment = T.alloc_fragment((block_S, block_DV), dtype=accum_dtype)
            W_shared = T.alloc_shared((block_S, DK), dtype=input_dtype)
            V_new_fragment = T.alloc_fragment((block_S, block_DV), dtype=accum_dtype)
            V_new_shared = T.alloc_shared((block_S, block_DV), dtype=output_dtype)
            K_shared = T.alloc_shared((block_S, DK), dtype=input_dtype)
            G_last_local = T.alloc_local((1), dtype=gate_dtype)
            G_shared = T.alloc_shared((block_S, block_DV), dtype=gate_dtype)
            G_fragment = T.alloc_fragment((block_S, block_DV), dtype=gate_dtype)

            T.annotate_layout({
                b_h_shared: tl.layout.make_swizzled_layout(b_h_shared),
                U_shared: tl.layout.make_swizzled_layout(U_shared),
                W_shared: tl.layout.make_swizzled_layout(W_shared),
                V_new_shared: tl.layout.make_swizzled_layout(V_new_shared),
                K_shared: tl.layout.make_swizzled_layout(K_shared),
                G_shared: tl.layout.make_swizzled_layout(G_shared),
            })
            T.use_swizzle(10)

            if use_initial_state:
                T.copy(initial_state[bb, bh, 0:DK, bv * block_DV:(bv + 1) * block_DV], b_h_shared)
                T.copy(b_h_shared, b_h_fragment)
            else:
                T.clear(b_h_fragment)

            for i_s in T.Pipelined(T.ceildiv(S, block_S), num_stages=num_stages):
                # the state before this chunk
                T.copy(b_h_shared, h[bb, i_s, bh, 0:DK, bv * block_DV:(bv + 1) * block_DV])

                T.copy(W[bb, i_s * block_S:(i_s + 1) * block_S, bh, 0:DK], W_shared)
                T.gemm(W_shared, b_h_shared, V_new_fragment, clear_accum=True)

                T.copy(U[bb, i_s * block_S:(i_s + 1) * block_S, bh, bv * block_DV:(bv + 1) * block_DV], U_shared)
                T.copy(U_shared, U_fragment)
                for i_s2, i_v in T.Parallel(block_S, block_DV):
                    V_new_fragment[i_s2, i_v] = -V_new_fragment[i_s2, i_v] + U_fragment[i_s2, i_v]

                if save_new_value:
                    T.copy(V_new_fragment, dst=V_new_shared)
                    T.copy(V_new_shared, V_new[bb, i_s * block_S:(i_s + 1) * block_S, bh,
                                               bv * block_DV:(bv + 1) * block_DV])

                T.copy(K[bb, i_s * block_S:(i_s + 1) * block_S, bh, 0:DK], K_shared)
                if use_g:
                    G_last_local[0] = G[bb, (i_s + 1) * block_S - 1, bh]
                    for i_s2, i_v in T.Parallel(block_S, block_DV):
                        G_shared[i_s2, i_v] = G[bb, i_s * block_S + i_s2, bh]
                    T.copy(G_shared, G_fragment)
                    for i_s2, i_v in T.Parallel(block_S, block_DV):
                        with T.If(G_last_local[0] - G_fragment[i_s2, i_v] <= 0):
                            with T.Then():
                                V_new_fragment[i_s2, i_v] = V_new_fragment[i_s2, i_v] * T.exp2(
                                    (G_last_local[0] - G_fragment[i_s2, i_v]) * 1.442695)
                            with T.Else():
                                V_new_fragment[i_s2, i_v] = 0
                    G_last_local[0] = T.exp2(G_last_local[0] * 1.442695)
                    for i_k, i_v in T.Parallel(DK, block_DV):
                        b_h_fragment[i_k, i_v] *= G_last_local[0]

                T.copy(V_new_fragment, V_new_shared)
                T.gemm(K_shared, V_new_shared, b_h_fragment, transpose_A=True)
                T.copy(b_h_fragment, b_h_shared)

            if store_final_state:
                T.copy(b_h_fragment, final_state[bb, bh, 0:DK, bv * block_DV:(bv + 1) * block_DV])

    return main


def gated_delta_h_inputs(B: int, S: int, H: int, DK: int, DV: int, chunk_size: int, device: str,
                         dtype: torch.dtype = torch.bfloat16, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """``chunk_gated_delta_rule_fwd_h``'s inputs as TileLang's example makes them: K, W, U rows of unit
    norm, the gates a chunk-local cumulative sum of log-sigmoids (float32), a random initial state."""
    g = torch.Generator().manual_seed(seed)

    def unit_rows(d: int) -> torch.Tensor:
        return torch.nn.functional.normalize(torch.randn(B, S, H, d, generator=g), dim=-1).to(dtype).to(device)

    k, w, u = unit_rows(DK), unit_rows(DK), unit_rows(DV)
    gates = torch.nn.functional.logsigmoid(torch.randn(B, S, H, generator=g))
    gates = gates.reshape(B, S // chunk_size, chunk_size, H).cumsum(2).reshape(B, S, H).to(device)
    initial_state = torch.randn(B, H, DK, DV, generator=g).to(dtype).to(device)
    return k, w, u, gates, initial_state


def run_gated_delta_h(device: str, B: int, S: int, H: int, DK: int, DV: int, chunk_size: int = 64,
                      dtype: str = "bfloat16", **tiles: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``chunk_gated_delta_rule_fwd_h`` with gates, an initial state, the final state and the new values
    against ``gated_delta_h_reference``: ``h``, the final state and ``V_new``, flattened, float32."""
    inputs = gated_delta_h_inputs(B, S, H, DK, DV, chunk_size, device, dtype=getattr(torch, dtype), seed=64)
    kernel = chunk_gated_delta_rule_fwd_h(B, S, H, DK, DV, dtype, dtype, "float32", "float32", "float32", chunk_size,
                                          True, True, True, True, **tiles)
    actual = kernel(*inputs)
    expected = gated_delta_h_reference(*inputs, chunk_size)
    return (torch.cat([x.float().flatten() for x in actual]),
            torch.cat([e.to(a.dtype).float().flatten() for a, e in zip(actual, expected)]))


def gated_delta_h_reference(k: torch.Tensor, w: torch.Tensor, u: torch.Tensor, gates: torch.Tensor,
                            initial_state: torch.Tensor, chunk_size: int) -> tuple[torch.Tensor, ...]:
    """The recurrence in float32, rounding the state and the new values where the kernel stages them
    through shared memory (input dtype): ``h`` per chunk, the final state, ``V_new``."""
    B, S, H, _ = k.shape
    dtype = k.dtype
    state = initial_state.float()  # [B, H, DK, DV]
    hs, v_new = [], torch.empty(B, S, H, u.shape[-1], device=k.device)
    for c in range(S // chunk_size):
        t = slice(c * chunk_size, (c + 1) * chunk_size)
        staged = state.to(dtype).float()
        hs.append(staged)
        kc, wc, uc = (x[:, t].float().transpose(1, 2) for x in (k, w, u))  # [B, H, chunk, D]
        v = uc - wc @ staged
        v_new[:, t] = v.transpose(1, 2)
        gc = gates[:, t].float().transpose(1, 2)  # [B, H, chunk]
        last = gc[..., -1:]
        v = v * torch.exp(last - gc)[..., None]
        state = state * torch.exp(last)[..., None] + kc.transpose(-1, -2) @ v.to(dtype).float()
    return torch.stack(hs, 1), state, v_new
