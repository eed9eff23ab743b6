"""A T.gemm whose operands have two types has no tensor-core form: it runs as a per-element FMA
loop, and the compiler warns (``PerformanceWarning``) at the gemm's line, naming both operands."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source
from tilelang_x.errors import PerformanceWarning


@tilelang.jit(out_idx=[-1])
def two_type_gemm(a_dtype, b_dtype, n=128):
    @T.prim_func
    def main(A: T.Tensor((n, n), a_dtype), B: T.Tensor((n, n), b_dtype), C: T.Tensor((n, n), T.float32)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((n, 32), a_dtype)
            B_s = T.alloc_shared((32, n), b_dtype)
            C_f = T.alloc_fragment((n, n), T.float32)
            T.clear(C_f)
            for k in T.Pipelined(n // 32, num_stages=2):
                T.copy(A[0, k * 32], A_s)
                T.copy(B[k * 32, 0], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C)

    return main


GEMM_LINE = next(i + 1 for i, ln in enumerate(Path(__file__).read_text().splitlines())
                 if ln.strip() == "T.gemm(A_s, B_s, C_f)")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_gemm_of_two_types_warns_at_its_line(arch: str) -> None:
    with pytest.warns(PerformanceWarning, match=r"float16 `A_s` by bfloat16 `B_s`.*FMA loop") as caught:
        source = cuda_source(two_type_gemm.get_ir(T.float16, T.bfloat16), arch)[0]
    body = source[source.index('extern "C"'):]
    assert not re.search(r"tlx_wgmma_[sr]s_|tlx_mma", body)
    (w,) = [w for w in caught if issubclass(w.category, PerformanceWarning)]
    assert (w.filename, w.lineno) == (__file__, GEMM_LINE)
    assert "hint: give both operands one type" in str(w.message)


@pytest.mark.parametrize("a, b", [(T.float16, T.float16), (T.float8_e4m3, T.float8_e5m2), (T.int8, T.uint8)])
def test_operands_a_tensor_core_takes_do_not_warn(a, b) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)
        cuda_source(two_type_gemm.get_ir(a, b), "sm_90a")
