import tilelang_x as tilelang
import tilelang_x.language as T


@T.macro
def softmax_state(rows, cols, dim):
    """The fragments ``online_softmax`` works on, for ``rows`` query rows, ``cols`` keys a block and
    head dim ``dim``: the scores (fp32) and their fp16 copy, the output rows, the row statistics."""
    acc_s = T.alloc_fragment([rows, cols], T.float32)
    acc_s_cast = T.alloc_fragment([rows, cols], T.float16)
    acc_o = T.alloc_fragment([rows, dim], T.float32)
    scores_max = T.alloc_fragment([rows], T.float32)
    scores_max_prev = T.alloc_fragment([rows], T.float32)
    scores_scale = T.alloc_fragment([rows], T.float32)
    scores_sum = T.alloc_fragment([rows], T.float32)
    logsum = T.alloc_fragment([rows], T.float32)
    return acc_s, acc_s_cast, acc_o, scores_max, scores_max_prev, scores_scale, scores_sum, logsum


@T.macro
def online_softmax(acc_s, acc_s_cast, acc_o, scores_max, scores_max_prev, scores_scale, scores_sum, logsum, scale):
    """One key block of FlashAttention's online softmax: the running row maxima and sums take in
    the scores ``acc_s`` (``exp2`` of scores times ``scale``, which folds in log2(e)), ``acc_s_cast``
    gets the probabilities for P·V, and the output rows so far are rescaled."""
    rows, cols = acc_s.shape
    dim = acc_o.shape[1]
    T.copy(scores_max, scores_max_prev)
    T.reduce_max(acc_s, scores_max, dim=1, clear=False)
    for i in T.Parallel(rows):
        scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
    for i, j in T.Parallel(rows, cols):
        acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
    T.reduce_sum(acc_s, scores_sum, dim=1)
    for i in T.Parallel(rows):
        logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
    T.copy(acc_s, acc_s_cast)
    for i, j in T.Parallel(rows, dim):
        acc_o[i, j] *= scores_scale[i]


@T.macro
def attend_query_block(Q, K, V, Q_shared, K_shared, V_shared, state, bx, by, bz, seq_len, is_causal, scale,
                       num_stages):
    """FlashAttention's main loop for query block ``bx`` of head ``by``, batch ``bz`` (BHSD
    tensors): Q into ``Q_shared``, then every key block it sees through the online softmax, into
    ``state`` (``softmax_state``: the output rows unnormalized, the row sums and maxima)."""
    acc_s, acc_s_cast, acc_o, scores_max, scores_max_prev, scores_scale, scores_sum, logsum = state
    block_M, block_N = acc_s.shape
    T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_shared)
    T.fill(acc_o, 0)
    T.fill(logsum, 0)
    T.fill(scores_max, -T.infinity(acc_s.dtype))

    loop_range = (
        T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
        if is_causal else T.ceildiv(seq_len, block_N)
    )
    for k in T.Pipelined(loop_range, num_stages=num_stages):
        T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], K_shared)
        if is_causal:
            for i, j in T.Parallel(block_M, block_N):
                acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(acc_s.dtype))
        else:
            T.clear(acc_s)
        T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
        online_softmax(acc_s, acc_s_cast, acc_o, scores_max, scores_max_prev, scores_scale, scores_sum, logsum, scale)
        T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], V_shared)
        T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)


@tilelang.jit(out_idx=[3])
def flash_attention(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64, num_stages=1, threads=128,
                    cluster=None):
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e): softmax via exp2
    shape = [batch, heads, seq_len, dim]
    dtype = T.float16

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             Output: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads, cluster_dims=cluster) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            O_shared = T.alloc_shared([block_M, dim], dtype)
            state = softmax_state(block_M, block_N, dim)
            acc_o, logsum = state[2], state[7]
            attend_query_block(Q, K, V, Q_shared, K_shared, V_shared, state, bx, by, bz, seq_len, is_causal, scale,
                               num_stages)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[bz, by, bx * block_M:(bx + 1) * block_M, :])

    return main


