"""Views: ``T.reshape`` of global tensors and shared tiles, ``T.view`` with another dtype (a mini
dequantization, sign flips on fp16 bits), views of local and ``T.alloc_var`` registers."""

import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit(out_idx=[-1])
def flat_affine(M, N, block=128):
    """``B = 2 A + 1``, both tensors read and written through 1-d ``T.reshape`` views."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M * N, block), threads=block) as bx:
            A_flat = T.reshape(A, (M * N,))
            B_flat = T.reshape(B, (M * N,))
            for i in T.Parallel(block):
                k = bx * block + i
                if k < M * N:
                    B_flat[k] = A_flat[k] * 2.0 + 1.0

    return main


@tilelang.jit(out_idx=[-1])
def swap_pairs(M, N, block_M=16):
    """Adjacent elements of each row swapped and doubled: a shared tile filled by ``T.copy`` is read
    as pairs through a view, and a second tile written through a view is copied out."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            S = T.alloc_shared((block_M, N), T.float16)
            D = T.alloc_shared((block_M, N), T.float16)
            pairs = T.reshape(S, (block_M * N // 2, 2))
            out = T.reshape(D, (block_M * N // 2, 2))
            T.copy(A[bx * block_M, 0], S)
            for p, j in T.Parallel(block_M * N // 2, 2):
                out[p, j] = pairs[p, 1 - j] * 2.0
            T.copy(D, B[bx * block_M, 0])

    return main


@tilelang.jit(out_idx=[-1])
def dequant_int8_words(M, K, scale=0.5, block_M=16):
    """``Out = Q * scale`` with the int8 tile read as uint32 words and unpacked with shifts."""

    @T.prim_func
    def main(Q: T.Tensor((M, K), T.int8), Out: T.Tensor((M, K), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            Q_s = T.alloc_shared((block_M, K), T.int8)
            words = T.view(Q_s, dtype=T.uint32)
            T.copy(Q[bx * block_M, 0], Q_s)
            for i, j in T.Parallel(block_M, K):
                byte = T.cast((words[i, j // 4] >> T.cast(8 * (j % 4), T.uint32)) & T.uint32(0xFF), T.int32)
                value = T.if_then_else(byte >= 128, byte - 256, byte)
                if bx * block_M + i < M:
                    Out[bx * block_M + i, j] = T.cast(value, T.float32) * scale

    return main


@tilelang.jit(out_idx=[-1])
def negate_fp16_bits(M, N, block=64):
    """``Out = -H`` by flipping the sign bits of fp16 pairs seen as uint32 words, in global memory."""

    @T.prim_func
    def main(H: T.Tensor((M, N), T.float16), Out: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
            H_words = T.view(H, (M, N // 2), T.uint32)
            O_words = T.view(Out, dtype=T.uint32)
            for i, j in T.Parallel(block, N // 2):
                if bx * block + i < M:
                    O_words[bx * block + i, j] = H_words[bx * block + i, j] ^ T.uint32(0x80008000)

    return main


@tilelang.jit(out_idx=[-2, -1])
def register_bits(M, block=64):
    """Per row: four int8 bytes assembled in a local array and read as one int32; a float
    ``T.alloc_var`` read as its int32 bits."""

    @T.prim_func
    def main(B: T.Tensor((M, 4), T.int8), X: T.Tensor((M,), T.float32), W: T.Tensor((M,), T.int32),
             Bits: T.Tensor((M,), T.int32)):
        with T.Kernel(T.ceildiv(M, block), threads=block) as bx:
            for i in T.Parallel(block):
                row = bx * block + i
                if row < M:
                    parts = T.alloc_local((4,), T.int8)
                    for k in T.serial(4):
                        parts[k] = B[row, k]
                    word = T.view(parts, (1,), T.int32)
                    W[row] = word[0]
                    x = T.alloc_var(T.float32, X[row])
                    x_bits = T.view(x, dtype=T.int32)
                    Bits[row] = x_bits[0]

    return main


@tilelang.jit(out_idx=[-1])
def dequant_row_sum(M, K, scale=0.25, block_M=32, block_K=64, num_stages=2):
    """``Out = (Q * scale).sum(1)`` over pipelined int8 tiles, each read as uint32 words through a
    view of the (multi-buffered) shared tile."""

    @T.prim_func
    def main(Q: T.Tensor((M, K), T.int8), Out: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            Q_s = T.alloc_shared((block_M, block_K), T.int8)
            words = T.view(Q_s, (block_M, block_K // 4), T.uint32)
            acc = T.alloc_fragment((block_M, block_K), T.float32)
            total = T.alloc_fragment((block_M,), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(Q[bx * block_M, k * block_K], Q_s)
                for i, j in T.Parallel(block_M, block_K):
                    byte = T.cast((words[i, j // 4] >> T.cast(8 * (j % 4), T.uint32)) & T.uint32(0xFF), T.int32)
                    acc[i, j] += T.cast(T.if_then_else(byte >= 128, byte - 256, byte), T.float32) * scale
            T.reduce_sum(acc, total, dim=1)
            T.copy(total, Out[bx * block_M])

    return main



@tilelang.jit(out_idx=[-1])
def head_weighted_scores(seq_q, seq_kv, heads, dim, block_N=64, block_Q=2, threads=128, dtype=T.float16):
    """``Out[t, n] = sum_h relu(K[n] . Q[t, h]) * W[t, h]``, TileLang's DeepSeek v3.2 indexer's
    logits: the gemm accumulator ``[block_N, block_Q * heads]`` is read as ``[block_N, block_Q,
    heads]`` through a ``T.reshape`` of the fragment, and reduced over its heads. TileLang's indexer
    takes Q and K as ``T.float8_e4m3fn`` (``dtype``)."""
    return weighted_scores(seq_q, seq_kv, heads, dim, block_N, block_Q, threads, dtype, guarded=True)


def weighted_scores(seq_q, seq_kv, heads, dim, block_N, block_Q, threads, dtype, guarded):
    """The kernel of ``head_weighted_scores``; unless ``guarded``, the last block's ``block_N``
    columns are stored whole, past ``seq_kv`` too, as TileLang's indexer stores them
    (kernels/safe_access.py)."""

    @T.prim_func
    def main(Q: T.Tensor((seq_q * heads, dim), dtype), K: T.Tensor((seq_kv, dim), dtype),
             W: T.Tensor((seq_q, heads), T.float32), Out: T.Tensor((seq_q, seq_kv), T.float32)):
        with T.Kernel(T.ceildiv(seq_kv, block_N), seq_q // block_Q, threads=threads) as (bx, by):
            q_s = T.alloc_shared((block_Q * heads, dim), dtype)
            k_s = T.alloc_shared((block_N, dim), dtype)
            s = T.alloc_fragment((block_N, block_Q * heads), T.float32)
            s_heads = T.reshape(s, (block_N, block_Q, heads))
            w = T.alloc_fragment((block_Q, heads), T.float32)
            scores = T.alloc_fragment((block_N, block_Q), T.float32)
            T.copy(Q[by * block_Q * heads, 0], q_s)
            T.copy(K[bx * block_N, 0], k_s)
            T.copy(W[by * block_Q, 0], w)
            T.gemm(k_s, q_s, s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullCol)
            for n, g, h in T.Parallel(block_N, block_Q, heads):
                s_heads[n, g, h] = T.max(s_heads[n, g, h], 0) * w[g, h]
            T.reduce_sum(s_heads, scores, dim=-1, clear=True)
            for g, n in T.Parallel(block_Q, block_N):
                if guarded:
                    if bx * block_N + n < seq_kv:
                        Out[by * block_Q + g, bx * block_N + n] = scores[n, g]
                else:
                    Out[by * block_Q + g, bx * block_N + n] = scores[n, g]  # the last block: past seq_kv too

    return main
