"""Kernels written as TileLang's DeepSeek v3.2 examples write them, relying on its guarded element
accesses to global tensors (docs/language.md, "Out-of-range accesses"): a load outside reads 0, a
store outside is dropped. None of them checks its indices."""

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels.views import weighted_scores


@tilelang.jit
def indexer_logits(seq_q, seq_len_kv, heads, dim, block_N=64, block_Q=2, threads=128, dynamic=False):
    """``Logits[t, n] = sum_h relu(K[n] . Q[t, h]) * W[t, h]``, as the indexer computes them: the
    last block's ``block_N`` columns are stored whole, past ``seq_len_kv`` too (those stores are
    dropped). ``dynamic``: ``seq_len_kv`` is a ``T.dynamic`` size."""
    seq_kv = T.dynamic("seq_len_kv") if dynamic else seq_len_kv

    return weighted_scores(seq_q, seq_kv, heads, dim, block_N, block_Q, threads, T.float16, guarded=False)


@tilelang.jit
def clean_logits(threads=128, block_K=256):
    """``Logits[t, n] = -inf`` outside ``[Starts[t], Ends[t])``, a whole ``block_K`` row chunk at a
    time: the last chunk runs past ``seq_len_kv`` (those stores are dropped)."""
    seq_len = T.dynamic("seq_len")
    seq_len_kv = T.dynamic("seq_len_kv")

    @T.prim_func
    def main(Logits: T.Tensor((seq_len, seq_len_kv), T.float32), Starts: T.Tensor((seq_len,), T.int32),
             Ends: T.Tensor((seq_len,), T.int32)):
        with T.Kernel(seq_len, threads=threads) as bx:
            start = T.alloc_var(T.int32, Starts[bx])
            end = T.alloc_var(T.int32, Ends[bx])
            for n_i in T.Pipelined(T.ceildiv(seq_len_kv, block_K)):
                for k_i in T.Parallel(block_K):
                    idx = n_i * block_K + k_i
                    if idx < start or idx >= end:
                        Logits[bx, idx] = -T.infinity(T.float32)

    return main


