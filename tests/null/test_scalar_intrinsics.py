# Kernel code is written as users write it (unused block and loop variables included).
# ruff: noqa: F841, B007
"""TileLang's / TVM's scalar intrinsics: the IR they build, what the interpreter computes, the CUDA
they emit, and the located errors for their misuse (``# E:<tag>`` marks the line an error names)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source
from tests.null.located import located_errors
from tilelang_x import knobs
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.errors import TileLangTypeError

where, raises = located_errors(__file__)


def elementwise(fn, in_dtype, out_dtype, n: int = 64):
    """A kernel ``B[i] = fn(A[i])`` over ``n`` elements (one ``T.Parallel`` loop)."""

    @T.prim_func
    def main(A: T.Tensor((n,), in_dtype), B: T.Tensor((n,), out_dtype)):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(n):
                B[i] = fn(A[i])

    return main


def run_interp(func, *inputs: np.ndarray, out_dtype: torch.dtype) -> torch.Tensor:
    args = [torch.from_numpy(np.ascontiguousarray(x)) for x in inputs]
    out = torch.empty(args[0].shape, dtype=out_dtype)
    with knobs.scope(target_default="interp"):
        tilelang.compile(func, target="interp")(*args, out)
    return out


# ---- bit operations ----------------------------------------------------------------------------

def test_bit_op_names_build_the_operators_ir():
    x = E.Var("x", T.int32)
    assert T.shift_left(x, 3).same_as(x << 3)
    assert T.shift_right(x, 3).same_as(x >> 3)
    assert T.bitwise_and(x, 7).same_as(x & 7)
    assert T.bitwise_or(x, 7).same_as(x | 7)
    assert T.bitwise_xor(x, 7).same_as(x ^ 7)
    assert T.bitwise_not(x).same_as(~x)
    assert T.shift_right(E.Var("w", T.uint8), 4).dtype == T.uint8
    assert int(T.shift_left(3, 4)) == 48


def test_shift_right_is_arithmetic_on_signed_and_logical_on_unsigned():
    values = np.array([-128, -7, -1, 0, 5, 127] * 8, dtype=np.int8)
    signed = run_interp(elementwise(lambda a: T.shift_right(a, 2), T.int8, T.int8, 48), values,
                        out_dtype=torch.int8)
    assert signed.tolist() == (values >> 2).tolist()
    unsigned = run_interp(elementwise(lambda a: T.shift_right(a, 2), T.uint8, T.uint8, 48), values.view(np.uint8),
                          out_dtype=torch.uint8)
    assert unsigned.tolist() == (values.view(np.uint8) >> 2).tolist()
    assert unsigned.tolist() != signed.view(torch.uint8).tolist()


def test_truncmod_has_the_dividends_sign():
    a = np.array([7, -7, 7, -7] * 16, dtype=np.int32)
    out = run_interp(elementwise(lambda x: T.truncmod(x, 3), T.int32, T.int32), a, out_dtype=torch.int32)
    assert out.tolist()[:4] == [1, -1, 1, -1]
    assert int(T.truncmod(-7, 3)) == -1
    f = run_interp(elementwise(lambda x: T.truncmod(x, 2.0), T.float32, T.float32), a.astype(np.float32),
                   out_dtype=torch.float32)
    assert f.tolist()[:2] == [1.0, -1.0]


def test_bit_op_on_float_names_the_line():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.int32)):
            with T.Kernel(1) as bx:
                for i in T.Parallel(64):
                    B[i] = T.shift_left(A[i], 2)  # E:shl-float

    raises(TileLangTypeError, "shl-float", build, "<<", "float32")


def test_bitwise_not_on_float_names_the_line():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                for i in T.Parallel(64):
                    B[i] = T.bitwise_not(A[i])  # E:not-float

    raises(TileLangTypeError, "not-float", build, "~", "float32")


def test_bit_ops_emit_c_operators():
    func = elementwise(lambda a: T.bitwise_xor(T.shift_right(a, 3), T.shift_left(a, 1)), T.uint32, T.uint32)
    source, _ = cuda_source(func)
    assert ">> 3u" in source and "<< 1u" in source and " ^ " in source


# ---- T.reinterpret -----------------------------------------------------------------------------

BIT_CASTS = [  # (source dtype, destination dtype, numpy source values)
    (T.uint16, T.float16, np.array([0x3C00, 0xC000, 0x7BFF, 0x0001], dtype=np.uint16)),
    (T.float16, T.int16, np.array([1.0, -2.0, 65504.0, 6e-8], dtype=np.float16)),
    (T.uint32, T.float32, np.array([0x3F800000, 0xBF800000, 0x7F7FFFFF, 1], dtype=np.uint32)),
    (T.int32, T.float32, np.array([0x40490FDB, -1082130432, 0, 1], dtype=np.int32)),
    (T.float32, T.int32, np.array([1.0, -1.0, 3.5, -0.0], dtype=np.float32)),
    (T.float64, T.int64, np.array([1.0, -2.5, 1e300, -0.0], dtype=np.float64)),
    (T.int8, T.uint8, np.array([-1, -128, 127, 0], dtype=np.int8)),
]


@pytest.mark.parametrize("src,dst,values", BIT_CASTS, ids=[f"{s}-{d}" for s, d, _ in BIT_CASTS])
def test_reinterpret_is_numpy_view(src, dst, values):
    values = np.tile(values, 16)
    out_dtype = getattr(torch, dst.name)
    out = run_interp(elementwise(lambda a: T.reinterpret(dst, a), src, dst), values, out_dtype=out_dtype)
    expected = values.view(np.dtype(dst.name))
    assert out.numpy().view(np.uint8).tobytes() == expected.view(np.uint8).tobytes()


@pytest.mark.parametrize("dst,torch_dtype", [(T.bfloat16, torch.bfloat16), (T.float8_e4m3fn, torch.float8_e4m3fn),
                                              (T.float8_e5m2, torch.float8_e5m2)])
def test_reinterpret_narrow_floats_match_torch_view(dst, torch_dtype):
    if dst.bits == 16:
        bits = (torch.randn(64, generator=torch.Generator().manual_seed(3)) * 1e3).to(torch_dtype).view(torch.int16)
        src = T.int16
    else:
        bits = torch.arange(256, dtype=torch.int32).to(torch.uint8)
        keep = ~bits.view(torch_dtype).float().isnan()
        bits = bits[keep][:64].contiguous()
        src = T.uint8
    n = bits.numel()
    values = run_interp(elementwise(lambda a: T.reinterpret(dst, a), src, dst, n), bits.numpy(), out_dtype=torch_dtype)
    assert torch.equal(values.view(bits.dtype), bits)
    round_trip = elementwise(lambda a: T.reinterpret(src, T.reinterpret(dst, a)), src, src, n)
    assert torch.equal(run_interp(round_trip, bits.numpy(), out_dtype=bits.dtype), bits)


def test_reinterpret_folds_constants_and_prints_the_dtype():
    assert float(T.reinterpret(T.float32, 0x3F800000)) == 1.0
    assert int(T.reinterpret(T.int32, T.float32(-0.0))) == -(2**31)
    assert float(T.reinterpret(T.float16, T.uint16(0x3C00))) == 1.0
    assert int(T.reinterpret(T.uint8, T.int8(-1))) == 255
    x = E.Var("x", T.uint16)
    e = T.reinterpret(T.bfloat16, x)
    assert isinstance(e, E.Call) and e.dtype == T.bfloat16
    assert str(e) == "T.reinterpret(bfloat16, x)"
    assert T.reinterpret(T.uint16, x) is x


def test_reinterpret_width_mismatch_names_the_line():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.uint8), B: T.Tensor((64,), T.float16)):
            with T.Kernel(1) as bx:
                for i in T.Parallel(64):
                    B[i] = T.reinterpret(T.float16, A[i])  # E:reinterpret-width

    raises(TileLangTypeError, "reinterpret-width", build, "uint8", "float16", "8 and 16 bits")


def test_reinterpret_value_first_names_the_line():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.uint16), B: T.Tensor((64,), T.float16)):
            with T.Kernel(1) as bx:
                for i in T.Parallel(64):
                    B[i] = T.reinterpret(A[i], T.float16)  # E:reinterpret-order

    raises(TileLangTypeError, "reinterpret-order", build, "T.reinterpret(dtype, value)")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_reinterpret_emits_bit_casts_that_compile(arch):
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    @T.prim_func
    def main(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float64), C: T.Tensor((64,), T.uint8),
             D: T.Tensor((64,), T.float16), Y: T.Tensor((64, 4), T.int32), Z: T.Tensor((64,), T.float64)):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                Y[i, 0] = T.reinterpret(T.int32, A[i])
                Y[i, 1] = T.cast(T.reinterpret(T.float8_e5m2, C[i]), T.int32)
                Y[i, 2] = T.reinterpret(T.uint16, D[i])
                Y[i, 3] = T.cast(T.reinterpret(T.float32, T.reinterpret(T.uint32, Y[i, 0])), T.int32)
                Z[i] = T.reinterpret(T.float64, T.reinterpret(T.int64, B[i]) + 1)

    source, ctx = cuda_source(main, arch)
    for fn in ("__float_as_uint(", "__uint_as_float(", "__double_as_longlong(", "__longlong_as_double(",
               "tlx_e5m22f(tlx_e5m2{", "tlx_f2h("):
        assert fn in source, fn
    if find_nvrtc() is None and find_nvcc() is None:
        pytest.skip("no CUDA compiler here")
    assert len(compile_cuda(source, arch, kernel_name=ctx.data["cuda.meta"].kernel_name).cubin) > 0


# ---- T.Cast, T.max_value / T.min_value, T.popcount, T.clz, T.nearbyint -------------------------

@pytest.mark.parametrize("dtype,lo,hi", [
    (T.float16, -65504.0, 65504.0), (T.bfloat16, -3.3895313892515355e38, 3.3895313892515355e38),
    (T.float32, -3.4028234663852886e38, 3.4028234663852886e38), (T.float64, -1.7976931348623157e308,
                                                                   1.7976931348623157e308),
    (T.float8_e4m3fn, -448.0, 448.0), (T.float8_e5m2, -57344.0, 57344.0), (T.int8, -128, 127),
    (T.uint8, 0, 255), (T.int32, -(2**31), 2**31 - 1), (T.uint64, 0, 2**64 - 1), (T.int64, -(2**63), 2**63 - 1),
])
def test_max_and_min_value_are_constants_of_the_dtype(dtype, lo, hi):
    top, bottom = T.max_value(dtype), T.min_value(dtype)
    assert isinstance(top, E.Const) and top.dtype == dtype and top.value == hi
    assert isinstance(bottom, E.Const) and bottom.dtype == dtype and bottom.value == lo
    if dtype.is_float and dtype.bits >= 16 and dtype.name != "bfloat16":
        assert top.value == float(np.finfo(np.dtype(dtype.name)).max)


def test_cast_takes_the_dtype_first():
    x = E.Var("x", T.float32)
    assert T.Cast(T.int32, x).same_as(T.cast(x, T.int32))
    assert T.Cast("float16", 2).dtype == T.float16

    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.int32)):
            with T.Kernel(1) as bx:
                for i in T.Parallel(64):
                    B[i] = T.Cast(A[i], T.int32)  # E:cast-order

    raises(TileLangTypeError, "cast-order", build, "T.Cast(dtype, value)")


def test_popcount_and_clz_fold_and_run():
    assert int(T.popcount(T.int8(-1))) == 8 and T.popcount(T.int8(-1)).dtype == T.int8
    assert int(T.clz(T.uint16(1))) == 15 and T.clz(T.int64(1)).dtype == T.int32
    assert int(T.clz(0)) == 32
    values = np.array([0, 1, -1, 2**31 - 1, -(2**31), 0x00F0F000, 12345, -12345] * 8, dtype=np.int64)
    pop = run_interp(elementwise(T.popcount, T.int64, T.int64), values, out_dtype=torch.int64)
    clz = run_interp(elementwise(T.clz, T.int64, T.int32), values, out_dtype=torch.int32)
    unsigned = [int(v) & (2**64 - 1) for v in values]
    assert pop.tolist() == [bin(u).count("1") for u in unsigned]
    assert clz.tolist() == [64 - u.bit_length() for u in unsigned]


def test_popcount_of_float_names_the_line():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.int32)):
            with T.Kernel(1) as bx:
                for i in T.Parallel(64):
                    B[i] = T.popcount(A[i])  # E:popcount-float

    raises(TileLangTypeError, "popcount-float", build, "T.popcount", "float32")


def test_nearbyint_rounds_half_to_even():
    values = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 2.4, -2.6, 3.5] * 8, dtype=np.float32)
    for dtype, np_dtype, torch_dtype in ((T.float32, np.float32, torch.float32),
                                         (T.float16, np.float16, torch.float16)):
        out = run_interp(elementwise(T.nearbyint, dtype, dtype), values.astype(np_dtype), out_dtype=torch_dtype)
        assert out.tolist()[:8] == [0.0, 2.0, 2.0, -0.0, -2.0, 2.0, -3.0, 4.0]
    assert float(T.nearbyint(2.5)) == 2.0 and float(T.nearbyint(-3.5)) == -4.0


def test_integer_intrinsics_emit_cuda_builtins():
    @T.prim_func
    def main(A: T.Tensor((64,), T.int64), B: T.Tensor((64,), T.uint8), F: T.Tensor((64,), T.float64),
             Y: T.Tensor((64, 5), T.int64)):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                Y[i, 0] = T.popcount(A[i])
                Y[i, 1] = T.clz(A[i])
                Y[i, 2] = T.clz(B[i])
                Y[i, 3] = T.Cast(T.int64, T.nearbyint(F[i]))
                Y[i, 4] = T.Cast(T.int64, T.nearbyint(T.cast(F[i], T.float32)))

    source, _ = cuda_source(main)
    for text in ("__popcll(", "__clzll(", "(unsigned char)", " - 24", "rint(", "rintf("):
        assert text in source, text


# ---- fast math -----------------------------------------------------------------------------------

FAST = {"__exp": "__expf(", "__exp10": "__exp10f(", "__log": "__logf(", "__log2": "__log2f(",
        "__log10": "__log10f(", "__tan": "tanf(", "__cos": "__cosf(", "__sin": "__sinf("}


def test_fast_math_names_are_module_attributes_and_calls():
    x = E.Var("x", T.float16)
    for name in FAST:
        fn = getattr(T, name)
        assert name in T.__all__
        e = fn(x)
        assert isinstance(e, E.Call) and e.name == name and e.dtype == T.float16
        assert str(e) == f"T.{name}(x)"
    assert T.__exp(E.Var("i", T.int32)).dtype == T.float32


@pytest.mark.parametrize("name", sorted(FAST))
def test_fast_math_interprets_as_the_accurate_function(name):
    values = np.linspace(0.2, 2.9, 64, dtype=np.float32)
    out = run_interp(elementwise(getattr(T, name), T.float32, T.float32), values, out_dtype=torch.float32)
    accurate = run_interp(elementwise(getattr(T, name[2:]), T.float32, T.float32), values, out_dtype=torch.float32)
    assert torch.equal(out, accurate)


def test_fast_math_emits_the_intrinsics_for_float32_and_narrow_floats_only():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32), H: T.Tensor((64,), T.float16), D: T.Tensor((64,), T.float64),
             Y: T.Tensor((64, 8), T.float32), Z: T.Tensor((64,), T.float16), W: T.Tensor((64,), T.float64)):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                Y[i, 0] = T.__exp(A[i])
                Y[i, 1] = T.__exp10(A[i])
                Y[i, 2] = T.__log(A[i])
                Y[i, 3] = T.__log2(A[i])
                Y[i, 4] = T.__log10(A[i])
                Y[i, 5] = T.__tan(A[i])
                Y[i, 6] = T.__cos(A[i])
                Y[i, 7] = T.__sin(A[i])
                Z[i] = T.__exp(H[i])
                W[i] = T.__exp(D[i]) + T.__sin(D[i])

    source, _ = cuda_source(main)
    for text in FAST.values():
        assert text in source, text
    assert "tlx_f2h(__expf(tlx_h2f(" in source
    assert "exp(D[" in source and "sin(D[" in source and "__exp(" not in source


def test_fast_math_inside_a_traced_kernel():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                B[i] = T.__exp(A[i]) * T.__log(A[i] + 1)
            B[0] = T.__sin(B[0])

    a = np.linspace(0, 1, 64, dtype=np.float32)
    out = run_interp(main, a, out_dtype=torch.float32)
    expected = np.exp(a) * np.log(a + 1)
    expected[0] = np.sin(expected[0])
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)


# ---- IEEE-rounded arithmetic -------------------------------------------------------------------

MODES = ("rn", "rz", "ru", "rd")


def ieee_all_modes(op, dtype, *inputs: np.ndarray) -> list[list[float]]:
    """``op(..., mode)`` for each mode, in the interpreter, one list of results per mode."""
    n = len(inputs[0])
    names = "ABC"[:len(inputs)]

    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype),
             R: T.Tensor((n, 4), dtype)):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(n):
                args = [A[i], B[i], C[i]][:len(names)]
                for m, mode in enumerate(MODES):
                    R[i, m] = op(*args, mode)

    padded = list(inputs) + [inputs[0]] * (3 - len(inputs))
    tensors = [torch.from_numpy(np.ascontiguousarray(x)) for x in padded]
    out = torch.empty((n, 4), dtype=getattr(torch, dtype.name))
    with knobs.scope(target_default="interp"):
        tilelang.compile(main, target="interp")(*tensors, out)
    return out.T.tolist()


def test_ieee_directed_modes_differ_where_the_result_is_inexact():
    one_third = ieee_all_modes(T.ieee_fdiv, T.float32, np.array([1.0, -1.0], np.float32),
                               np.array([3.0, 3.0], np.float32))
    lo, hi = float(np.float32(0.3333333)), float(np.float32(0.33333334))
    assert one_third == [[hi, -hi], [lo, -lo], [hi, -lo], [lo, -hi]]
    d = ieee_all_modes(T.ieee_frcp, T.float64, np.array([3.0, 3.0]))
    assert d[0][0] == d[1][0] == d[3][0] == 1 / 3 < d[2][0] == np.nextafter(1 / 3, 1)  # float64's 1/3 is below


def test_ieee_add_uses_the_exact_sum_not_float64():
    big, tiny = np.float32(2.0**100), np.float32(2.0**-100)
    rn, rz, ru, rd = (r[0] for r in ieee_all_modes(T.ieee_add, T.float32, np.array([big]), np.array([tiny])))
    assert rn == rz == rd == 2.0**100 and ru == float(np.nextafter(big, np.float32(np.inf)))


def test_ieee_fmaf_rounds_once():
    a, b, c = np.float32(1 + 2.0**-23), np.float32(1 - 2.0**-23), np.float32(-1.0)
    results = ieee_all_modes(T.ieee_fmaf, T.float32, np.array([a]), np.array([b]), np.array([c]))
    assert [r[0] for r in results] == [-(2.0**-46)] * 4  # a * b - 1 exactly, no intermediate rounding


def test_ieee_signed_zeros_overflow_and_sqrt():
    sub = ieee_all_modes(T.ieee_sub, T.float32, np.array([1.5], np.float32), np.array([1.5], np.float32))
    assert [np.copysign(1, r[0]) for r in sub] == [1, 1, 1, -1]
    mul = ieee_all_modes(T.ieee_mul, T.float32, np.array([3e38, -3e38], np.float32),
                         np.array([10.0, 10.0], np.float32))
    big = float(np.finfo(np.float32).max)
    assert mul == [[np.inf, -np.inf], [big, -big], [np.inf, -big], [big, -np.inf]]
    root = ieee_all_modes(T.ieee_fsqrt, T.float32, np.array([2.0, 4.0], np.float32))
    assert root[1][0] == root[3][0] == float(np.float32(np.sqrt(2))) < root[2][0]
    assert root[0][1] == root[1][1] == root[2][1] == root[3][1] == 2.0


def test_ieee_calls_keep_the_mode_in_the_ir():
    x, y = E.Var("x", T.float32), E.Var("y", T.float32)
    e = T.ieee_add(x, y, "rz")
    assert isinstance(e, E.Call) and e.name == "ieee_add.rz" and e.dtype == T.float32
    assert str(e) == "T.ieee_add(x, y, 'rz')" and str(T.ieee_frsqrt(x)) == "T.ieee_frsqrt(x)"
    assert T.ieee_mul(x, 2).args[1].dtype == T.float32
    assert T.ieee_fdiv(E.Var("d", T.float64), 3).dtype == T.float64
    assert T.ieee_frcp(E.Var("i", T.int32)).dtype == T.float32


def test_ieee_bad_rounding_mode_names_the_line():
    from tilelang_x.core_ir.errors import TileLangSyntaxError

    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                for i in T.Parallel(64):
                    B[i] = T.ieee_add(A[i], 1.0, "rm")  # E:ieee-mode

    raises(TileLangSyntaxError, "ieee-mode", build, "T.ieee_add", "'rm'", "'rn', 'rz', 'ru', 'rd'")


def test_ieee_on_float16_names_the_line():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float16), B: T.Tensor((64,), T.float16)):
            with T.Kernel(1) as bx:
                for i in T.Parallel(64):
                    B[i] = T.ieee_fsqrt(A[i], "ru")  # E:ieee-half

    raises(TileLangTypeError, "ieee-half", build, "T.ieee_fsqrt", "float16", "T.cast")
    with pytest.raises(TileLangTypeError, match="float32"):
        T.ieee_frsqrt(E.Var("d", T.float64))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ieee_emits_the_double_intrinsics_that_compile(arch):
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    @T.prim_func
    def main(A: T.Tensor((64,), T.float64), B: T.Tensor((64,), T.float64), R: T.Tensor((64, 7), T.float64)):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                R[i, 0] = T.ieee_add(A[i], B[i], "rz")
                R[i, 1] = T.ieee_sub(A[i], B[i], "rd")
                R[i, 2] = T.ieee_mul(A[i], B[i], "ru")
                R[i, 3] = T.ieee_fmaf(A[i], B[i], 1.0, "ru")
                R[i, 4] = T.ieee_fdiv(A[i], B[i], "rd")
                R[i, 5] = T.ieee_frcp(B[i], "rn")
                R[i, 6] = T.ieee_fsqrt(A[i], "ru")
            R[0, 0] = T.ieee_add(R[0, 0], 1.0, "rz")

    source, ctx = cuda_source(main, arch)
    for fn in ("__dadd_rz(", "__dsub_rd(", "__dmul_ru(", "__fma_ru(", "__ddiv_rd(", "__drcp_rn(", "__dsqrt_ru("):
        assert fn in source, fn
    if find_nvrtc() is None and find_nvcc() is None:
        pytest.skip("no CUDA compiler here")
    assert len(compile_cuda(source, arch, kernel_name=ctx.data["cuda.meta"].kernel_name).cubin) > 0
