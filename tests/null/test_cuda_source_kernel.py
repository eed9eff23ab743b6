"""``T.CUDASourceCodeKernel``: a kernel that is external CUDA code, launched with the function's
parameters (CUDA only)."""

from __future__ import annotations

import pytest
import torch

import tilelang_x
import tilelang_x.language as T
from tests.null.cuda_helpers import assert_compiles, cuda_source
from tilelang_x.core_ir.errors import BackendNotImplementedError, TileLangError, TileLangSyntaxError

SCALE = """
extern "C" __global__ void scale_kernel(const float* x, float* y, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = s * x[i];
}
"""


def _scale(source=SCALE, entry="scale_kernel", **kw):
    @T.prim_func
    def scale(X: T.Tensor((1000,), T.float32), Y: T.Tensor((1000,), T.float32), s: T.float32, n: T.int32):
        T.CUDASourceCodeKernel(T.ceildiv(1000, 128), threads=128, source_code_or_path=source, entry_name=entry,
                               **kw)

    return scale


def test_the_module_is_the_users_code_and_the_entry_its_kernel() -> None:
    src, ctx = cuda_source(_scale(), "sm_80")
    assert SCALE in src
    meta = ctx.data["cuda.meta"]
    assert meta.kernel_name == "scale_kernel" and meta.block == (128, 1, 1) and meta.grid_static == (8, 1, 1)
    assert [(p.kind, p.dtype) for p in meta.params] == [("buffer", "float32"), ("buffer", "float32"),
                                                        ("scalar", "float32"), ("scalar", "int32")]
    for arch in ("sm_80", "sm_90a"):
        src, ctx = cuda_source(_scale(), arch)
        assert ctx.data["cuda.meta"].kernel_name == "scale_kernel"
        assert_compiles(src, arch, ctx)


def test_a_file_and_a_prelude(tmp_path) -> None:
    path = tmp_path / "scale.cu"
    path.write_text(SCALE.replace("s * x[i]", "TLX_K * s * x[i]"))
    src, _ = cuda_source(_scale(str(path), prelude="#define TLX_K 2.0f"), "sm_80")
    assert src.index("#define TLX_K 2.0f") < src.index("TLX_K * s * x[i]")


def test_the_interpreter_refuses_it() -> None:
    with pytest.raises(BackendNotImplementedError, match="CUDASourceCodeKernel") as info:
        tilelang_x.compile(_scale(), target="interp")(torch.zeros(1000), torch.zeros(1000), 1.0, 1000)
    assert "cuda" in info.value.hint


def test_mistakes_are_named() -> None:
    with pytest.raises(TileLangError, match="no __global__ function `main_kernel`"):
        _scale(entry="main_kernel")
    with pytest.raises(TileLangError, match='not declared extern "C"'):
        _scale(SCALE.replace('extern "C" ', ""))
    with pytest.raises(TileLangError, match="not a CUDA file that exists"):
        _scale("missing_kernel.cu")
    with pytest.raises(TileLangSyntaxError, match="cannot be inside T.Kernel"):
        @T.prim_func
        def nested(X: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=32):
                T.CUDASourceCodeKernel(1, threads=32, source_code_or_path=SCALE, entry_name="scale_kernel")


def test_dynamic_sizes_are_refused_on_cuda() -> None:
    n = T.dynamic("n")

    @T.prim_func
    def dyn(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32), s: T.float32, m: T.int32):
        T.CUDASourceCodeKernel(T.ceildiv(n, 128), threads=128, source_code_or_path=SCALE, entry_name="scale_kernel")

    with pytest.raises(BackendNotImplementedError, match="dynamic sizes"):
        cuda_source(dyn, "sm_80")


def test_a_grid_over_a_scalar_parameter() -> None:
    @T.prim_func
    def scale(X: T.Tensor((1000,), T.float32), Y: T.Tensor((1000,), T.float32), s: T.float32, n: T.int32):
        T.CUDASourceCodeKernel(T.ceildiv(n, 128), threads=128, source_code_or_path=SCALE, entry_name="scale_kernel")

    _, ctx = cuda_source(scale, "sm_80")
    meta = ctx.data["cuda.meta"]
    assert meta.dims == ("n",) and meta.grid_static is None
    assert [p.kind for p in meta.params] == ["buffer", "buffer", "scalar", "scalar"]  # n stays an argument
