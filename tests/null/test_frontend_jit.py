# Kernel code is written as users write it (unused block and loop variables included).
# ruff: noqa: F841, F842, B007, E741
"""``@tilelang.jit`` in both styles, end to end through the reference interpreter."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels.gemm import matmul
from tilelang_x import knobs
from tilelang_x.core_ir.stmt import PrimFunc
from tilelang_x.jit import compile as jit_compile


@pytest.fixture(autouse=True)
def _interp():
    with knobs.scope(target_default="interp"):
        yield


def randn(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


TRACES: list[tuple[int, ...]] = []


# the quick-start kernel (examples/gemm_relu.py), counting its traces
@tilelang.jit
def matmul_eager(A, B, block_M: int = 64, block_N: int = 64, block_K: int = 32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((K, N), T.float16)
    C = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), T.float16)
        B_s = T.alloc_shared((block_K, block_N), T.float16)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f)
        for i, j in T.Parallel(block_M, block_N):
            C_f[i, j] = T.max(C_f[i, j], 0)
        T.copy(C_f, C[by * block_M, bx * block_N])
    TRACES.append((M, N, K))
    return C


def test_classic_jit_compiles_caches_and_runs():
    kernel = matmul(128, 64, 96)
    assert kernel is matmul(128, 64, 96)
    assert kernel is not matmul(128, 64, 64)
    assert hasattr(kernel, "get_kernel_source") and hasattr(kernel, "get_profiler")
    a, b = randn(128, 96, dtype=torch.float16, seed=1), randn(96, 64, dtype=torch.float16, seed=2)
    c = kernel(a, b)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=1e-2, rtol=1e-2)


def test_eager_call_binds_shapes_caches_and_runs():
    TRACES.clear()
    a, b = randn(128, 64, dtype=torch.float16, seed=3), randn(64, 96, dtype=torch.float16, seed=4)
    c = matmul_eager(a, b)
    torch.testing.assert_close(c.float(), (a.float() @ b.float()).relu(), atol=1e-2, rtol=1e-2)
    assert TRACES == [(128, 96, 64)]  # consts are Python ints in the traced body
    matmul_eager(a, b)
    assert len(TRACES) == 1  # same shapes, dtypes and block sizes: no new trace
    a2 = randn(64, 64, dtype=torch.float16, seed=5)
    c2 = matmul_eager(a2, b)
    assert TRACES[-1] == (64, 96, 64) and c2.shape == (64, 96)
    matmul_eager(a2, b, block_M=32)
    assert len(TRACES) == 3


def test_eager_compile_from_sizes():
    kernel = matmul_eager.compile(M=64, N=64, K=32, block_M=32)
    a, b = randn(64, 32, dtype=torch.float16, seed=6), randn(32, 64, dtype=torch.float16, seed=7)
    torch.testing.assert_close(kernel(a, b).float(), (a.float() @ b.float()).relu(), atol=1e-2, rtol=1e-2)
    assert kernel is matmul_eager.compile(a, b, block_M=32)


@tilelang.jit
def row_stats(X, scale: float = 2.0):
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float32)
    Y = T.empty((M, N), T.float32)
    S = T.empty((M,), T.float32)
    with T.Kernel(M, threads=32) as bx:
        row = T.alloc_fragment((N,), T.float32)
        total = T.alloc_fragment((1,), T.float32)
        T.copy(X[bx, :], row)
        for j in T.Parallel(N):
            row[j] = row[j] * scale
        T.reduce_sum(row, total, dim=0)
        T.copy(row, Y[bx, :])
        S[bx] = total[0]
    return Y, S


def test_eager_tuple_return():
    x = randn(6, 10, seed=8)
    y, s = row_stats(x)
    torch.testing.assert_close(y, x * 2)
    torch.testing.assert_close(s, (x * 2).sum(1), atol=1e-5, rtol=1e-5)
    y3, _ = row_stats(x, scale=3.0)
    torch.testing.assert_close(y3, x * 3)


@tilelang.jit(out_idx=[-1], execution_backend="cython", pass_configs={"tl.disable_tma_lower": True},
              verbose=False, compile_flags=["-O3"])
def vector_add(block=128):
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32), C: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                idx = bx * block + i
                if idx < n:
                    C[idx] = A[idx] + B[idx]

    return main


def test_dynamic_kernel_runs_for_many_sizes_and_accepts_tilelang_options():
    kernel = vector_add()
    for n in (1, 100, 300):
        a, b = randn(n, seed=n), randn(n, seed=n + 1)
        torch.testing.assert_close(kernel(a, b), a + b)


def test_tilelang_compile_of_a_prim_func():
    @T.prim_func
    def double(A: T.Tensor((16,), T.float32), B: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=16) as bx:
            for i in T.Parallel(16):
                B[i] = A[i] * 2

    kernel = jit_compile(double, out_idx=[-1], execution_backend="cython")
    a = randn(16, seed=9)
    torch.testing.assert_close(kernel(a), a * 2)
    assert tilelang.jit(double, out_idx=1)(a).shape == (16,)


def test_style_detection_and_ir_access():
    assert matmul.style == "classic" and matmul_eager.style == "eager"

    def make(n):
        @T.prim_func
        def main(A: T.Tensor((n,), T.float32)):
            with T.Kernel(1) as bx:
                A[0] = 1.0

        return main

    @tilelang.jit
    def indirect(n):  # returns a prim_func built elsewhere: still a factory
        scratch = torch.empty(n)  # `.empty` of another module is no eager mark
        return make(scratch.shape[0])

    assert indirect.style == "classic"
    func = indirect.get_tir(8)
    assert isinstance(func, PrimFunc) and func.params[0].shape[0].value == 8
    assert isinstance(matmul.get_ir(64, 64, 64), PrimFunc)


def test_jit_module_stays_usable_as_decorator():
    # importing tilelang_x.jit can make the package attribute the module; it must still decorate
    import tilelang_x.jit as module

    deco = module

    @deco(out_idx=[-1])
    def factory():
        @T.prim_func
        def main(A: T.Tensor((4,), T.float32), B: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=4) as bx:
                for i in T.Parallel(4):
                    B[i] = A[i] + 1

        return main

    a = randn(4, seed=10)
    torch.testing.assert_close(factory()(a), a + 1)
