"""T.ptr parameters typed by T.make_tensor: the IR, the argument binding (tensors viewed from their
first element, bounds, dtype, integer addresses) and the located errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import workspace
from tests.null.cuda_helpers import cuda_source
from tests.null.located import located_errors
from tilelang_x import knobs
from tilelang_x.args import ArgBinder
from tilelang_x.core_ir.stmt import POINTERS
from tilelang_x.errors import ArgumentError, TileLangSyntaxError, TileLangTypeError

where, raises = located_errors(__file__)


@tilelang.jit
def scale_rows(rows, cols, stride=None, block=64):
    """``X[r, c] *= 2`` over a pointer made into a ``rows x cols`` tensor (row stride ``stride``)."""

    @T.prim_func
    def main(x_ptr: T.ptr(T.float32), n: T.int32):
        X = T.make_tensor(x_ptr, (rows, cols), strides=None if stride is None else (stride, 1))  # E:made
        with T.Kernel(rows, threads=block) as bx:
            for j in T.Parallel(block):
                if j < cols and bx < n:
                    X[bx, j] = X[bx, j] * 2.0

    return main


@tilelang.jit
def copy_n(block=64):
    """``Y[:n] = X[:n]``: both tensors sized by the scalar parameter ``n``."""

    @T.prim_func
    def main(x_ptr: T.ptr, y_ptr: T.ptr, n: T.int32):
        X = T.make_tensor(x_ptr, (n,), T.float16)
        Y = T.make_tensor(y_ptr, (n,), T.float16)
        with T.Kernel(4, threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    Y[bx * block + i] = X[bx * block + i]

    return main


@tilelang.jit
def fill_pairs(block=64):
    """``X[i] = i`` for ``i < 2 n``: a size derived from the scalar parameter ``n``."""

    @T.prim_func
    def main(x_ptr: T.ptr(T.int32), n: T.int32):
        X = T.make_tensor(x_ptr, (n * 2,))  # E:pairs
        with T.Kernel(2, threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n * 2:
                    X[bx * block + i] = bx * block + i

    return main


@tilelang.jit
def eager_negate(x_ptr, n: int, block: int = 64):
    x_ptr: T.ptr
    X = T.make_tensor(x_ptr, (n // 10, 10), T.float32)
    with T.Kernel(n // 10, threads=block) as bx:
        for i in T.Parallel(block):
            if i < 10:
                X[bx, i] = -X[bx, i]


def test_the_pointer_parameter_becomes_the_made_tensor() -> None:
    func = copy_n.get_ir()
    assert func.attr(POINTERS) == (0, 1)
    x, y, n = func.params
    assert (x.name, x.dtype.name, y.name, y.shape) == ("x_ptr", "float16", "y_ptr", (n,))
    assert "x_ptr: T.Tensor((n,), float16)" in func.script()
    source = cuda_source(func)[0]
    assert "main_kernel(const tlx_half* __restrict__ x_ptr, tlx_half* __restrict__ y_ptr, int n)" in source


def test_declared_dtype_is_the_default() -> None:
    assert scale_rows.get_ir(4, 8).params[0].dtype.name == "float32"


def test_interpreter_writes_through_a_slice_and_strides() -> None:
    with knobs.scope(target_default="interp"):
        big = torch.arange(40, dtype=torch.float32)
        scale_rows(2, 8)(big[10:], 2)  # memory from the slice's first element
        want = torch.arange(40, dtype=torch.float32)
        want[10:26] *= 2
        torch.testing.assert_close(big, want)
        grid = torch.arange(24, dtype=torch.float32).reshape(3, 8)
        scale_rows(3, 4, stride=8)(grid, 3)  # the first 4 columns of each row of 8
        want = torch.arange(24, dtype=torch.float32).reshape(3, 8)
        want[:, :4] *= 2
        torch.testing.assert_close(grid, want)
        arr = np.arange(16, dtype=np.float32)
        scale_rows(2, 8)(arr, 1)  # numpy: only row 0 (n = 1)
        assert arr[:8].tolist() == [2.0 * i for i in range(8)] and arr[8:].tolist() == list(range(8, 16))


def test_sizes_come_from_the_scalar_parameter() -> None:
    x = torch.randn(200).half()
    y = torch.zeros(300).half()
    with knobs.scope(target_default="interp"):
        copy_n()(x, y, 150)
    torch.testing.assert_close(y[:150], x[:150])
    assert not y[150:].any()


def test_derived_size_and_integer_dtype() -> None:
    x = torch.full((100,), -1, dtype=torch.int32)
    with knobs.scope(target_default="interp"):
        fill_pairs()(x, 40)
        raises(ArgumentError, "pairs", lambda: fill_pairs()(torch.zeros(70, dtype=torch.int32), 40), "reaches 80")
    assert x[:80].tolist() == list(range(80)) and (x[80:] == -1).all()


def test_eager_style_pointer() -> None:
    x = torch.arange(75, dtype=torch.float32)  # 1-d memory for a 7 x 10 tensor
    with knobs.scope(target_default="interp"):
        eager_negate(x, 70)
    want = torch.arange(75, dtype=torch.float32)
    want[:70] *= -1
    torch.testing.assert_close(x, want)


def test_pointer_gemm_matches_torch_with_bigger_buffers() -> None:
    a, b = torch.randn(128, 96).half(), torch.randn(64, 96).half()
    c = torch.zeros(128 * 64 + 5)  # larger than the made tensor: fine
    with knobs.scope(target_default="interp"):
        workspace.matmul_pointers(128, 64, 96)(a, b, c, 128, 64, 96)
    torch.testing.assert_close(c[:128 * 64].reshape(128, 64), a.float() @ b.float().T, atol=1e-3, rtol=1e-3)
    assert not c[128 * 64:].any()


def test_call_errors_name_the_make_tensor_line() -> None:
    with knobs.scope(target_default="interp"):
        kernel = scale_rows(2, 8)
        raises(ArgumentError, "made", lambda: kernel(torch.zeros(20)[5:], 2),
               "pointer parameter `x_ptr`", "reaches 16 elements", "holds 15 from its first element")
        raises(ArgumentError, "made", lambda: kernel(torch.zeros(16, dtype=torch.float16), 2),
               "made a float32 tensor over it", "torch.float16")
        raises(ArgumentError, "made", lambda: kernel(torch.zeros(16).data_ptr(), 2),
               "integer address", "takes tensors only")
        raises(ArgumentError, "made", lambda: kernel(np.zeros((4, 8), np.float32)[:, :4], 2), "not contiguous")


def test_binder_views_cuda_memory_without_a_gpu() -> None:
    func = copy_n.get_ir()
    binder = ArgBinder(func, (), "cuda")
    with pytest.raises(ArgumentError, match="is on device 'cpu', but the kernel runs on 'cuda'"):
        binder.bind((torch.zeros(8).half(), torch.zeros(8).half(), 8))
    assert binder._fast is None  # pointer kernels take the checked path


def test_trace_errors() -> None:
    def twice():
        @T.prim_func
        def main(p: T.ptr):
            T.make_tensor(p, (8,), T.float32)
            T.make_tensor(p, (4,), T.float32)  # E:twice
            with T.Kernel(1, threads=32):
                pass

    def not_a_pointer():
        @T.prim_func
        def main(A: T.Tensor((8,), T.float32)):
            T.make_tensor(A, (8,), T.float32)  # E:tensor
            with T.Kernel(1, threads=32):
                pass

    def dtype_clash():
        @T.prim_func
        def main(p: T.ptr(T.float16)):
            T.make_tensor(p, (8,), T.float32)  # E:dtype
            with T.Kernel(1, threads=32):
                pass

    def unmade():
        @T.prim_func
        def main(p: T.ptr, A: T.Tensor((8,), T.float32)):  # E:unmade
            with T.Kernel(1, threads=32):
                T.clear(A)

    def pointer_table():  # TileLang's example_grouped_gemm_fwd_ptr: a pointer a group, in one tensor
        @T.prim_func
        def main(A_ptrs: T.Tensor([3], T.ptr), offsets: T.Tensor([3], T.int32)):  # E:table
            with T.Kernel(3, threads=32) as bx:
                A = T.make_tensor(A_ptrs[bx], (64, 64), T.float16)
                T.clear(A)

    def unbound():
        @T.prim_func
        def main(p: T.ptr):
            X = T.make_tensor(p, (T.dynamic("q"),), T.float32)  # E:unbound
            with T.Kernel(1, threads=32):
                T.clear(X)

    raises(TileLangSyntaxError, "twice", twice, "already made into a tensor at", "T.view")
    raises(TileLangTypeError, "tensor", not_a_pointer, "takes a parameter annotated `T.ptr`")
    raises(TileLangTypeError, "dtype", dtype_clash, "declared T.ptr(float16)", "dtype float32")
    raises(TileLangSyntaxError, "unmade", unmade, "pointer parameter `p` of `main` is never made into a tensor")
    error = raises(TileLangTypeError, "table", pointer_table, "tensors of pointers (pointer tables) are not supported")
    assert "row offsets in an int32 tensor" in error.hint
    raises(TileLangSyntaxError, "unbound", unbound, "the size of `p` uses `q`, which no parameter sets")
