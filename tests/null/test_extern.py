# Kernel code is written as users write it (unused block and loop variables included).
# ruff: noqa: F841, B007
"""``T.import_source`` / ``T.call_extern`` / ``T.evaluate``: the CUDA code (the imported source
once before the kernel, calls as expressions and statements, never merged or dropped), an nvcc
compile of a kernel calling ``__device__`` functions it imports, and the located errors
(``# E:<tag>`` marks the line an error names)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source
from tests.null.located import located_errors
from tilelang_x import knobs
from tilelang_x.core_ir.errors import BackendNotImplementedError, TileLangSyntaxError

where, raises = located_errors(__file__)

SOURCE = """
__device__ __forceinline__ float twice_plus(float x, float y) { return 2.0f * x + y; }
__device__ __forceinline__ void check_index(int k) { if (k < 0) __trap(); }
"""


def extern_kernel(n: int = 256):
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            T.import_source(SOURCE)
            T.import_source(SOURCE)
            T.evaluate(T.call_extern("void", "check_index", bx))  # E:extern
            for i in T.Parallel(128):
                k = bx * 128 + i
                first = T.call_extern(T.float32, "twice_plus", A[k], 1.0)
                B[k] = first - T.call_extern("float32", "twice_plus", A[k], 1.0)

    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_imports_once_and_keeps_every_call(arch):
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    source, ctx = cuda_source(extern_kernel(), arch)
    assert source.count("float twice_plus(float x, float y)") == 1
    assert source.index("twice_plus(float x") < source.index("__global__")
    body = source[source.index("__global__"):]
    assert body.count("twice_plus(") == 2  # the difference of two calls is not folded to 0
    assert "check_index(bx);" in body
    assert source == cuda_source(extern_kernel(), arch)[0]  # deterministic: it keys the cubin cache
    if find_nvrtc() is None and find_nvcc() is None:
        pytest.skip("no CUDA compiler here")
    assert len(compile_cuda(source, arch, kernel_name=ctx.data["cuda.meta"].kernel_name).cubin) > 0


def test_import_source_is_part_of_the_function_text():
    assert "twice_plus" in extern_kernel().script()


def test_interpreter_names_the_line_of_the_call():
    a = torch.from_numpy(np.arange(256, dtype=np.float32))

    def run():
        with knobs.scope(target_default="interp"):
            tilelang.compile(extern_kernel(), target="interp")(a, torch.empty(256))

    err = raises(BackendNotImplementedError, "extern", run, "check_index", "external device code")
    assert "CUDA" in err.hint


def test_dropped_and_misused_calls_name_the_line():
    def dropped():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64) as bx:
                T.call_extern("void", "check_index", bx)  # E:dropped

    def void_value():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64) as bx:
                for i in T.Parallel(64):
                    A[i] = T.call_extern("handle", "check_index", i)  # E:void

    def name_first():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64) as bx:
                for i in T.Parallel(64):
                    A[i] = T.call_extern("twice_plus", "float32 x", i)  # E:order

    raises(TileLangSyntaxError, "dropped", dropped, "never used", "T.evaluate")
    raises(TileLangSyntaxError, "void", void_value, "no value")
    raises(TileLangSyntaxError, "order", name_first, "function name")
