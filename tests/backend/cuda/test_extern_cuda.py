"""``T.import_source`` / ``T.call_extern``, ``T.Kernel(prelude=...)`` and ``T.CUDASourceCodeKernel`` run
on the GPU: kernels calling ``__device__`` functions they import or define in their prelude, and an
external ``__global__`` kernel, against torch."""

from __future__ import annotations

import torch

import tilelang_x
import tilelang_x.language as T

SOURCE = "__device__ float scaled_square(float x, float s) { return x * x * s; }"


def test_an_imported_device_function_runs() -> None:
    @T.prim_func
    def main(A: T.Tensor((1000,), T.float32), B: T.Tensor((1000,), T.float32)):
        with T.Kernel(T.ceildiv(1000, 128), threads=128) as bx:
            T.import_source(SOURCE)
            for i in T.Parallel(128):
                k = bx * 128 + i
                if k < 1000:
                    B[k] = T.call_extern(T.float32, "scaled_square", A[k], 0.5)

    kernel = tilelang_x.compile(main, out_idx=[1], target="cuda")
    a = torch.randn(1000, device="cuda")
    torch.testing.assert_close(kernel(a), a * a * 0.5)


PRELUDE = "#define TLX_SCALE 3.0f\n__device__ float tlx_scale() { return TLX_SCALE; }\n" + SOURCE


def test_a_kernel_prelude_runs() -> None:
    @T.prim_func
    def main(A: T.Tensor((1000,), T.float32), B: T.Tensor((1000,), T.float32)):
        with T.Kernel(T.ceildiv(1000, 128), threads=128, prelude=PRELUDE) as bx:
            for i in T.Parallel(128):
                k = bx * 128 + i
                if k < 1000:
                    B[k] = T.call_extern(T.float32, "scaled_square", A[k], T.call_extern(T.float32, "tlx_scale"))

    kernel = tilelang_x.compile(main, out_idx=[1], target="cuda")
    assert PRELUDE in kernel.get_kernel_source()
    a = torch.randn(1000, device="cuda")
    torch.testing.assert_close(kernel(a), a * a * 3.0)


def test_an_external_cuda_kernel_runs() -> None:
    from tests.null.test_cuda_source_kernel import _scale

    kernel = tilelang_x.compile(_scale(), out_idx=[1], target="cuda")
    x = torch.randn(1000, device="cuda")
    torch.testing.assert_close(kernel(x, 1.5, 1000), 1.5 * x)


def test_an_external_kernel_on_a_grid_over_a_scalar() -> None:
    from tests.null.test_cuda_source_kernel import SCALE

    @T.prim_func
    def scale(X: T.Tensor((1000,), T.float32), Y: T.Tensor((1000,), T.float32), s: T.float32, n: T.int32):
        T.CUDASourceCodeKernel(T.ceildiv(n, 128), threads=128, source_code_or_path=SCALE, entry_name="scale_kernel")

    kernel = tilelang_x.compile(scale, out_idx=[1], target="cuda")
    x = torch.randn(1000, device="cuda")
    y = kernel(x, 2.0, 600)  # only the first 600 are scaled; Y is allocated, so compare those
    torch.testing.assert_close(y[:600], 2.0 * x[:600])
