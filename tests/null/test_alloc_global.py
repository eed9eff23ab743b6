"""T.alloc_global: a workspace the runtime allocates per call, a hidden last parameter shared by every
kernel of the function."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import workspace
from tests.null.cuda_helpers import cuda_source
from tests.null.located import located_errors
from tilelang_x import knobs
from tilelang_x.args import ArgBinder
from tilelang_x.args_fast import fast_path
from tilelang_x.core_ir.kernel_parts import kernel_parts
from tilelang_x.core_ir.stmt import WORKSPACES
from tilelang_x.errors import ArgumentError, TileLangSyntaxError, TileLangTypeError

where, raises = located_errors(__file__)


@tilelang.jit(out_idx=[-1])
def doubled_plus_one(n, block=64):
    """Two kernels: ``W = 2 A`` into a workspace, then ``B = W + 1``; with an output declared too."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        W = T.alloc_global((n,), T.float32)
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    W[bx * block + i] = A[bx * block + i] * 2.0
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    B[bx * block + i] = W[bx * block + i] + 1.0

    return main


@tilelang.jit
def eager_doubled_plus_one(A, block: int = 64):
    N = T.const("N")
    A: T.Tensor((N,), T.float32)
    B = T.empty((N,), T.float32)
    W = T.alloc_global((N,), T.float32)
    with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
        for i in T.Parallel(block):
            if bx * block + i < N:
                W[bx * block + i] = A[bx * block + i] * 2.0
    with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
        for i in T.Parallel(block):
            if bx * block + i < N:
                B[bx * block + i] = W[bx * block + i] + 1.0
    return B


def test_workspace_is_the_last_parameter_and_out_idx_skips_it() -> None:
    func = doubled_plus_one.get_ir(100)
    assert [p.name for p in func.params] == ["A", "B", "W"]
    assert func.out_idx == (1,)  # out_idx=[-1] is B, the last declared parameter
    assert func.attr(WORKSPACES) == (2,) and func.n_visible == 2
    assert "# workspaces=(2,)" in func.script()


def test_workspace_after_empty_outputs_in_eager_style() -> None:
    x = torch.arange(100, dtype=torch.float32)
    with knobs.scope(target_default="interp"):
        torch.testing.assert_close(eager_doubled_plus_one(x), x * 2 + 1)
    func = eager_doubled_plus_one.get_ir(x)
    assert [p.name for p in func.params] == ["A", "B", "W"] and func.attr(WORKSPACES) == (2,)


def test_interpreter_runs_the_two_kernels_through_the_workspace() -> None:
    x = torch.randn(100)
    with knobs.scope(target_default="interp"):
        kernel = doubled_plus_one(100)
        torch.testing.assert_close(kernel(x), x * 2 + 1)
        out = torch.zeros(100)
        assert kernel(x, out) is None  # every visible parameter passed: written in place
        torch.testing.assert_close(out, x * 2 + 1)
        with pytest.raises(ArgumentError, match=r"takes 1 input\(s\) \(A\) but got 3") as info:
            kernel(x, out, torch.zeros(100))
        assert "pass all 2 parameters" in str(info.value)


@pytest.mark.parametrize("passed", ["inputs", "every visible"])
def test_binder_allocates_the_workspace_on_every_call(passed: str) -> None:
    func = doubled_plus_one.get_ir(100)
    binder = ArgBinder(func, func.out_idx, "cpu")
    x, out = torch.randn(100), torch.empty(100)
    args = (x,) if passed == "inputs" else (x, out)
    fast = fast_path(binder)
    assert fast is not None and "a2 = " in fast.source
    for bind in (binder.bind, fast):
        values, _, _ = bind(args)
        again, _, _ = bind(args)
        assert len(values) == 3 and values[2].shape == (100,) and values[2].dtype == torch.float32
        assert values[2] is not again[2] and values[2] is not x


def test_both_cuda_kernels_take_the_workspace() -> None:
    first, second = kernel_parts(workspace.matmul_split_k.get_ir(128, 192, 512))
    writes = cuda_source(first)[0]
    reads = cuda_source(second)[0]
    assert "float* __restrict__ Partial)" in writes and "const float* __restrict__ Partial)" not in writes
    assert "const float* __restrict__ Partial)" in reads


def test_unbound_size_names_the_line() -> None:
    def make():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            W = T.alloc_global((T.dynamic("q"),), T.float32)  # E:unbound
            with T.Kernel(1, threads=64):
                for i in T.Parallel(64):
                    W[i] = A[i]

    raises(TileLangSyntaxError, "unbound", make, "the size of `W` uses `q`, which no parameter sets")


def test_other_scope_and_bad_shape_are_refused() -> None:
    def scoped():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            T.alloc_global((64,), T.float32, scope="shared")  # E:scope
            with T.Kernel(1, threads=64):
                T.clear(A)

    def shaped():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            T.alloc_global((64.5,), T.float32)  # E:shape
            with T.Kernel(1, threads=64):
                T.clear(A)

    raises(TileLangSyntaxError, "scope", scoped, "scope='shared' is not supported")
    raises(TileLangTypeError, "shape", shaped, "shape entry 64.5")
