"""DeepSeek's native sparse attention (the selected-blocks branch), forward, written as TileLang's
examples/deepseek_nsa kernel is: one block per query token and KV head, whose ``G`` query heads
attend the ``selected_blocks`` key blocks ``BlockIndices`` names, each behind a run-time test."""

import torch

import tilelang_x as tilelang
from tilelang_x import language as T


@tilelang.jit(
    out_idx=[-1],
    pass_configs={
        tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True,
        tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True,
        tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True,
    },
)
def native_sparse_attention(batch, heads, seq_len, dim, is_causal, scale=None, block_size=64, groups=1,
                            selected_blocks=16, num_stages=2, threads=32):
    """Query ``t`` of KV head ``h`` attends the key blocks ``BlockIndices[b, t, h, :]`` (block ``i``
    holds keys ``i * block_size ...``); a block starting after ``t`` (padding indices point past
    the sequence) is skipped, and with ``is_causal`` keys after ``t`` are masked."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504 if scale is None else scale * 1.44269504  # log2(e)
    head_kv = heads // groups
    q_shape = [batch, seq_len, heads, dim]
    kv_shape = [batch, seq_len, head_kv, dim]
    block_indices_shape = [batch, seq_len, head_kv, selected_blocks]
    block_indices_dtype = "int32"
    dtype = "float16"
    accum_dtype = "float"
    block_S = block_size
    block_T = min(128, tilelang.math.next_power_of_2(dim))

    NK = tilelang.cdiv(dim, block_T)
    NV = tilelang.cdiv(dim, block_T)
    assert NK == 1, "one key tile covers the head dim"

    S = selected_blocks
    G = groups
    BS = block_S
    BK = BV = block_T

    @T.prim_func
    def main(
        Q: T.Tensor(q_shape, dtype),
        K: T.Tensor(kv_shape, dtype),
        V: T.Tensor(kv_shape, dtype),
        BlockIndices: T.Tensor(block_indices_shape, block_indices_dtype),
        Output: T.Tensor(q_shape, dtype),
    ):
        with T.Kernel(seq_len, NV, batch * head_kv, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([G, BK], dtype)
            K_shared = T.alloc_shared([BS, BK], dtype)
            V_shared = T.alloc_shared([BS, BV], dtype)
            O_shared = T.alloc_shared([G, BV], dtype)

            acc_s = T.alloc_fragment([G, BS], accum_dtype)
            acc_s_cast = T.alloc_fragment([G, BS], dtype)
            acc_o = T.alloc_fragment([G, BV], accum_dtype)
            scores_max = T.alloc_fragment([G], accum_dtype)
            scores_max_prev = T.alloc_fragment([G], accum_dtype)
            scores_scale = T.alloc_fragment([G], accum_dtype)
            scores_sum = T.alloc_fragment([G], accum_dtype)
            logsum = T.alloc_fragment([G], accum_dtype)

            i_t, i_v, i_bh = bx, by, bz
            i_b, i_h = i_bh // head_kv, i_bh % head_kv

            NS = S
            T.copy(Q[i_b, i_t, i_h * G:(i_h + 1) * G, :], Q_shared)

            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))

            for i in T.Pipelined(NS, num_stages=num_stages):
                i_s = BlockIndices[i_b, i_t, i_h, i] * BS
                if i_s <= i_t and i_s >= 0:
                    T.copy(K[i_b, i_s:i_s + BS, i_h, :], K_shared)

                    if is_causal:
                        for i, j in T.Parallel(G, BS):
                            acc_s[i, j] = T.if_then_else(i_t >= (i_s + j), 0, -T.infinity(acc_s.dtype))
                    else:
                        T.clear(acc_s)

                    T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)

                    # online softmax
                    T.copy(scores_max, scores_max_prev)
                    T.fill(scores_max, -T.infinity(accum_dtype))
                    T.reduce_max(acc_s, scores_max, dim=1, clear=True)
                    for i in T.Parallel(G):
                        scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                    for i, j in T.Parallel(G, BS):
                        acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                    T.reduce_sum(acc_s, scores_sum, dim=1)
                    for i in T.Parallel(G):
                        logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                    T.copy(acc_s, acc_s_cast)

                    for i, j in T.Parallel(G, BV):
                        acc_o[i, j] *= scores_scale[i]

                    T.copy(V[i_b, i_s:i_s + BS, i_h, i_v * BV:(i_v + 1) * BV], V_shared)
                    T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)

            for i, j in T.Parallel(G, BV):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[i_b, i_t, i_h * G:(i_h + 1) * G, i_v * BV:(i_v + 1) * BV])

    return main


@tilelang.jit(pass_configs={
    tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True,
    tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True,
    tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True,
})
def native_sparse_attention_varlen(batch, heads, c_seq_len, dim, is_causal, scale=None, block_size=64, groups=1,
                                   selected_blocks=16, num_stages=0, threads=32):
    """``native_sparse_attention`` over ``batch`` sequences packed into ``c_seq_len`` tokens (TileLang's
    example_tilelang_nsa_fwd_varlen.py): ``Offsets`` are where each sequence starts, ``TokenIndices``
    each packed token's (sequence, position), and token ``c`` attends only its first
    ``BlockCounts[c, h]`` selected blocks (a loop bound read from memory). ``O_slc`` is written in place."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504 if scale is None else scale * 1.44269504  # log2(e)
    head_kv = heads // groups
    dtype = T.float16
    accum_dtype = "float"
    block_T = min(128, tilelang.math.next_power_of_2(dim))
    NV = tilelang.cdiv(dim, block_T)
    assert tilelang.cdiv(dim, block_T) == 1, "one key tile covers the head dim"
    G = groups
    BS = block_size
    BK = BV = block_T

    @T.prim_func
    def main(
        Q: T.Tensor([c_seq_len, heads, dim], dtype),
        K: T.Tensor([c_seq_len, head_kv, dim], dtype),
        V: T.Tensor([c_seq_len, head_kv, dim], dtype),
        O_slc: T.Tensor([c_seq_len, heads, dim], dtype),
        BlockIndices: T.Tensor([c_seq_len, head_kv, selected_blocks], T.int32),
        BlockCounts: T.Tensor([c_seq_len, head_kv], T.int32),
        Offsets: T.Tensor([batch + 1], T.int32),
        TokenIndices: T.Tensor([c_seq_len, 2], T.int32),
    ):
        with T.Kernel(c_seq_len, NV, batch * head_kv, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([G, BK], dtype)
            K_shared = T.alloc_shared([BS, BK], dtype)
            V_shared = T.alloc_shared([BS, BV], dtype)
            O_shared = T.alloc_shared([G, BV], dtype)

            acc_s = T.alloc_fragment([G, BS], accum_dtype)
            acc_s_cast = T.alloc_fragment([G, BS], dtype)
            acc_o = T.alloc_fragment([G, BV], accum_dtype)
            scores_max = T.alloc_fragment([G], accum_dtype)
            scores_max_prev = T.alloc_fragment([G], accum_dtype)
            scores_scale = T.alloc_fragment([G], accum_dtype)
            scores_sum = T.alloc_fragment([G], accum_dtype)
            logsum = T.alloc_fragment([G], accum_dtype)

            i_c, i_v, i_bh = bx, by, bz
            i_h = i_bh % head_kv  # the example's blocks of every i_bh // head_kv compute the same tokens
            i_n, i_t = TokenIndices[i_c, 0], TokenIndices[i_c, 1]
            bos = Offsets[i_n]

            NS = BlockCounts[bos + i_t, i_h]
            T.copy(Q[bos + i_t, i_h * G:(i_h + 1) * G, :BK], Q_shared)

            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))

            for i in T.Pipelined(NS, num_stages=num_stages):
                i_s = BlockIndices[bos + i_t, i_h, i] * BS
                if i_s <= i_t and i_s >= 0:
                    T.copy(K[bos + i_s:bos + i_s + BS, i_h, :BK], K_shared)

                    if is_causal:
                        for i, j in T.Parallel(G, BS):
                            acc_s[i, j] = T.if_then_else(i_t >= (i_s + j), 0, -T.infinity(acc_s.dtype))
                    else:
                        T.clear(acc_s)

                    T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)

                    T.copy(scores_max, scores_max_prev)
                    T.fill(scores_max, -T.infinity(accum_dtype))
                    T.reduce_max(acc_s, scores_max, dim=1, clear=True)
                    for i in T.Parallel(G):
                        scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                    for i, j in T.Parallel(G, BS):
                        acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                    T.reduce_sum(acc_s, scores_sum, dim=1)
                    for i in T.Parallel(G):
                        logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                    T.copy(acc_s, acc_s_cast)

                    for i, j in T.Parallel(G, BV):
                        acc_o[i, j] *= scores_scale[i]

                    T.copy(V[bos + i_s:bos + i_s + BS, i_h, i_v * BV:(i_v + 1) * BV], V_shared)
                    T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)

            for i, j in T.Parallel(G, BV):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, O_slc[bos + i_t, i_h * G:(i_h + 1) * G, i_v * BV:(i_v + 1) * BV])

    return main


