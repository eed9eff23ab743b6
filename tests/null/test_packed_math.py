"""TileLang's packed x2 math (``T.add2`` ... ``T.abs2``), packed values and ``T.fast_rcp``: the
interpreter against exact references, the errors naming the user's line, and the CUDA code for
sm_80 and sm_90a (compiled where a CUDA compiler is installed)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import packed_math as K
from tests.null.cuda_helpers import cuda_source
from tests.null.located import located_errors
from tilelang_x import knobs
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.errors import NotSupportedError, TileLangTypeError

where, raises = located_errors(__file__)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_TL = {torch.float16: T.float16, torch.bfloat16: T.bfloat16, torch.float32: T.float32}


def _run_ops(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    with knobs.scope(target_default="interp"):
        return K.packed_ops(a.numel() // 2, _TL[a.dtype])(a, b, c)


def _check_all_ops(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    out = _run_ops(a, b, c)
    for k, op in enumerate(K.OPS):
        torch.testing.assert_close(out[k], K.reference(op, a, b, c), rtol=0, atol=0, equal_nan=True, msg=op)
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_random_lanes_match_the_exact_reference(dtype):
    g = torch.Generator().manual_seed(7)
    a, b, c = (torch.randn(256, generator=g).to(dtype) * 4 for _ in range(3))
    out = _check_all_ops(a, b, c)
    torch.testing.assert_close(out[0], a + b, rtol=0, atol=0)  # torch rounds these once too
    torch.testing.assert_close(out[4], torch.maximum(a, b), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_special_values_in_every_combination(dtype):
    sv = K.special_values(dtype)
    pairs = [(x, y) for x in sv for y in sv]
    a = torch.tensor([x for x, _ in pairs], dtype=dtype)
    b = torch.tensor([y for _, y in pairs], dtype=dtype)
    c = torch.tensor([sv[(i * 7) % len(sv)] for i in range(len(pairs))], dtype=dtype)
    if len(pairs) % 2:
        a, b, c = (torch.cat([t, t[:1]]) for t in (a, b, c))
    _check_all_ops(a, b, c)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fma2_rounds_once(dtype):
    a, b, c = (torch.tensor(v, dtype=dtype) for v in K.tie_cases(dtype))
    out = _run_ops(a, b, c)[3]
    eps = torch.finfo(dtype).eps
    assert out.tolist() == [1.5 + eps, 1.5 + 2 * eps, 1.5 + 2 * eps, -1.5 - eps]
    product_first = (a * b + c).tolist()  # two roundings: the tie goes to the even side
    assert product_first[0] == 1.5 + 2 * eps != out[0]


def test_overflow_and_subnormals_round_like_torch():
    a = torch.tensor([65504.0, 65504.0, 2.0**-24, -(2.0**-24)], dtype=torch.float16)
    b = torch.tensor([16.0, 15.0, 2.0**-24, 2.0**-24], dtype=torch.float16)
    out = _run_ops(a, b, a)
    torch.testing.assert_close(out[0], a + b, rtol=0, atol=0)
    assert out[0].tolist()[:2] == [math.inf, 65504.0]  # 65520 ties to even: infinity
    torch.testing.assert_close(out[2], a * b, rtol=0, atol=0)


def test_max_min_abs_nan_and_signed_zeros():
    a = torch.tensor([math.nan, 1.0, -0.0, 0.0, math.nan, -math.inf], dtype=torch.float16)
    b = torch.tensor([2.0, math.nan, 0.0, -0.0, math.nan, -0.0], dtype=torch.float16)
    out = _run_ops(a, b, a)
    mx, mn, ab = out[4].tolist(), out[5].tolist(), out[6].tolist()
    assert mx[:2] == [2.0, 1.0] and mn[:2] == [2.0, 1.0]
    assert [math.copysign(1, v) for v in mx[2:4]] == [1, 1]
    assert [math.copysign(1, v) for v in mn[2:4]] == [-1, -1]
    assert math.isnan(mx[4]) and math.isnan(mn[4])
    assert ab[2] == 0.0 and math.copysign(1, ab[2]) == 1 and ab[5] == math.inf and math.isnan(ab[0])


def test_sub2_and_add2_keep_ieee_signed_zeros():
    a = torch.tensor([1.5, -0.0, -0.0, 0.0], dtype=torch.bfloat16)
    b = torch.tensor([1.5, 0.0, -0.0, -0.0], dtype=torch.bfloat16)
    out = _run_ops(a, b, b)
    assert [math.copysign(1, v) for v in out[1].tolist()] == [1, -1, 1, 1]  # x - y
    assert [math.copysign(1, v) for v in out[0].tolist()] == [1, 1, -1, 1]  # x + y
    assert [math.copysign(1, v) for v in out[2].tolist()] == [1, -1, 1, -1]  # x * y


def test_reinterpret_packs_lane_zero_low():
    a = torch.tensor([1.0, -2.0, -0.5, 65504.0], dtype=torch.float16)
    with knobs.scope(target_default="interp"):
        kernel = K.packed_bits(2)
        w = torch.empty(2, dtype=torch.uint32)
        r = kernel(a, w)
    bits = a.abs().view(torch.int16).to(torch.int64) & 0xFFFF
    assert w.to(torch.int64).tolist() == [int(bits[0] | bits[1] << 16), int(bits[2] | bits[3] << 16)]
    torch.testing.assert_close(r, -a.abs(), rtol=0, atol=0)


def test_a_two_element_slice_is_a_pair_as_operand_and_store_target():
    @T.prim_func
    def main(A: T.Tensor((8, 64), T.bfloat16), B: T.Tensor((8, 64), T.bfloat16), C: T.Tensor((8, 64), T.bfloat16)):
        with T.Kernel(1, threads=128):
            for r, p in T.Parallel(8, 32):
                C[r, 2 * p:2 * p + 2] = T.mul2(A[r, 2 * p:2 * p + 2], B[r, T.Ramp(2 * p, 1, 2)])

    g = torch.Generator().manual_seed(3)
    a, b = (torch.randn(8, 64, generator=g).bfloat16() for _ in range(2))
    c = torch.empty(8, 64, dtype=torch.bfloat16)
    with knobs.scope(target_default="interp"):
        tilelang.compile(main, target="interp")(a, b, c)
    torch.testing.assert_close(c, a * b, rtol=0, atol=0)


def test_fast_rcp_is_the_correctly_rounded_reciprocal():
    x = np.array([3.0, -7.0, 0.0, -0.0, np.inf, 1e-30, 2.0**127, np.nan], dtype=np.float32)
    with knobs.scope(target_default="interp"):
        r = K.fast_rcp(len(x))(torch.from_numpy(x)).numpy()
    with np.errstate(divide="ignore"):
        expected = np.float32(1) / x
    np.testing.assert_array_equal(r, expected)
    assert np.signbit(r[3]) and r[2] == np.inf


def test_ir_names_the_lane_and_prints_the_pair():
    x, y = T.float16x2(E.Var("a", T.float16), E.Var("b", T.float16)), T.float16x2(1.0, 2.0)
    s = T.add2(x, y)
    assert s.dtype == "float16x2" and [lane.name for lane in s.lanes] == ["add2.0", "add2.1"]
    assert str(s.lanes[1]) == "T.add2(T.float16x2(a, b), T.float16x2(T.float16(1.0), T.float16(2.0)))[1]"
    assert T.fast_rcp(E.Var("i", T.int32)).args[0].dtype == T.float32
    assert T.reinterpret(T.float32x2, E.Var("w", T.uint64)).elem == T.float32


def test_scalar_operand_names_the_line():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float16)):
            with T.Kernel(1):
                for i in T.Parallel(32):
                    A[T.Ramp(2 * i, 1, 2)] = T.add2(A[2 * i], A[T.Ramp(2 * i, 1, 2)])  # E:scalar

    raises(TileLangTypeError, "scalar", build, "T.add2", "float16x2", "T.Ramp")


def test_mixed_packed_dtypes_name_the_line():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float16), B: T.Tensor((64,), T.bfloat16)):
            with T.Kernel(1):
                for i in T.Parallel(32):
                    idx = T.Ramp(2 * i, 1, 2)
                    A[idx] = T.fma2(A[idx], B[idx], A[idx])  # E:mixed

    raises(TileLangTypeError, "mixed", build, "same dtype", "bfloat16x2", "float16x2")


def test_ramp_lanes_store_and_operator_errors_name_the_line():
    def four_lanes():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float16)):
            with T.Kernel(1):
                for i in T.Parallel(16):
                    A[T.Ramp(4 * i, 1, 4)] = A[4 * i]  # E:lanes

    def scalar_store():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float16)):
            with T.Kernel(1):
                for i in T.Parallel(32):
                    A[T.Ramp(2 * i, 1, 2)] = A[0]  # E:store

    def plus():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float16)):
            with T.Kernel(1):
                for i in T.Parallel(32):
                    idx = T.Ramp(2 * i, 1, 2)
                    A[idx] = A[idx] + A[idx]  # E:plus

    def int_load():
        @T.prim_func
        def main(A: T.Tensor((64,), T.int32)):
            with T.Kernel(1):
                for i in T.Parallel(32):
                    A[2 * i] = T.reinterpret(T.int32, A[T.Ramp(2 * i, 1, 2)])  # E:int

    def element_store():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float16)):
            with T.Kernel(1):
                for i in T.Parallel(32):
                    A[2 * i] = T.abs2(A[T.Ramp(2 * i, 1, 2)])  # E:element

    raises(TileLangTypeError, "lanes", four_lanes, "T.Ramp", "4 lanes")
    raises(TileLangTypeError, "element", element_store, "float16x2", "not a pair", "A[T.Ramp(i, 1, 2)]", "A[i:i + 2]")
    raises(TileLangTypeError, "store", scalar_store, "T.Ramp", "packed value")
    raises(TileLangTypeError, "plus", plus, "float16x2", "T.add2")
    raises(TileLangTypeError, "int", int_load, "`A`", "int32")


def test_reinterpret_width_and_fast_rcp_dtype_name_the_line():
    def width():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32), W: T.Tensor((32,), T.uint32)):
            with T.Kernel(1):
                for i in T.Parallel(32):
                    W[i] = T.reinterpret(T.uint32, A[T.Ramp(2 * i, 1, 2)])  # E:width

    def half():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float16)):
            with T.Kernel(1):
                for i in T.Parallel(64):
                    A[i] = T.fast_rcp(A[i])  # E:rcp

    raises(TileLangTypeError, "width", width, "float32x2", "64 and 32 bits", "uint64")
    raises(TileLangTypeError, "rcp", half, "T.fast_rcp", "float16", "T.cast")


def test_a_buffer_of_packed_dtype_names_the_line():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float16)):
            with T.Kernel(1):
                T.alloc_local((4,), T.bfloat16x2)  # E:buffer

    raises(TileLangTypeError, "buffer", build, "bfloat16x2", "packed pair", "bfloat16 elements", "T.Ramp")


@pytest.mark.parametrize("name", ["ldg32", "ldg128", "ldg256", "stg64", "lds128", "sts32"])
def test_explicit_ptx_loads_and_stores_stay_rejected_with_a_hint(name):
    with pytest.raises(NotSupportedError, match=f"T.{name} is not supported") as info:
        getattr(T, name)
    assert "T.Ramp" in str(info.value) and "T.copy" in str(info.value)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype", [T.float16, T.bfloat16, T.float32], ids=str)
def test_cuda_code_uses_the_paired_instructions_and_compiles(arch, dtype):
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    func = K.packed_ops.get_ir(64, dtype)
    source, ctx = cuda_source(func, arch)
    if dtype == T.float32:
        calls = ("__fadd_rn(", "__fsub_rn(", "__fmul_rn(", "__fmaf_rn(", "tlx_max2_f(", "tlx_min2_f(", "fabsf(")
    else:
        s = "h" if dtype == T.float16 else "b"
        calls = tuple(f"tlx_{op}_{s}(tlx_cvt_{s}2(" for op in K.OPS)
    for call in calls:
        assert call in source, call
    assert ("add.rn.f16x2" in source) and ("fma.rn.bf16x2" in source)
    if find_nvrtc() is None and find_nvcc() is None:
        pytest.skip("no CUDA compiler here")
    assert len(compile_cuda(source, arch, kernel_name=ctx.data["cuda.meta"].kernel_name).cubin) > 0


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("which", ["fast_rcp", "packed_bits"])
def test_cuda_fast_rcp_and_packed_words_compile(arch, which):
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    func = K.fast_rcp.get_ir(64) if which == "fast_rcp" else K.packed_bits.get_ir(32)
    source, ctx = cuda_source(func, arch)
    if which == "fast_rcp":
        assert "= tlx_fast_rcp(A[" in source and "rcp.approx.ftz.f32" in source
    if find_nvrtc() is None and find_nvcc() is None:
        pytest.skip("no CUDA compiler here")
    assert len(compile_cuda(source, arch, kernel_name=ctx.data["cuda.meta"].kernel_name).cubin) > 0