@tilelang.jit(out_idx=[-1])
def sparse_gather_sum(seq_len, seq_len_kv, topk, dim, block_D=64, threads=128):
    """``Out[t, d] = sum_i KV[Indices[t, i], d]``, as the sparse MLA gathers its keys: an index
    equal to ``seq_len_kv`` marks an unused slot and reads zeros."""
    @T.prim_func
    def main(KV: T.Tensor((seq_len_kv, dim), T.float32), Indices: T.Tensor((seq_len, topk), T.int32),
             Out: T.Tensor((seq_len, dim), T.float32)):
        with T.Kernel(dim // block_D, seq_len, threads=threads) as (bx, by):
            kv_f = T.alloc_fragment((topk, block_D), T.float32)
            acc = T.alloc_fragment((block_D,), T.float32)
            for i, d in T.Parallel(topk, block_D):
                kv_f[i, d] = KV[Indices[by, i], bx * block_D + d]
            T.reduce_sum(kv_f, acc, dim=0)
            T.copy(acc, Out[by, bx * block_D])

    return main


@tilelang.jit(out_idx=[-1])
def shifted_copy(n, shift, block=64):
    """``Out[i] = A[i + shift]`` (zero past the end) and ``Acc[i + shift] += A[i]`` through a scalar
    atomic, neither checked: a load, a store and an atomic that may fall outside."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), Acc: T.Tensor((n,), T.float32), Out: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                Out[bx * block + i] = A[bx * block + i + shift]
            for i in T.Parallel(block):
                T.atomic_add(Acc[bx * block + i + shift], A[bx * block + i])

    return main


@tilelang.jit(out_idx=[-1])
def shifted_atomic_reads(n, shift, kind="add", block=64):
    """``Out[i] = T.atomic_load(A[i + shift])`` and ``Prev[i] = T.atomic_<kind>(Acc[i + shift], A[i],
    return_prev=True)``, neither checked: past the end the load reads 0, and the update is not made
    and gives 0. The last block runs past ``n`` too (its stores are dropped)."""
    fetch = {"add": T.atomic_add, "max": T.atomic_max, "min": T.atomic_min}[kind]

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), Acc: T.Tensor((n,), T.float32), Prev: T.Tensor((n,), T.float32),
             Out: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                Out[bx * block + i] = T.atomic_load(A[bx * block + i + shift], memory_order="acquire")
            for i in T.Parallel(block):
                Prev[bx * block + i] = fetch(Acc[bx * block + i + shift], A[bx * block + i], return_prev=True)

    return main


@tilelang.jit
def gather_tickets(n, bins, block=64):
    """Each element takes a ticket from the counter of its bin, ``Ticket[i] = T.atomic_add(Counts[Idx[i]],
    1, return_prev=True)``, and reads ``Seen[i] = T.atomic_load(Table[Idx[i]])``; an unused slot holds
    the sentinel ``bins`` (or -1), which updates nothing and reads 0 twice."""

    @T.prim_func
    def main(Idx: T.Tensor((n,), T.int32), Counts: T.Tensor((bins,), T.int32), Table: T.Tensor((bins,), T.int32),
             Ticket: T.Tensor((n,), T.int32), Seen: T.Tensor((n,), T.int32)):
        with T.Kernel(n // block, threads=block) as bx:
            for i in T.Parallel(block):
                Ticket[bx * block + i] = T.atomic_add(Counts[Idx[bx * block + i]], 1, return_prev=True)
                Seen[bx * block + i] = T.atomic_load(Table[Idx[bx * block + i]], memory_order="relaxed")

    return main


@tilelang.jit(out_idx=[-1])
def block_flags(blocks, flags, threads=128):
    """Once per block (not per thread): ``t = T.atomic_add(Counters[bx], 1, return_prev=True)`` and
    ``f = T.atomic_load(Flags[bx])``, with fewer flags and counters than blocks; ``Out[bx] = t * 10 +
    f``, 0 for the blocks past them (which update nothing)."""

    @T.prim_func
    def main(Flags: T.Tensor((flags,), T.int32), Counters: T.Tensor((flags,), T.int32),
             Out: T.Tensor((blocks,), T.int32)):
        with T.Kernel(blocks, threads=threads) as bx:
            f = T.alloc_var(T.int32)
            f = T.atomic_load(Flags[bx], memory_order="acquire")
            t = T.alloc_var(T.int32)
            t = T.atomic_add(Counters[bx], 1, return_prev=True)
            Out[bx] = t * 10 + f

    return main


@tilelang.jit
def thread_tickets(blocks, counters, per_block=8, threads=32):
    """The first ``per_block`` threads of each block (a branch on the thread index) each take a
    ticket from their own counter, ``Counters[bx * per_block + tx]``, and read it again: ``Out[bx,
    tx] = ticket + T.atomic_load(counter)``, which is ``2 * c + 1`` for a counter that held ``c`` and
    0 for the threads past the counters (which update nothing)."""

    @T.prim_func
    def main(Counters: T.Tensor((counters,), T.int32), Out: T.Tensor((blocks, per_block), T.int32)):
        with T.Kernel(blocks, threads=threads) as bx:
            tx = T.get_thread_binding()
            if tx < per_block:
                t = T.atomic_add(Counters[bx * per_block + tx], 1, return_prev=True)
                Out[bx, tx] = t + T.atomic_load(Counters[bx * per_block + tx])

    return main


@tilelang.jit
def checked_atomic_reads(n, flags, block=64):
    """The accesses of ``shifted_atomic_reads`` and ``block_flags`` behind the checks that prove them
    in range: no guard is added."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), Acc: T.Tensor((n,), T.float32), Out: T.Tensor((n,), T.float32),
             Counters: T.Tensor((flags,), T.int32), Firsts: T.Tensor((flags,), T.int32)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    Out[bx * block + i] = T.atomic_load(A[bx * block + i]) + T.atomic_add(
                        Acc[bx * block + i], 1.0, return_prev=True)
            if bx < flags:
                t = T.alloc_var(T.int32)
                t = T.atomic_add(Counters[bx], 1, return_prev=True)
                Firsts[bx] = T.atomic_load(Counters[bx]) - t

    return main


def window_inputs() -> tuple:
    """Logits ``[6, 300]`` with windows ``[Starts, Ends)`` (empty, whole, at the edges), and the
    logits ``clean_logits`` leaves: -inf outside each row's window."""
    import torch

    logits = torch.randn(6, 300)
    starts = torch.tensor([0, 5, 10, 0, 299, 100], dtype=torch.int32)
    ends = torch.tensor([300, 6, 250, 0, 300, 100], dtype=torch.int32)
    want = logits.clone()
    cols = torch.arange(300)
    want[(cols[None, :] < starts[:, None].long()) | (cols[None, :] >= ends[:, None].long())] = float("-inf")
    return logits, starts, ends, want