def run_nsa(device: str, batch: int, seq_len: int, heads: int, head_kv: int, dim: int, selected_blocks: int,
            block_size: int, is_causal: bool = True, scale: float | None = None,
            **tiles: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``native_sparse_attention`` on random inputs and ``random_block_indices`` against
    ``nsa_reference`` (float16)."""
    g = torch.Generator().manual_seed(62)
    q = torch.randn(batch, seq_len, heads, dim, generator=g).half().to(device)
    k, v = (torch.randn(batch, seq_len, head_kv, dim, generator=g).half().to(device) for _ in range(2))
    idx = random_block_indices(batch, seq_len, head_kv, selected_blocks, block_size, seed=63).to(device)
    kernel = native_sparse_attention(batch, heads, seq_len, dim, is_causal, scale=scale, block_size=block_size,
                                     groups=heads // head_kv, selected_blocks=selected_blocks, **tiles)
    return kernel(q, k, v, idx), nsa_reference(q, k, v, idx, block_size, scale, is_causal).half()


def random_block_indices(batch: int, seq_len: int, head_kv: int, selected_blocks: int, block_size: int,
                         seed: int = 0) -> torch.Tensor:
    """``[batch, seq_len, head_kv, selected_blocks]`` int32, sorted per row: for token ``t`` up to
    ``selected_blocks`` distinct random blocks among those before ``t``'s own (block 0 for the first
    block's tokens), the rest ``seq_len`` (past every token: skipped), as TileLang's example draws them."""
    blocks = max(1, seq_len // block_size)
    g = torch.Generator().manual_seed(seed)
    available = (torch.arange(seq_len) // block_size).clamp(min=1)  # blocks token t may choose from
    draw = torch.rand(batch, seq_len, head_kv, blocks, generator=g)
    draw.masked_fill_((torch.arange(blocks)[None, :] >= available[:, None])[None, :, None, :], -1.0)
    top, idx = draw.topk(min(selected_blocks, blocks), dim=-1)
    idx = idx.masked_fill(top < 0, seq_len)
    pad = torch.full((batch, seq_len, head_kv, selected_blocks - idx.shape[-1]), seq_len, dtype=idx.dtype)
    return torch.cat([idx, pad], -1).sort(-1)[0].to(torch.int32)


def nsa_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_indices: torch.Tensor, block_size: int,
                  scale: float | None = None, is_causal: bool = True) -> torch.Tensor:
    """Softmax attention of each query over the keys of its selected blocks that start at or before
    it (float32; ``q`` ``[B, T, HQ, D]``, ``k``/``v`` ``[B, T, H, D]``, ``block_indices`` ``[B, T, H, S]``)."""
    batch, seq_len, heads, dim = q.shape
    head_kv = k.shape[2]
    groups = heads // head_kv
    scale = dim ** -0.5 if scale is None else scale
    pos = torch.arange(seq_len, device=q.device)
    blocks = (seq_len + block_size - 1) // block_size
    starts = block_indices.long() * block_size
    taken = (starts <= pos[None, :, None, None]) & (block_indices >= 0)
    chosen = torch.zeros(batch, seq_len, head_kv, blocks + 1, dtype=torch.bool, device=q.device)
    chosen.scatter_(-1, torch.where(taken, block_indices.long().clamp(max=blocks), blocks), True)
    keep = chosen[..., pos // block_size]  # [B, T, H, keys]
    if is_causal:
        keep &= pos[None, None, None, :] <= pos[None, :, None, None]
    keep = keep.repeat_interleave(groups, dim=2).transpose(1, 2)  # [B, HQ, T, keys]
    qf = q.float().transpose(1, 2)
    kf, vf = (x.float().repeat_interleave(groups, dim=2).transpose(1, 2) for x in (k, v))
    scores = (qf @ kf.transpose(-1, -2) * scale).masked_fill(~keep, float("-inf"))
    return (torch.softmax(scores, -1) @ vf).transpose(1, 2)


def run_nsa_varlen(device: str, seq_lens: list[int], heads: int, head_kv: int, dim: int, selected_blocks: int,
                   block_size: int, **tiles: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``native_sparse_attention_varlen`` on sequences of ``seq_lens`` tokens packed together, each token
    choosing up to ``selected_blocks`` blocks among those up to its own and a random count of them to
    attend, as TileLang's example draws them, against softmax attention over exactly those keys
    (causal, within the token's sequence)."""
    g = torch.Generator().manual_seed(65)
    total = sum(seq_lens)
    offsets = torch.tensor([0, *seq_lens]).cumsum(0)
    seq_of = torch.repeat_interleave(torch.arange(len(seq_lens)), torch.tensor(seq_lens))
    local = torch.arange(total) - offsets[seq_of]  # each token's position in its sequence
    blocks = (max(seq_lens) + block_size - 1) // block_size
    draw = torch.rand(total, head_kv, blocks, generator=g)
    own = (local + block_size - 1) // block_size  # blocks starting at or before the token (at least 1)
    draw.masked_fill_((torch.arange(blocks)[None, :] >= own.clamp(min=1)[:, None])[:, None, :], -1.0)
    top, idx = draw.topk(min(selected_blocks, blocks), dim=-1)
    idx = torch.cat([idx.masked_fill(top < 0, total),
                     torch.full((total, head_kv, selected_blocks - idx.shape[-1]), total)], -1).sort(-1)[0]
    counts = torch.randint(1, selected_blocks + 1, (total, head_kv), generator=g)

    q = torch.randn(total, heads, dim, generator=g).half()
    k, v = (torch.randn(total, head_kv, dim, generator=g).half() for _ in range(2))
    out = torch.zeros(total, heads, dim, dtype=torch.float16, device=device)
    token_indices = torch.stack([seq_of, local], 1)
    kernel = native_sparse_attention_varlen(len(seq_lens), heads, total, dim, True, block_size=block_size,
                                            groups=heads // head_kv, selected_blocks=selected_blocks, **tiles)
    kernel(*(x.to(device) for x in (q, k, v)), out, idx.int().to(device), counts.int().to(device),
           offsets.int().to(device), token_indices.int().to(device))

    used = (torch.arange(selected_blocks)[None, None, :] < counts[..., None]) & \
        (idx * block_size <= local[:, None, None])
    chosen = torch.zeros(total, head_kv, total + 1, dtype=torch.bool)
    chosen.scatter_(-1, torch.where(used, idx, total), True)
    same_seq = seq_of[:, None] == seq_of[None, :]
    keep = chosen[..., local // block_size] & (same_seq & (local[None, :] <= local[:, None]))[:, None, :]
    keep = keep.repeat_interleave(heads // head_kv, dim=1)  # [tokens, heads, keys]
    kf, vf = (x.float().repeat_interleave(heads // head_kv, dim=1).transpose(0, 1) for x in (k, v))  # [heads, keys, D]
    scores = (q.float().transpose(0, 1) @ kf.transpose(-1, -2) * dim ** -0.5).masked_fill(~keep.transpose(0, 1),
                                                                                             float("-inf"))
    ref = (torch.softmax(scores, -1) @ vf).transpose(0, 1)
    return out, ref.half().to(device)
