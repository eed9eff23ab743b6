"""A T.gemm of shared operands that misses the tensor cores for what is most likely a slip —
operands of two types, 16-bit floats accumulated in 16 bits, a K tile or a block of warps the mma
atoms do not fit — runs as a per-element FMA loop, and the compiler warns (``PerformanceWarning``)
at the gemm's line, saying what to change. Forms with no tensor-core path meant do not warn."""

from __future__ import annotations

import re
import warnings

import pytest

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source, sass_text
from tests.null.located import located_warnings
from tilelang_x.errors import PerformanceWarning


@tilelang.jit(out_idx=[-1])
def small_gemm(a_dtype, b_dtype, c_dtype=T.float32, threads=128, block_K=32, n=128):
    @T.prim_func
    def main(A: T.Tensor((n, n), a_dtype), B: T.Tensor((n, n), b_dtype), C: T.Tensor((n, n), c_dtype)):
        with T.Kernel(1, threads=threads):
            A_s = T.alloc_shared((n, block_K), a_dtype)
            B_s = T.alloc_shared((block_K, n), b_dtype)
            C_f = T.alloc_fragment((n, n), c_dtype)
            T.clear(C_f)
            for k in T.Pipelined(n // block_K, num_stages=2):
                T.copy(A[0, k * block_K], A_s)
                T.copy(B[k * block_K, 0], B_s)
                T.gemm(A_s, B_s, C_f)  # E:gemm
            T.copy(C_f, C)

    return main


warns = located_warnings(__file__)

SLIPS = [
    ((T.float16, T.bfloat16), r"`A_s` is float16 and `B_s` is bfloat16", "give both operands one type"),
    ((T.float16, T.float16, T.float16), r"`C_f` accumulates in float16", "as a float32 fragment"),
    ((T.bfloat16, T.bfloat16, T.float32, 96, 32, 64), r"64x64 tile does not split .* 3 warps", "threads=128 or 256"),
    ((T.float16, T.float16, T.float32, 128, 24), r"K=24 is not a multiple of 16", "a multiple of 16"),
]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("args, what, hint", SLIPS, ids=["two_types", "fp16_accumulator", "96_threads", "k24"])
def test_a_slip_off_the_tensor_cores_warns_at_the_gemms_line(arch: str, args: tuple, what: str, hint: str) -> None:
    (source, _), _ = warns(PerformanceWarning, "gemm", lambda: cuda_source(small_gemm.get_ir(*args), arch),
                           what + ".*FMA loop", "hint:.*" + re.escape(hint))
    assert not re.search(r"tlx_wgmma_[sr]s_|tlx_mma", source[source.index('extern "C"'):])


@pytest.mark.parametrize("args", [(T.float16, T.float16), (T.float8_e4m3, T.float8_e5m2), (T.int8, T.uint8),
                                  (T.float32, T.float32)])
def test_forms_meant_for_their_path_do_not_warn(args: tuple) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)
        cuda_source(small_gemm.get_ir(*args), "sm_90a")


def test_the_fma_loop_keeps_k_outside_and_does_not_spill() -> None:
    """Each k-step is an outer product over the thread's accumulators (lower/gemm.py ``_fma``): the
    128 FMAs of one step, each operand element loaded once; with K inside, NVVM unrolled all of K
    into each accumulator and spilled."""
    func = small_gemm.get_ir(T.float16, T.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PerformanceWarning)
        source = cuda_source(func, "sm_80")[0]
        gemm = source[source.index("// gemm"):]
        assert gemm.index("for (int k_") < gemm.index("#pragma unroll") < gemm.index("for (int v_")
        sass = sass_text(func, "sm_80")
    assert sass.count("FFMA") == 128 and not re.search(r"\b(LDL|STL)\b", sass)
