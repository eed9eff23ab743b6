"""CUDA backend: constructs that used to compile to silently wrong code now either compile right
(checked on the generated source, compiled with the local toolchain) or fail with a located
error. The GPU side of the same cases is tests/backend/cuda/test_correctness_cuda.py."""

from __future__ import annotations

import logging
import re

import pytest
import torch

import tilelang_x
import tilelang_x.language as T
from tests.null.cuda_helpers import assert_compiles, cuda_source
from tilelang_x.core_ir.errors import (
    BackendNotImplementedError,
    LayoutError,
    TileLangError,
    TileLangSyntaxError,
    TileLangTypeError,
)

HERE = __file__


def _line_of(text: str) -> int:
    """The line of this file that contains ``text`` (first occurrence)."""
    with open(HERE) as fh:
        for n, line in enumerate(fh, 1):
            if text in line:
                return n
    raise AssertionError(text)


def _compiles(func, arch: str = "sm_80") -> str:
    source, ctx = cuda_source(func, arch)
    assert_compiles(source, arch, ctx)
    return source


def _body(source: str) -> str:
    return source[source.index('extern "C"'):]


# ---- one T.Kernel per function ------------------------------------------------------------------

def test_second_kernel_is_rejected_at_its_line() -> None:
    @T.prim_func
    def two(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                A[i] = 1.0
        with T.Kernel(1, threads=128):  # second kernel
            for i in T.Parallel(128):
                B[i] = 2.0

    with pytest.raises(BackendNotImplementedError, match="one T.Kernel per function") as info:
        cuda_source(two)
    assert info.value.loc.line == _line_of("# second kernel") and info.value.loc.file == HERE
    assert "split" in (info.value.hint or "")
    a, b = torch.zeros(128), torch.zeros(128)
    tilelang_x.compile(two, target="interp")(a, b)  # the interpreter runs both
    assert bool((a == 1).all()) and bool((b == 2).all())


# ---- T.alloc_local is private to each thread ----------------------------------------------------

def test_fill_clear_copy_into_local_run_over_every_element_in_every_thread() -> None:
    @T.prim_func
    def local_ops(A: T.Tensor((128, 8), T.float32), S: T.Tensor((128, 8), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(128, threads=128) as bx:
            A_s = T.alloc_shared((8,), T.float32)
            T.copy(A[bx, 0:8], A_s)
            lo = T.alloc_local((8,), T.float32)
            m = T.alloc_local((8,), T.float32)
            c = T.alloc_local((8,), T.float32)
            T.fill(lo, 2.0)
            T.clear(c)
            T.copy(A_s, m)
            acc = T.alloc_var(T.float32, 0.0)
            for k in T.serial(8):
                acc = acc + lo[k] * m[k] + c[k]
            B[bx] = acc
            T.copy(m, S[bx, 0:8])

    src = _body(_compiles(local_ops))
    for name in ("lo", "m", "c"):
        stores = re.findall(rf"\b{name}\[([^\]]*)\] =", src)
        assert stores and all("tx" not in idx for idx in stores), (name, stores)
    assert re.search(r"for \(int (\w+) = 0; \1 < 8; \+\+\1\) \{\s*lo\[\1\] = 2\.0f;", src)
    _compiles(local_ops, "sm_90a")


def test_local_declared_inside_parallel_is_per_iteration_scratch() -> None:
    @T.prim_func
    def scratch(A: T.Tensor((128, 4), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                tmp = T.alloc_local((4,), T.float32)
                for k in T.serial(4):
                    tmp[k] = A[i, k] * 2.0
                B[i] = tmp[0] + tmp[1] + tmp[2] + tmp[3]

    src = _body(_compiles(scratch))
    assert "float tmp[4];" in src


def test_parallel_loop_writing_an_outer_local_is_rejected() -> None:
    @T.prim_func
    def outer(A: T.Tensor((128,), T.float32), B: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=128):
            lo = T.alloc_local((128,), T.float32)
            for i in T.Parallel(128):
                lo[i] = A[i]  # spread over threads
            acc = T.alloc_var(T.float32, 0.0)
            for k in T.serial(128):
                acc = acc + lo[k]
            B[0] = acc

    with pytest.raises(BackendNotImplementedError, match="declared outside it") as info:
        cuda_source(outer)
    assert info.value.loc.line == _line_of("# spread over threads")
    assert "T.serial" in (info.value.hint or "")


def test_copy_from_a_spread_fragment_into_local_is_rejected() -> None:
    @T.prim_func
    def frag_to_local(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((128,), T.float32)
            T.copy(A, f)
            lo = T.alloc_local((128,), T.float32)
            T.copy(f, lo)  # fragment to local
            T.copy(lo, B)

    with pytest.raises(LayoutError, match="spread over the threads") as info:
        cuda_source(frag_to_local)
    assert info.value.loc.line == _line_of("# fragment to local")


# ---- float8 -------------------------------------------------------------------------------------

def test_float8_tensors_and_scalars_convert_through_float() -> None:
    @T.prim_func
    def fp8(A: T.Tensor((128,), T.float8_e4m3), B: T.Tensor((128,), T.float8_e5m2),
            C: T.Tensor((128,), T.float32), s: T.float8_e4m3, h: T.float16):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = A[i] * s + h
                C[i] = T.cast(A[i], T.float8_e5m2)

    src = _body(_compiles(fp8))
    assert "const tlx_e4m3* __restrict__ A" in src and "tlx_e5m2* __restrict__ B" in src
    assert "tlx_e4m32f(A[" in src and "tlx_f2e5m2(" in src
    assert re.search(r"const float s = tlx_e4m32f\(tlx_f2e4m3\(s_arg\)\);", src)
    assert "const float h = tlx_h2f(h_arg);" in src
    _, ctx = cuda_source(fp8)
    kinds = [(p.kind, p.dtype, p.ctype) for p in ctx.data["cuda.meta"].params]
    assert kinds[3] == ("scalar", "float32", "float") and kinds[4] == ("scalar", "float16", "tlx_half")
    _compiles(fp8, "sm_90a")


def test_float8_copies_reductions_and_gemm_compile() -> None:
    @T.prim_func
    def fp8_tiles(A: T.Tensor((64, 64), T.float8_e4m3), B: T.Tensor((64, 64), T.float8_e4m3),
                  C: T.Tensor((64, 64), T.float32), R: T.Tensor((64,), T.float8_e5m2)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), T.float8_e4m3)
            B_s = T.alloc_shared((64, 64), T.float8_e4m3)
            acc = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(acc)
            T.gemm(A_s, B_s, acc)
            T.copy(acc, C)
            f = T.alloc_fragment((64, 64), T.float8_e4m3)
            T.copy(A_s, f)
            r = T.alloc_fragment((64,), T.float8_e5m2)
            T.reduce_max(f, r, dim=1)
            T.copy(r, R)

    src = _body(_compiles(fp8_tiles))
    assert "unsigned char*" not in src and "tlx_e4m32f(" in src and "tlx_f2e5m2(" in src


# ---- T.annotate_layout --------------------------------------------------------------------------

def _annotated(shape: tuple[int, ...], layout_of):
    @T.prim_func
    def annotated(A: T.Tensor(shape, T.float16), B: T.Tensor(shape, T.float16)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared(shape, T.float16)
            T.annotate_layout({A_s: layout_of(A_s)})  # the annotation
            T.copy(A, A_s)
            T.copy(A_s, B)

    return annotated


def _shared_layout(func):
    _, ctx = cuda_source(func)
    return next(v for k, v in ctx.data["cuda.layouts"].items() if k.name == "A_s")


@pytest.mark.parametrize(("shape", "swizzle"), [((64, 64), "sw128"), ((64, 32), "sw64"), ((64, 16), "sw32"),
                                                ((64, 128), "sw128")])
def test_swizzled_and_linear_layouts_map_to_shared_layouts(shape: tuple[int, int], swizzle: str) -> None:
    lay = _shared_layout(_annotated(shape, tilelang_x.layout.make_swizzled_layout))
    assert lay.swizzle == swizzle
    assert _shared_layout(_annotated(shape, tilelang_x.layout.make_linear_layout)).swizzle == "none"
    _compiles(_annotated(shape, tilelang_x.layout.make_swizzled_layout))


@pytest.mark.parametrize(("layout_of", "match"), [
    (lambda buf: "swizzled", "is not a layout"),
    (lambda buf: object(), "is not a layout"),
    (lambda buf: T.Layout((64, 64), lambda i, j: (j, i)), "not one the CUDA backend supports"),
    (lambda buf: T.Fragment((64, 64), forward_thread_fn=lambda i, j: i, forward_index_fn=lambda i, j: j),
     "does not take Fragment"),
])
def test_unsupported_layouts_are_rejected_at_the_annotation(layout_of, match: str) -> None:
    with pytest.raises(LayoutError, match=match) as info:
        cuda_source(_annotated((64, 64), layout_of))
    assert info.value.loc.line == _line_of("# the annotation")


def _fragment_annotated(fragment_of):
    @T.prim_func
    def annotated(A: T.Tensor((8, 64), T.float32), B: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((8, 64), T.float32)
            s = T.alloc_fragment((8,), T.float32)
            carry = T.alloc_local((1,), T.float32)
            T.annotate_layout({x: fragment_of(x.shape),  # the fragment annotation
                               carry: T.Fragment(carry.shape, forward_thread_fn=lambda i: i)})
            T.copy(A, x)
            T.reduce_sum(x, s, dim=1)
            T.copy(s, B)

    return annotated


def test_fragment_annotations_set_the_fragment_layout_and_are_ignored_for_locals() -> None:
    by_rows = _fragment_annotated(lambda shape: T.Fragment(shape, forward_thread_fn=lambda i, j: (j % 16) * 8 + i))
    _, ctx = cuda_source(by_rows)
    lay = next(v for k, v in ctx.data["cuda.layouts"].items() if k.name == "x")
    assert lay.describe() == "[8T1 | 4L1·16T8]"
    with pytest.raises(LayoutError, match="add up digits") as info:
        cuda_source(_fragment_annotated(lambda shape: T.Fragment(shape, forward_fn=lambda i, j: ((i + j) % 64, i))))
    assert info.value.loc.line == _line_of("# the fragment annotation")


def test_tilelang_layout_module_reexports_the_constructors() -> None:
    from tilelang_x.core_ir import layout as core_layout

    for name in core_layout.__all__:
        assert getattr(tilelang_x.layout, name) is getattr(core_layout, name)


# ---- T.print, prelude (cluster_dims: test_cuda_cluster.py) -----------------------------------------

def test_print_compiles_to_printf_from_one_thread_of_block_zero() -> None:
    @T.prim_func
    def printing(A: T.Tensor((64, 64), T.float16), B: T.Tensor((4,), T.int64), n: T.int32):
        with T.Kernel(2, threads=128):
            A_s = T.alloc_shared((8, 8), T.float16)
            T.copy(A[0:8, 0:8], A_s)
            T.print(A_s, msg="tile 100%")
            T.print(n)
            T.print(B[3])
            f = T.alloc_fragment((64,), T.float32)
            for i in T.Parallel(64):
                f[i] = A[i, 0]
                T.print(f[i], "row")

    src = _body(_compiles(printing))
    line = _line_of('msg="tile 100%"')
    assert f'printf("{HERE}:{line}: tile 100%%: A_s[%d, %d] = %g\\n"' in src
    assert "&& tx == 0) printf(" in src and ": n = %d\\n\", (int)(n));" in src and "B[3] = %lld" in src
    assert re.search(r"blockIdx\.z == 0\) printf\(\"[^\"]*: row: f\[i\] = %g", src)  # every iteration prints
    assert "not supported" not in src
    _compiles(printing, "sm_90a")


PRELUDE = "__device__ __forceinline__ float tlx_test_twice(float x) { return 2.0f * x; }"


def test_prelude_is_cuda_code_before_the_kernel() -> None:
    @T.prim_func
    def opt(A: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128, prelude=PRELUDE):  # the kernel
            for i in T.Parallel(128):
                A[i] = T.call_extern("float32", "tlx_test_twice", A[i])

    src, _ = cuda_source(opt)
    assert src.index(PRELUDE) < src.index('extern "C" __global__')
    assert "tlx_test_twice(A[" in src
    _compiles(opt)
    _compiles(opt, "sm_90a")
    with pytest.raises(BackendNotImplementedError, match="prelude") as info:  # raw CUDA: not interpretable
        tilelang_x.compile(opt, target="interp")(torch.zeros(128))
    assert info.value.loc.line == _line_of("prelude=PRELUDE):  # the kernel")


def test_prelude_must_be_a_string() -> None:
    with pytest.raises(TileLangSyntaxError, match="prelude=3"):
        @T.prim_func
        def bad(A: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=128, prelude=3):
                A[0] = 1.0


# ---- frontend odds and ends ---------------------------------------------------------------------

def test_not_supported_error_is_exported_and_min_max_reject_non_numbers() -> None:
    from tilelang_x.errors import NotSupportedError

    with pytest.raises(NotSupportedError):
        T.alloc_tmem  # noqa: B018
    assert T.min(3, 1.5) == 1.5 and T.max(2, 7) == 7
    with pytest.raises(TileLangTypeError, match="expected numbers"):
        T.min("a", "b")
    assert issubclass(NotSupportedError, TileLangError)


# ---- T.StridedTensor ----------------------------------------------------------------------------

def test_strided_tensors_address_with_their_strides_and_pass_stride_variables() -> None:
    s = T.dynamic("s")

    @T.prim_func
    def strided(A: T.StridedTensor((128,), (2,), T.float32), B: T.StridedTensor((64, 4), (s, 1), T.float32),
                C: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                C[i] = A[i] + B[i // 2, i % 4]

    src = _body(_compiles(strided))
    assert re.search(r"A\[\(?\(?tx & 127\)? \* 2\)?\]", src), src
    _, ctx = cuda_source(strided)
    meta = ctx.data["cuda.meta"]
    assert meta.dims == ("s",) and [p.kind for p in meta.params][-1] == "dim"


def test_a_fragment_read_by_a_derived_index_lives_in_shared_memory(caplog: pytest.LogCaptureFixture) -> None:
    # TileLang's dequantization form: two 4-bit values a byte, the byte read as packed[i, j // 2]
    @T.prim_func
    def halves(A: T.Tensor((64, 32), T.uint8), B: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128):
            packed = T.alloc_fragment((64, 32), T.uint8)
            T.copy(A, packed)
            for i, j in T.Parallel(64, 64):
                B[i, j] = T.cast(T.shift_right(packed[i, j // 2], (j % 2) * 4), T.float16)

    for arch in ("sm_80", "sm_90a"):
        with caplog.at_level(logging.DEBUG, logger="tilelang_x.cuda.layout"):
            src = cuda_source(halves, arch)[0]
        body = src[src.index("__global__"):]
        assert re.search(r"\* packed = \([\w ]+\*\)\(tlx_smem \+ \d+\);", body), body[:600]
        assert "__syncthreads();" in body  # the copy's writes reach the loop's other threads
    assert "fragment `packed`" in caplog.text and "kept in shared memory" in caplog.text


def test_a_gemm_operand_read_by_a_derived_index_keeps_the_layout_error() -> None:
    @T.prim_func
    def mixed(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16), C: T.Tensor((64, 32), T.float32)):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((64, 64), T.float16)
            b_s = T.alloc_shared((64, 64), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.gemm(a_s, b_s, acc, clear_accum=True)
            for i, j in T.Parallel(64, 32):
                C[i, j] = acc[i, j * 2]  # every other column

    with pytest.raises(LayoutError, match=r"`acc\[i, j \* 2\]` is outside a T.Parallel loop or does not") as info:
        cuda_source(mixed)
    assert info.value.loc.line == _line_of("# every other column")
    assert "T.alloc_shared" in (info.value.hint or "")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_block_statements_store_once_then_sync(arch: str) -> None:
    # a read-modify-write outside T.Parallel (C[bx] = C[bx] + 1) done by every thread would race;
    # one thread stores, and a barrier makes the store visible to the block
    from tests.kernels import elementwise

    body = _body(cuda_source(elementwise.count_up.get_ir(6, 5), arch)[0])
    for store in ("C[bx] = C[bx] + 1;", "S[0] = S[0] + 2;", "C[bx] = C[bx] + S[0];"):
        assert re.search(r"if \(tx == 0\) \{\s*" + re.escape(store) + r"\s*\}\s*__syncthreads\(\);", body), store


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_restrict_is_dropped_for_buffers_that_may_alias(arch: str) -> None:
    from tests.kernels import elementwise

    src = cuda_source(elementwise.add_into.get_ir(300), arch)[0]
    assert "main_kernel(const float* X, float* Y)" in src  # annotated: no __restrict__
    plain = cuda_source(elementwise.vector_add.get_ir(), arch)[0]
    assert "__restrict__" in plain


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_min_blocks_per_sm_goes_to_launch_bounds(arch: str) -> None:
    def kernel(blocks: int | None) -> object:
        @T.prim_func
        def main(A: T.Tensor((256,), T.float32), B: T.Tensor((256,), T.float32)):
            with T.Kernel(2, threads=128) as bx:
                if blocks is not None:
                    T.annotate_min_blocks_per_sm(blocks)
                for i in T.Parallel(128):
                    B[bx * 128 + i] = A[bx * 128 + i] * 2.0

        return main

    assert "__launch_bounds__(128, 3) main_kernel(" in cuda_source(kernel(3), arch)[0]
    assert "__launch_bounds__(128) main_kernel(" in cuda_source(kernel(None), arch)[0]
