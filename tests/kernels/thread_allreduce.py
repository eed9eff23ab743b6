"""TVM's cross-thread reduction (``T.attr`` + ``T.comm_reducer`` + ``T.tvm_thread_allreduce``)
written as TileLang's GEMV examples write it (examples/gemv/example_gemv.py)."""

import torch

import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit(out_idx=[-1])
def gemv_allreduce(M, N, K, reduce_threads=32, n_partition=4, dtype=T.float16, accum_dtype=T.float32):
    """C = A @ B.T: a block of threads (reduce_threads, n_partition) per ``n_partition`` outputs of
    a row; thread ``kr`` sums every ``reduce_threads``-th product of its column, the allreduce
    adds the ``kr``s' sums (along threadIdx.x), thread ``kr == 0`` stores."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, n_partition), M, threads=(reduce_threads, n_partition)) as (bx, by):
            kr = T.get_thread_binding(0)
            ni = T.get_thread_binding(1)
            accum_res = T.alloc_local((1,), accum_dtype)
            reduced_accum_res = T.alloc_local((1,), accum_dtype)
            accum_res[0] = T.Cast(accum_dtype, 0)
            for ko in T.serial(T.ceildiv(K, reduce_threads)):
                k = ko * reduce_threads + kr
                if k < K and bx * n_partition + ni < N:
                    accum_res[0] += A[by, k].astype(accum_dtype) * B[bx * n_partition + ni, k].astype(accum_dtype)
            with T.attr(
                T.comm_reducer(lambda x, y: x + y, [T.Cast(accum_dtype, 0)]),
                "reduce_scope",
                T.reinterpret(T.uint64(0), dtype="handle"),
            ):
                T.evaluate(
                    T.tvm_thread_allreduce(T.uint32(1), accum_res[0], True, reduced_accum_res[0], kr, dtype="handle"))
            if kr == 0 and bx * n_partition + ni < N:
                C[by, bx * n_partition + ni] = reduced_accum_res[0]

    return main


@tilelang.jit(out_idx=[-1])
def splitk_gemv_tvm(N, K, BLOCK_N=2, reduce_threads=32, dtype=T.float16, accum_dtype=T.float32):
    """TileLang's ``splitk_gemv_vectorized_tvm``: C = B @ A with threads (BLOCK_N, reduce_threads),
    each thread ``tk`` loading 8 consecutive halves per step; the allreduce runs along threadIdx.y
    and every thread stores its column's sum."""
    TILE_K = 128 // dtype.bits
    BLOCK_K = reduce_threads * TILE_K

    @T.prim_func
    def main(A: T.Tensor((K,), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(BLOCK_N, reduce_threads)) as bn:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            A_local = T.alloc_local((TILE_K,), dtype)
            B_local = T.alloc_local((TILE_K,), dtype)
            C_accum = T.alloc_local((1,), accum_dtype)
            T.clear(C_accum)
            for bk in T.serial(T.ceildiv(K, BLOCK_K)):
                for k in T.vectorized(TILE_K):
                    A_local[k] = A[bk * BLOCK_K + tk * TILE_K + k]
                    B_local[k] = B[bn * BLOCK_N + tn, bk * BLOCK_K + tk * TILE_K + k]
                for k in T.serial(TILE_K):
                    C_accum[0] += A_local[k].astype(accum_dtype) * B_local[k].astype(accum_dtype)
            C_reduced = T.alloc_local((1,), accum_dtype)
            with T.attr(
                T.comm_reducer(lambda x, y: x + y, [T.Cast(accum_dtype, 0)]),
                "reduce_scope",
                T.reinterpret(T.uint64(0), dtype="handle"),
            ):
                T.evaluate(
                    T.tvm_thread_allreduce(T.uint32(1), C_accum[0], True, C_reduced[0], tk, dtype="handle"))
            C[bn * BLOCK_N + tn] = C_reduced[0]

    return main


@tilelang.jit(out_idx=[-1])
def row_max_allreduce(M, K, reduce_threads=32, rows=2, dtype=T.float16, accum_dtype=T.float32):
    """C[m] = max(A[m, :]) with threads (reduce_threads, rows): a ``T.max`` reducer whose
    condition ``kr < K`` leaves out the threads past the row, which hold a large sentinel."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), C: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, rows), threads=(reduce_threads, rows)) as bm:
            kr, ri = T.get_thread_bindings()[:2]
            row = bm * rows + ri
            part = T.alloc_local((1,), accum_dtype)
            result = T.alloc_local((1,), accum_dtype)
            part[0] = T.if_then_else(kr < K, T.min_value(accum_dtype), T.Cast(accum_dtype, 1e4))
            for ko in T.serial(T.ceildiv(K, reduce_threads)):
                if ko * reduce_threads + kr < K and row < M:
                    part[0] = T.max(part[0], A[row, ko * reduce_threads + kr].astype(accum_dtype))
            with T.attr(T.comm_reducer(lambda x0, y0: T.max(x0, y0), [T.min_value(accum_dtype)]), "reduce_scope",
                        T.reinterpret("handle", T.uint64(0))):
                T.tvm_thread_allreduce(T.uint32(1), part[0], kr < K, result[0], kr, dtype="handle")
            if kr == 0 and row < M:
                C[row] = result[0]

    return main


def _randn(*shape: int, device: str, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype=torch.float16, device=device)


def run_gemv(device: str, M: int, N: int, K: int, reduce_threads: int, n_partition: int,
             accum: str = "float32") -> tuple[torch.Tensor, torch.Tensor]:
    """``gemv_allreduce`` on random float16 inputs, and the float32 reference rounded to float16."""
    a = _randn(M, K, device=device, seed=70)
    b = _randn(N, K, device=device, seed=71)
    kernel = gemv_allreduce(M, N, K, reduce_threads, n_partition, accum_dtype=T.dtype(accum))
    return kernel(a, b), (a.float() @ b.float().T).half()


def run_splitk_gemv_tvm(device: str, N: int, K: int, BLOCK_N: int, reduce_threads: int) -> tuple[torch.Tensor,
                                                                                                  torch.Tensor]:
    """``splitk_gemv_tvm`` (K a multiple of 8 * reduce_threads) and its reference."""
    a = _randn(K, device=device, seed=72)
    b = _randn(N, K, device=device, seed=73)
    return splitk_gemv_tvm(N, K, BLOCK_N, reduce_threads)(a, b), (b.float() @ a.float()).half()


def run_row_max(device: str, M: int, K: int, reduce_threads: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``row_max_allreduce`` and ``A.max(1)``."""
    a = _randn(M, K, device=device, seed=74)
    return row_max_allreduce(M, K, reduce_threads, rows)(a), a.float().amax(1).half()
