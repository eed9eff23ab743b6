"""Kernels written with TileLang's SIMT escape hatch: thread queries, per-thread locals, shuffles
and warp reductions, as TileLang's GEMV examples are."""

import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit(out_idx=[-1])
def splitk_gemv(N, K, BLOCK_N=4, reduce_threads=32, TILE_K=4, dtype=T.float16, accum_dtype=T.float32):
    """C = B @ A: one thread column ``tn`` per output, ``reduce_threads`` threads ``tk`` splitting
    each row of B, a per-thread accumulation over K, then a warp reduction across the ``tk``."""
    BLOCK_K = reduce_threads * TILE_K

    @T.prim_func
    def main(A: T.Tensor((K,), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(reduce_threads, BLOCK_N)) as bn:
            tk = T.get_thread_binding(0)
            tn = T.get_thread_binding(1)
            A_local = T.alloc_local((TILE_K,), dtype)
            B_local = T.alloc_local((TILE_K,), dtype)
            C_accum = T.alloc_local((1,), accum_dtype)
            T.clear(C_accum)
            for bk in T.serial(T.ceildiv(K, BLOCK_K)):
                for k in T.serial(TILE_K):
                    col = bk * BLOCK_K + tk * TILE_K + k
                    A_local[k] = T.if_then_else(col < K, A[col], T.cast(0, dtype))
                    B_local[k] = T.if_then_else(col < K and bn * BLOCK_N + tn < N, B[bn * BLOCK_N + tn, col],
                                                T.cast(0, dtype))
                for k in T.serial(TILE_K):
                    C_accum[0] += A_local[k].astype(accum_dtype) * B_local[k].astype(accum_dtype)
            total = T.warp_reduce_sum(C_accum[0])
            if tk == 0 and bn * BLOCK_N + tn < N:
                C[bn * BLOCK_N + tn] = total

    return main


@tilelang.jit(out_idx=[-1])
def gemv_shared_atomic(N, K, BLOCK_N=32, BLOCK_K=4, dtype=T.float16, accum_dtype=T.float32):
    """TileLang's ``naive_splitk_gemv``: threads (BLOCK_N, BLOCK_K); thread (tn, 0) zeroes a shared
    partial sum, every thread adds its products with an element atomic, one store per column."""

    @T.prim_func
    def main(A: T.Tensor((K,), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(BLOCK_N, BLOCK_K)) as bn:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            A_local = T.alloc_local((1,), dtype)
            B_local = T.alloc_local((1,), dtype)
            C_accum = T.alloc_local((1,), accum_dtype)
            C_shared = T.alloc_shared((BLOCK_N,), accum_dtype)
            if tk == 0:
                C_shared[tn] = 0
            T.clear(C_accum)
            for bk in T.serial(T.ceildiv(K, BLOCK_K)):
                A_local[0] = A[bk * BLOCK_K + tk]
                B_local[0] = B[bn * BLOCK_N + tn, bk * BLOCK_K + tk]
                C_accum[0] += A_local[0].astype(accum_dtype) * B_local[0].astype(accum_dtype)
            T.atomic_add(C_shared[tn], C_accum[0])
            if tk == 0:
                C[bn * BLOCK_N + tn] = C_shared[tn]

    return main


@tilelang.jit(out_idx=[-1])
def warp_shuffles(threads=64, dtype=T.float32):
    """Per row of X (one element per thread): column 0 the warp sum by xor butterfly, 1 the value
    ``shfl_down`` by 1 and 2 ``shfl_up`` by 2 within groups of 8, 3 lane 5's value, 4 the warp max,
    5 the lane index plus 100 * the warp index, 6 the count of positive lanes (ballot popcount)."""

    @T.prim_func
    def main(X: T.Tensor((threads,), dtype), Y: T.Tensor((threads, 7), dtype)):
        with T.Kernel(1, threads=threads) as _:
            tx = T.get_thread_binding()
            v = T.alloc_var(dtype, init=X[tx])
            s = T.alloc_var(dtype, init=v)
            for offset in (16, 8, 4, 2, 1):
                s += T.shfl_xor(s, offset)
            Y[tx, 0] = s
            Y[tx, 1] = T.shfl_down(v, 1, width=8)
            Y[tx, 2] = T.shfl_up(v, 2, 8)
            Y[tx, 3] = T.shfl_sync(v, 5)
            Y[tx, 4] = T.warp_reduce_max(v)
            Y[tx, 5] = T.cast(T.get_lane_idx() + 100 * T.get_warp_idx(), dtype)
            Y[tx, 6] = T.cast(T.popcount(T.ballot(v > 0)), dtype)

    return main


@tilelang.jit(out_idx=[-1])
def warp_match_elect(threads=128):
    """Per thread: column 0 the mask of the lanes of its warp whose int key equals its own
    (``T.match_any_sync``), 1 the same for a float key (bit for bit), 2-4 ``T.shuffle_elect`` per
    warp, per pair of warps and per block, 5 ``tx + 1`` in the thread an ``if`` on
    ``T.shuffle_elect(128)`` elects, else 0, 6 ``T.match_all_sync`` of a key the first two warps
    hold the same in every lane."""

    @T.prim_func
    def main(K: T.Tensor((threads,), T.int32), F: T.Tensor((threads,), T.float32),
             Y: T.Tensor((threads, 7), T.int64)):
        with T.Kernel(1, threads=threads) as _:
            tx = T.get_thread_binding()
            Y[tx, 0] = T.cast(T.match_any_sync(K[tx]), T.int64)
            Y[tx, 1] = T.cast(T.match_any_sync(F[tx]), T.int64)
            Y[tx, 2] = T.cast(T.shuffle_elect(32), T.int64)
            Y[tx, 3] = T.cast(T.shuffle_elect(64), T.int64)
            Y[tx, 4] = T.cast(T.shuffle_elect(0), T.int64)
            if T.shuffle_elect(128):
                Y[tx, 5] = T.cast(tx + 1, T.int64)
            else:
                Y[tx, 5] = 0
            Y[tx, 6] = T.cast(T.match_all_sync(K[tx] * (tx // 64)), T.int64)

    return main


@tilelang.jit(out_idx=[-1])
def flagged_copy(n=128):
    """``Y[t] = X[t]`` where thread ``t``'s own flag ``F[t]`` (read with an acquire load) is set,
    else -1; each thread of the first half also marks its flag in ``Done``."""

    @T.prim_func
    def main(X: T.Tensor((n,), T.int32), F: T.Tensor((n,), T.int32), Done: T.Tensor((n,), T.int32),
             Y: T.Tensor((n,), T.int32)):
        with T.Kernel(1, threads=n) as _:
            tx = T.get_thread_binding()
            flag = T.alloc_var(T.int32, init=T.atomic_load(F[tx], memory_order="acquire"))
            Y[tx] = T.if_then_else(flag != 0, X[tx], -1)
            if tx < n // 2:
                T.atomic_store(Done[tx], T.atomic_load(F[tx]) + 1, memory_order="release")

    return main


@tilelang.jit(out_idx=[-1])
def warp_walsh_hadamard(rows, width=32, dtype=T.float32):
    """Each row of X (one warp, one value a lane) times the ``width``-point Walsh-Hadamard matrix,
    by butterflies over TVM's ``T.tvm_warp_shuffle`` with the partner lane ``lane ^ (1 << i)`` (an
    int shifted by an IR loop variable), as TileLang's Hadamard example exchanges within a warp."""
    rounds = width.bit_length() - 1

    @T.prim_func
    def main(X: T.Tensor((rows, width), dtype), Y: T.Tensor((rows, width), dtype)):
        with T.Kernel(rows, threads=32) as row:
            lane = T.get_thread_binding(0)
            v = T.alloc_local((1,), dtype)
            v[0] = T.if_then_else(lane < width, X[row, lane % width], T.cast(0, dtype))
            for i in T.serial(rounds):
                other = T.tvm_warp_shuffle(0xFFFFFFFF, v[0], lane ^ (1 << i), width, 32)
                v[0] = T.if_then_else((lane >> i) & 1 == 0, v[0] + other, other - v[0])
            if lane < width:
                Y[row, lane] = v[0]

    return main