def combine_slices(batch, heads, num_split, dim):
    """The second kernel of a split-KV decode: each head's output is the sum of its slices'
    partial outputs, weighted by their share of the log-sum-exp (base 2)."""
    accum_dtype = T.float32

    @T.macro
    def combine(lse, partial, Output):
        with T.Kernel(heads, batch, threads=128) as (h, b):
            lse_max = T.alloc_var(accum_dtype, -T.infinity(accum_dtype))
            total = T.alloc_var(accum_dtype, 0.0)
            for k in T.serial(num_split):
                lse_max = T.max(lse_max, lse[b, h, k])
            for k in T.serial(num_split):
                total += T.exp2(lse[b, h, k] - lse_max)
            lse_all = T.log2(total) + lse_max
            for j in T.Parallel(dim):
                o = T.alloc_var(accum_dtype, 0.0)
                for k in T.serial(num_split):
                    o += partial[b, h, k, j] * T.exp2(lse[b, h, k] - lse_all)
                Output[b, h, j] = o

    return combine


def attend_kv_slices(batch, heads, kv_heads, num_split, blocks, block_N, dim, block_H, num_stages, threads,
                     kv_tile):
    """The first kernel of a split-KV decode: each of ``num_split`` slices of the cache attended by
    the ``heads // kv_heads`` query heads that share a KV head (rows of a ``block_H``-row tile, the
    rest padding), over ``blocks`` key blocks of ``block_N``, writing a partial output and its
    log-sum-exp (base 2). ``kv_tile(cache, table, b, h, s, k)`` is the region of ``cache`` holding
    key block ``k`` of slice ``s``, ``table`` what the macro's caller passes to read it through."""
    group = heads // kv_heads
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e): softmax via exp2
    dtype = T.float16
    accum_dtype = T.float32

    @T.macro
    def attend_slices(Q, K, V, table, lse, partial):
        with T.Kernel(batch, kv_heads, num_split, threads=threads) as (b, h, s):
            Q_shared = T.alloc_shared([block_H, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            acc_s, acc_s_cast, acc_o, scores_max, scores_max_prev, scores_scale, scores_sum, logsum = \
                softmax_state(block_H, block_N, dim)

            T.copy(Q[b, h * group:h * group + block_H, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))
            for k in T.Pipelined(blocks, num_stages=num_stages):
                T.copy(kv_tile(K, table, b, h, s, k), K_shared)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullRow)
                online_softmax(acc_s, acc_s_cast, acc_o, scores_max, scores_max_prev, scores_scale, scores_sum, logsum,
                               scale)
                T.copy(kv_tile(V, table, b, h, s, k), V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_H, dim):
                acc_o[i, j] /= logsum[i]
            for i in T.Parallel(block_H):
                logsum[i] = T.log2(logsum[i]) + scores_max[i] * scale
            for i in T.Parallel(block_H):
                if i < group:
                    lse[b, h * group + i, s] = logsum[i]
            for i, j in T.Parallel(block_H, dim):
                if i < group:
                    partial[b, h * group + i, s, j] = acc_o[i, j]

    return attend_slices


@tilelang.jit(out_idx=[-1])
def gqa_decode(batch, heads, kv_heads, seqlen_kv, dim, block_N=64, block_H=64, num_split=8, num_stages=2,
               threads=128):
    """One query token per sequence against a KV cache, grouped-query attention, split-KV: the first
    kernel attends each of ``num_split`` slices of the cache (``attend_kv_slices``), the second
    combines the slices. Written as TileLang's decode examples are: two ``T.macro`` kernels called
    from one function."""
    part = seqlen_kv // num_split
    dtype = T.float16
    accum_dtype = T.float32

    def kv_tile(cache, _table, b, h, s, k):
        return cache[b, s * part + k * block_N:s * part + (k + 1) * block_N, h, :]

    attend_slices = attend_kv_slices(batch, heads, kv_heads, num_split, part // block_N, block_N, dim, block_H,
                                     num_stages, threads, kv_tile)
    combine = combine_slices(batch, heads, num_split, dim)

    @T.prim_func
    def main(Q: T.Tensor([batch, heads, dim], dtype), K: T.Tensor([batch, seqlen_kv, kv_heads, dim], dtype),
             V: T.Tensor([batch, seqlen_kv, kv_heads, dim], dtype),
             lse: T.Tensor([batch, heads, num_split], accum_dtype),
             partial: T.Tensor([batch, heads, num_split, dim], accum_dtype),
             Output: T.Tensor([batch, heads, dim], dtype)):
        attend_slices(Q, K, V, None, lse, partial)
        combine(lse, partial, Output)

    return main


@tilelang.jit(out_idx=[-1])
def paged_gqa_decode(batch, heads, kv_heads, pages_per_seq, page_size, dim, num_split=4, block_H=64, num_stages=2,
                     threads=128):
    """``gqa_decode`` over a paged KV cache, as vLLM keeps it: ``K_cache`` / ``V_cache`` hold pages
    of ``page_size`` tokens ([pages, page_size, kv_heads, dim]) and ``BlockTable[b, i]`` is the page
    of sequence ``b``'s tokens ``i * page_size ..``; every sequence has ``pages_per_seq`` pages. Each
    key block is one page, read through the table (a tile offset loaded from memory)."""
    pages_per_split = pages_per_seq // num_split
    dtype = T.float16
    accum_dtype = T.float32

    def kv_tile(cache, table, b, h, s, k):
        page = table[b, s * pages_per_split + k]
        return cache[page, :, h, :]

    attend_slices = attend_kv_slices(batch, heads, kv_heads, num_split, pages_per_split, page_size, dim, block_H,
                                     num_stages, threads, kv_tile)
    combine = combine_slices(batch, heads, num_split, dim)

    @T.prim_func
    def main(Q: T.Tensor([batch, heads, dim], dtype),
             K_cache: T.Tensor([batch * pages_per_seq, page_size, kv_heads, dim], dtype),
             V_cache: T.Tensor([batch * pages_per_seq, page_size, kv_heads, dim], dtype),
             BlockTable: T.Tensor([batch, pages_per_seq], T.int32),
             lse: T.Tensor([batch, heads, num_split], accum_dtype),
             partial: T.Tensor([batch, heads, num_split, dim], accum_dtype),
             Output: T.Tensor([batch, heads, dim], dtype)):
        attend_slices(Q, K_cache, V_cache, BlockTable, lse, partial)
        combine(lse, partial, Output)

    return main


@tilelang.jit(out_idx=[-1])
def mla_decode(batch, heads, seqlen_kv, dim=512, pe_dim=64, block_N=64, block_H=64, num_split=4, num_stages=1,
               threads=256):
    """DeepSeek's multi-head latent attention at decode, as TileLang's MLA example writes it: every
    query head attends the one latent KV head (``dim`` wide, which is also V) plus its rotary part
    (``pe_dim``); ``block_H`` heads a block, the scores as two gemms into one accumulator, the two
    warpgroups splitting the columns (``FullCol``, so P goes through shared memory to reach both);
    split-KV, combined by a second kernel. ``block_N=64``: on the sm_80 path a narrower score tile
    is split between the warps unlike the output, whose row statistics then go through shared
    memory; two stages of it fit beside Q on sm_90a only."""
    part = seqlen_kv // num_split
    scale = (1.0 / (dim + pe_dim)) ** 0.5 * 1.44269504  # log2(e): softmax via exp2
    dtype = T.float16
    accum_dtype = T.float32

    @T.macro
    def attend_slices(Q, Q_pe, KV, K_pe, lse, partial):
        with T.Kernel(batch, heads // block_H, num_split, threads=threads) as (b, hb, s):
            Q_shared = T.alloc_shared([block_H, dim], dtype)
            Q_pe_shared = T.alloc_shared([block_H, pe_dim], dtype)
            KV_shared = T.alloc_shared([block_N, dim], dtype)
            K_pe_shared = T.alloc_shared([block_N, pe_dim], dtype)
            S_shared = T.alloc_shared([block_H, block_N], dtype)  # P: each warpgroup holds half its columns
            acc_s, acc_s_cast, acc_o, scores_max, scores_max_prev, scores_scale, scores_sum, logsum = \
                softmax_state(block_H, block_N, dim)

            T.copy(Q[b, hb * block_H:(hb + 1) * block_H, :], Q_shared)
            T.copy(Q_pe[b, hb * block_H:(hb + 1) * block_H, :], Q_pe_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))
            for k in T.Pipelined(part // block_N, num_stages=num_stages):
                kv_start = s * part + k * block_N
                T.copy(KV[b, kv_start:kv_start + block_N, 0, :], KV_shared)
                T.copy(K_pe[b, kv_start:kv_start + block_N, 0, :], K_pe_shared)
                T.gemm(Q_shared, KV_shared, acc_s, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullCol)
                T.gemm(Q_pe_shared, K_pe_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                online_softmax(acc_s, acc_s_cast, acc_o, scores_max, scores_max_prev, scores_scale, scores_sum, logsum,
                               scale)
                T.copy(acc_s_cast, S_shared)
                T.gemm(S_shared, KV_shared, acc_o, policy=T.GemmWarpPolicy.FullCol)
            for i, j in T.Parallel(block_H, dim):
                acc_o[i, j] /= logsum[i]
            for i in T.Parallel(block_H):
                logsum[i] = T.log2(logsum[i]) + scores_max[i] * scale
            T.copy(logsum, lse[b, hb * block_H:(hb + 1) * block_H, s])
            T.copy(acc_o, partial[b, hb * block_H:(hb + 1) * block_H, s, :])

    combine = combine_slices(batch, heads, num_split, dim)

    @T.prim_func
    def main(Q: T.Tensor([batch, heads, dim], dtype), Q_pe: T.Tensor([batch, heads, pe_dim], dtype),
             KV: T.Tensor([batch, seqlen_kv, 1, dim], dtype), K_pe: T.Tensor([batch, seqlen_kv, 1, pe_dim], dtype),
             lse: T.Tensor([batch, heads, num_split], accum_dtype),
             partial: T.Tensor([batch, heads, num_split, dim], accum_dtype),
             Output: T.Tensor([batch, heads, dim], dtype)):
        attend_slices(Q, Q_pe, KV, K_pe, lse, partial)
        combine(lse, partial, Output)

    return main


@tilelang.jit(out_idx=[4])
def blocksparse_attention(batch, heads, seq_len, dim, block_M=64, block_N=64, num_stages=2, threads=128):
    """FlashAttention over the key blocks ``BlockMask[b, h, query block, key block]`` keeps, as
    TileLang's block-sparse example writes it: the mask row copied to a local array, the whole
    pipelined body under ``if block_mask[k]``."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e): softmax via exp2
    shape = [batch, heads, seq_len, dim]
    blocks_m, blocks_n = seq_len // block_M, seq_len // block_N
    dtype = T.float16
    accum_dtype = T.float32

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             BlockMask: T.Tensor([batch, heads, blocks_m, blocks_n], T.bool), Output: T.Tensor(shape, dtype)):
        with T.Kernel(blocks_m, heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            acc_s, acc_s_cast, acc_o, scores_max, scores_max_prev, scores_scale, scores_sum, logsum = \
                softmax_state(block_M, block_N, dim)
            block_mask = T.alloc_local([blocks_n], T.bool)

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))
            for vj in T.serial(blocks_n):
                block_mask[vj] = BlockMask[bz, by, bx, vj]
            for k in T.Pipelined(blocks_n, num_stages=num_stages):
                if block_mask[k]:
                    T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], K_shared)
                    T.clear(acc_s)
                    T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                    online_softmax(acc_s, acc_s_cast, acc_o, scores_max, scores_max_prev, scores_scale, scores_sum,
                                   logsum, scale)
                    T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], V_shared)
                    T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, Output[bz, by, bx * block_M:(bx + 1) * block_M, :])

    return main


@tilelang.jit(out_idx=[-1])
def combine_split_kv(batch, heads, num_split, dim, annotate=True, max_in_local=False, dtype=T.float16):
    """The combine kernel of TileLang's flash-decoding examples, written as they write it: each
    head's output is the sum of its ``num_split`` partial outputs weighted by their share of the
    log-sum-exp (base 2). The maximum of the slices' LSEs is reduced into a 128-element fragment
    (one element a thread under the annotated layout) whose element 0 every thread then reads
    outside ``T.Parallel``; with ``max_in_local`` it is a serial loop's maximum in a ``[1]`` local
    instead. ``annotate``: the examples' ``T.annotate_layout`` block."""
    accum_dtype = T.float32

    @T.prim_func
    def main(glse: T.Tensor([batch, heads, num_split], accum_dtype),
             Output_partial: T.Tensor([batch, heads, num_split, dim], dtype),
             Output: T.Tensor([batch, heads, dim], dtype)):
        with T.Kernel(heads, batch, threads=128) as (by, bz):
            po_local = T.alloc_fragment([dim], dtype)
            o_accum_local = T.alloc_fragment([dim], accum_dtype)
            lse_local = T.alloc_fragment([num_split, 128], dtype)
            lse_local_split = T.alloc_local([1], accum_dtype)
            lse_logsum_local = T.alloc_local([1], accum_dtype)
            if max_in_local:
                lse_max_local = T.alloc_local([1], accum_dtype)
            else:
                lse_max_local = T.alloc_fragment([128], accum_dtype)
            scale_local = T.alloc_local([1], accum_dtype)
            if annotate:
                T.annotate_layout({
                    lse_logsum_local: T.Fragment(lse_logsum_local.shape, forward_thread_fn=lambda i: i),
                    lse_local: T.Fragment(lse_local.shape, forward_fn=lambda i, j: (j, i)),
                })
                if not max_in_local:
                    T.annotate_layout({
                        lse_max_local: T.Fragment(lse_max_local.shape, forward_thread_fn=lambda i: i),
                    })
            T.clear(lse_logsum_local)
            T.clear(o_accum_local)
            if max_in_local:
                lse_max_local[0] = -T.infinity(accum_dtype)
                for k in T.serial(num_split):
                    lse_max_local[0] = T.max(lse_max_local[0], glse[bz, by, k])
            else:
                for k, j in T.Parallel(num_split, 128):
                    lse_local[k, j] = glse[bz, by, k]
                T.reduce_max(lse_local, lse_max_local, dim=0, clear=True)
            for k in T.Pipelined(num_split, num_stages=1):
                lse_local_split[0] = glse[bz, by, k]
                lse_logsum_local[0] += T.exp2(lse_local_split[0] - lse_max_local[0])
            lse_logsum_local[0] = T.log2(lse_logsum_local[0]) + lse_max_local[0]
            for k in T.serial(num_split):
                for i in T.Parallel(dim):
                    po_local[i] = Output_partial[bz, by, k, i]
                lse_local_split[0] = glse[bz, by, k]
                scale_local[0] = T.exp2(lse_local_split[0] - lse_logsum_local[0])
                for i in T.Parallel(dim):
                    o_accum_local[i] += po_local[i] * scale_local[0]
            for i in T.Parallel(dim):
                Output[bz, by, i] = o_accum_local[i]

    return main
