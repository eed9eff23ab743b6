# Kernel code is written as users write it (unused block and loop variables included).
# ruff: noqa: F841, F842, B007, E741
"""Every user mistake the frontend catches names this file and the line that made it.

Each failing line carries a ``# E:<tag>`` marker; ``where(tag)`` finds its line number.
"""

from __future__ import annotations

import traceback

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.null.located import located_errors
from tilelang_x.core_ir.errors import (
    ArgumentError,
    NotSupportedError,
    ShapeMismatchError,
    TileLangSyntaxError,
    TileLangTypeError,
    UnboundConstError,
)

where, raises = located_errors(__file__)


# ---- tile op shapes and scopes ----------------------------------------------------------------

def test_copy_shape_mismatch():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64, 64), T.float16)):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((32, 64), T.float16)
                T.copy(A[0:64, 0:64], s)  # E:copy

    raises(ShapeMismatchError, "copy", build, "T.copy", "[64, 64]", "[32, 64]")


def test_copy_point_into_smaller_rank():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float16)):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((8, 8), T.float16)
                T.copy(A[bx], s)  # E:copy-rank

    raises(ShapeMismatchError, "copy-rank", build, "`A` has 1 dimension")


def test_gemm_shape_mismatch():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64, 64), T.float16)):
            with T.Kernel(1) as bx:
                a = T.alloc_shared((64, 32), T.float16)
                b = T.alloc_shared((16, 64), T.float16)
                c = T.alloc_fragment((64, 64), T.float32)
                T.gemm(a, b, c)  # E:gemm

    raises(ShapeMismatchError, "gemm", build, "K of A is 32 but K of B is 16")


def test_gemm_accumulator_scope():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64, 64), T.float16)):
            with T.Kernel(1) as bx:
                a = T.alloc_shared((64, 64), T.float16)
                c = T.alloc_shared((64, 64), T.float32)
                T.gemm(a, a, c)  # E:gemm-c

    raises(TileLangSyntaxError, "gemm-c", build, "accumulator C `c` is a shared buffer", "T.alloc_fragment")


def test_gemm_operand_in_global_memory():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64, 64), T.float16)):
            with T.Kernel(1) as bx:
                c = T.alloc_fragment((64, 64), T.float32)
                T.gemm(A, A, c)  # E:gemm-a

    raises(TileLangSyntaxError, "gemm-a", build, "operand A `A` is a global buffer")


def test_reduce_shape_and_dim():
    def shape():
        @T.prim_func
        def main(A: T.Tensor((64, 64), T.float16)):
            with T.Kernel(1) as bx:
                s = T.alloc_fragment((64, 32), T.float32)
                r = T.alloc_fragment((64,), T.float32)
                T.reduce_max(s, r, dim=0)  # E:reduce-shape

    def dim():
        @T.prim_func
        def main(A: T.Tensor((64, 64), T.float16)):
            with T.Kernel(1) as bx:
                s = T.alloc_fragment((64, 32), T.float32)
                r = T.alloc_fragment((64,), T.float32)
                T.reduce_sum(s, r, dim=2)  # E:reduce-dim

    raises(ShapeMismatchError, "reduce-shape", shape, "T.reduce_max", "[32]")
    raises(TileLangSyntaxError, "reduce-dim", dim, "dim=2 is out of range")


def test_atomic_scalar_into_tile():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64, 64), T.float32)):
            with T.Kernel(1) as bx:
                T.atomic_add(A[0:4, 0:4], 1.0)  # E:atomic

    raises(ShapeMismatchError, "atomic", build, "single destination element")


def test_packed_atomic_needs_elements():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64, 64), T.float16)):
            with T.Kernel(1) as bx:
                for i, j in T.Parallel(64, 32):
                    T.atomic_addx2(A[i, j * 2], 1.0)  # E:packed

    raises(TileLangTypeError, "packed", build, "T.atomic_addx2 value must be one element of a buffer")


def test_bitwise_atomics_take_integers():
    def float_dst():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                T.atomic_or(A[0], 1)  # E:or-float-dst

    def float_value():
        @T.prim_func
        def main(A: T.Tensor((64,), T.int32), V: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                for i in T.Parallel(64):
                    T.atomic_xor(A[i], V[i])  # E:xor-float-value

    def float_tile():
        @T.prim_func
        def main(A: T.Tensor((64,), T.int32)):
            with T.Kernel(1) as bx:
                t = T.alloc_shared((64,), T.float16)
                T.atomic_and(A[0:64], t)  # E:and-float-tile

    raises(TileLangTypeError, "or-float-dst", float_dst, "T.atomic_or", "`A` is float32",
           "T.atomic_add / T.atomic_max")
    raises(TileLangTypeError, "xor-float-value", float_value, "T.atomic_xor", "value is float32", "T.cast")
    raises(TileLangTypeError, "and-float-tile", float_tile, "T.atomic_and", "value is float16")


def test_atomic_load_and_store_mistakes():
    def store_order():
        @T.prim_func
        def main(F: T.Tensor((4,), T.int32)):
            with T.Kernel(4) as bx:
                T.atomic_store(F[bx], 1, memory_order="acquire")  # E:store-order

    def load_order():
        @T.prim_func
        def main(F: T.Tensor((4,), T.int32), Y: T.Tensor((4,), T.int32)):
            with T.Kernel(4) as bx:
                Y[bx] = T.atomic_load(F[bx], memory_order="fast")  # E:load-order

    def load_region():
        @T.prim_func
        def main(F: T.Tensor((4,), T.int32), Y: T.Tensor((4,), T.int32)):
            with T.Kernel(4) as bx:
                Y[bx] = T.atomic_load(F[0:2])  # E:load-region

    def load_local():
        @T.prim_func
        def main(Y: T.Tensor((4,), T.int32)):
            with T.Kernel(4) as bx:
                f = T.alloc_fragment((4,), T.int32)
                Y[bx] = T.atomic_load(f[0])  # E:load-local

    def return_prev():
        @T.prim_func
        def main(F: T.Tensor((4,), T.int32)):
            with T.Kernel(4) as bx:
                T.atomic_or(F[0], 1, return_prev=True)  # E:or-prev

    raises(TileLangSyntaxError, "store-order", store_order, "memory_order='acquire' is not allowed",
           "'relaxed', 'release', 'seq_cst'")
    raises(TileLangSyntaxError, "load-order", load_order, "memory_order='fast' is not a memory order",
           "'acquire'")
    raises(ShapeMismatchError, "load-region", load_region, "T.atomic_load reads one element", "[2]")
    raises(TileLangSyntaxError, "load-local", load_local, "T.atomic_load", "fragment", "global or shared")
    raises(TileLangSyntaxError, "or-prev", return_prev, "T.atomic_or(..., return_prev=True) is not supported")


def test_fill_and_copy_operand_types():
    def fill():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                T.fill(A, "zero")  # E:fill

    def copy():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                T.copy(3, A)  # E:copy-type

    raises(TileLangTypeError, "fill", fill, "str")
    raises(TileLangTypeError, "copy-type", copy, "T.copy source must be a buffer")


def test_unknown_dtype():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                T.alloc_shared((64,), "float17")  # E:dtype

    raises(TileLangTypeError, "dtype", build, "unknown dtype 'float17'", "float16")


def test_bad_shapes_and_values():
    def shape():
        T.Tensor((64, 1.5), T.float32)  # E:shape

    def inf():
        T.infinity(T.int32)  # E:inf

    raises(TileLangTypeError, "shape", shape, "1.5")
    raises(TileLangTypeError, "inf", inf, "only float dtypes")


def test_pipelined_order_stage_mismatch():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                for k in T.Pipelined(4, num_stages=2, order=[0, 1], stage=[0]):  # E:pipe
                    A[k] = 0.0

    raises(TileLangSyntaxError, "pipe", build, "order= has 2 entries but stage= has 1")


# ---- views (T.view, T.reshape) -----------------------------------------------------------------

def _view_kernel(make_view):
    """A kernel whose only job is to call ``make_view(A, tile, var)`` on an int8 [16, 64] tensor, an
    [8, 32] fp16 shared tile and a float32 variable."""

    def build():
        @T.prim_func
        def main(A: T.Tensor((16, 64), T.int8)):
            with T.Kernel(1) as bx:
                tile = T.alloc_shared((8, 32), T.float16)
                var = T.alloc_var(T.float32)
                make_view(A, tile, var)

    return build


def test_view_element_and_byte_counts_must_match():
    raises(ShapeMismatchError, "reshape_count", _view_kernel(lambda A, s, v: T.reshape(A, (16, 32))),  # E:reshape_count
           "T.reshape", "[16, 32] x int8 is 512 bytes but `A` ([16, 64] x int8) is 1024")
    raises(ShapeMismatchError, "view_bytes", _view_kernel(lambda A, s, v: T.view(s, (8, 32), T.uint32)),  # E:view_bytes
           "T.view", "`tile`", "same byte count")
    raises(ShapeMismatchError, "view_last", _view_kernel(lambda A, s, v: T.view(v, dtype=T.float64)),  # E:view_last
           "not a whole number of float64 elements", "shape=")


def test_view_sizes_must_be_provably_equal():
    def build():
        n = T.dynamic("n")

        @T.prim_func
        def main(A: T.Tensor((n, 64), T.int8)):
            with T.Kernel(1) as bx:
                words = T.view(A, (n // 4, 16 * 4), T.int32)  # E:view_symbolic

    raises(ShapeMismatchError, "view_symbolic", build, "cannot prove", "same sizes as the buffer's")


def test_view_takes_a_whole_contiguous_buffer():
    raises(TileLangTypeError, "view_region", _view_kernel(lambda A, s, v: T.reshape(A[0:8], (512,))),  # E:view_region
           "T.reshape takes a buffer, got Region", "not a slice")
    raises(TileLangTypeError, "view_scalar", _view_kernel(lambda A, s, v: T.view(3, (1,))),  # E:view_scalar
           "T.view takes a buffer, got int")
    raises(NotSupportedError, "view_strides", _view_kernel(lambda A, s, v: T.view(A, strides=(1,))),  # E:view_strides
           "strides=", "row-major")
    raises(TileLangTypeError, "view_bool", _view_kernel(lambda A, s, v: T.view(A, dtype=T.bool)),  # E:view_bool
           "cannot reinterpret int8 `A` as bool")

    def strided():
        @T.prim_func
        def main(A: T.StridedTensor((16, 64), (128, 1), T.int8)):
            with T.Kernel(1) as bx:
                flat = T.reshape(A, (1024,))  # E:view_strided

    raises(NotSupportedError, "view_strided", strided, "explicit strides", "contiguous")


# ---- where T.* may be used --------------------------------------------------------------------

def test_tile_op_before_kernel():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            T.fill(A, 0)  # E:before-kernel
            with T.Kernel(1) as bx:
                pass

    raises(TileLangSyntaxError, "before-kernel", build, "inside `with T.Kernel(...)`")


def test_tile_op_outside_any_trace():
    a = T.Tensor((4,), T.float32)
    raises(TileLangSyntaxError, "no-trace",
           lambda: T.alloc_shared((4,), T.float32), "while a kernel is traced")  # E:no-trace
    assert a.shape[0].value == 4


def test_loop_outside_kernel():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            for i in T.Parallel(64):  # E:loop-outside
                A[i] = 0.0

    raises(TileLangSyntaxError, "loop-outside", build, "T.Parallel must be used inside `with T.Kernel")


def test_store_outside_kernel():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            A[0] = 1.0  # E:store
            with T.Kernel(1) as bx:
                pass

    raises(TileLangSyntaxError, "store", build, "store to `A` outside")


def test_nested_and_malformed_kernels():
    def nested():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                with T.Kernel(2) as by:  # E:nested
                    pass

    def four():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1, 2, 3, 4) as bx:  # E:four
                pass

    def threads(n):
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=n) as bx:  # E:threads
                pass

    raises(TileLangSyntaxError, "nested", nested, "cannot be nested")
    raises(TileLangSyntaxError, "four", four, "1 to 3 grid dimensions, got 4")
    raises(TileLangSyntaxError, "threads", lambda: threads(T.dynamic("t")), "threads=")
    raises(TileLangSyntaxError, "threads", lambda: threads(0), "positive")


def test_no_kernel_block():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):  # E:no-kernel
            x = 1
            return x

    raises(TileLangSyntaxError, "no-kernel", build, "has no `with T.Kernel(...)` block")


def test_unpacking_the_wrong_number_of_loop_vars():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                for i, j in T.Parallel(64):  # E:unpack
                    A[i] = 0.0

    raises(TileLangSyntaxError, "unpack", build, "gives 1 index variable but 2 names")


def test_unknown_language_name():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                T.reduce_summ(A, A)  # E:unknown

    err = raises(TileLangSyntaxError, "unknown", build, "T.reduce_summ is not supported", "T.reduce_sum")
    assert isinstance(err, AttributeError)
    assert not hasattr(T, "no_such_thing")


# ---- Python constructs ------------------------------------------------------------------------

def test_break_and_continue_where_no_loop_can_stop():
    def brk():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                for i in T.Parallel(64):
                    if i > 3:
                        break  # E:break

    def cont():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((16,), T.float32)
                for k in T.Pipelined(4, num_stages=2):
                    T.copy(A[k * 16], s)
                    for j in T.serial(2):  # a loop inside the pipeline's body does not help
                        continue  # E:continue

    def loop_break():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                for i in T.vectorized(4):
                    T.loop_break()  # E:loop-break

    def outside():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                T.loop_break()  # E:outside

    raises(TileLangSyntaxError, "break", brk, "`break` inside a T.Parallel loop", "guard the rest of the body")
    raises(TileLangSyntaxError, "continue", cont, "`continue` inside a T.Pipelined loop", "T.serial")
    raises(TileLangSyntaxError, "loop-break", loop_break, "`break` inside a T.vectorized loop")
    raises(TileLangSyntaxError, "outside", outside, "`break` outside an IR loop")


def test_any_of_needs_a_small_region_of_constant_size():
    def symbolic():
        @T.prim_func
        def main(A: T.Tensor((64, 64), T.int32), n: T.int32):
            with T.Kernel(1) as bx:
                if T.any_of(A[0, 0:n]):  # E:any-symbolic
                    A[0, 0] = 1

    def too_many():
        @T.prim_func
        def main(A: T.Tensor((64, 64), T.int32)):
            with T.Kernel(1) as bx:
                if T.all_of(A):  # E:all-large
                    A[0, 0] = 1

    def not_a_buffer():
        @T.prim_func
        def main(A: T.Tensor((64, 64), T.int32)):
            with T.Kernel(1) as bx:
                if T.any_of(3):  # E:any-int
                    A[0, 0] = 1

    raises(TileLangSyntaxError, "any-symbolic", symbolic, "T.any_of of `A` needs a region of constant size")
    raises(TileLangSyntaxError, "all-large", too_many, "T.all_of of 4096 elements of `A`: at most 256")
    raises(TileLangTypeError, "any-int", not_a_buffer, "T.any_of must be a buffer or a part of one")


def test_im2col_names_what_it_needs():
    def not_nhwc():
        @T.prim_func
        def main(A: T.Tensor((4, 8, 8), T.float16)):
            with T.Kernel(1) as bx:
                col = T.alloc_shared((64, 32), T.float16)
                T.im2col(A, col, bx, 0, 3, 1, 1, 1)  # E:im2col-img

    def flat_tile():
        @T.prim_func
        def main(A: T.Tensor((1, 8, 8, 4), T.float16)):
            with T.Kernel(1) as bx:
                col = T.alloc_shared((64,), T.float16)
                T.im2col(A, col, bx, 0, 3, 1, 1, 1)  # E:im2col-col

    raises(TileLangTypeError, "im2col-img", not_nhwc, "T.im2col image must be a 4-d NHWC buffer")
    raises(TileLangSyntaxError, "im2col-col", flat_tile, "must be a [block_M, block_K] tile")


def test_transpose_and_dp4a_check_their_operands():
    def square_mismatch():
        @T.prim_func
        def main(A: T.Tensor((64, 64), T.float16)):
            with T.Kernel(1) as bx:
                a = T.alloc_shared((32, 16), T.float16)
                b = T.alloc_shared((32, 16), T.float16)
                T.transpose(a, b)  # E:transpose

    def wide_ints():
        @T.prim_func
        def main(A: T.Tensor((8,), T.int32), C: T.Tensor((1,), T.int32)):
            with T.Kernel(1) as bx:
                T.dp4a(A, A, C)  # E:dp4a

    raises(ShapeMismatchError, "transpose", square_mismatch, "T.transpose takes an [M, N] and an [N, M] tile")
    raises(TileLangTypeError, "dp4a", wide_ints, "T.dp4a multiplies 8-bit integers")


def test_tilelang_hints_check_their_arguments():
    def nonzero_safe_value():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                T.annotate_safe_value({A: -1.0})  # E:safe-value

    def shared_restrict():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((64,), T.float32)
                T.annotate_restrict_buffers(s)  # E:restrict

    def bad_ratio():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                T.annotate_l2_hit_ratio({A: 2.0})  # E:l2

    def bad_min_blocks():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                T.annotate_min_blocks_per_sm(0)  # E:min-blocks

    def symbolic_min_blocks():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(2) as bx:
                T.annotate_min_blocks_per_sm(bx + 1)  # E:min-blocks-symbolic

    raises(NotSupportedError, "safe-value", nonzero_safe_value, "out-of-range loads of `A` read 0, not -1.0")
    raises(TileLangSyntaxError, "min-blocks", bad_min_blocks, "T.annotate_min_blocks_per_sm(0): expected a positive")
    raises(TileLangSyntaxError, "min-blocks-symbolic", symbolic_min_blocks, "expected a positive Python int")
    raises(TileLangTypeError, "restrict", shared_restrict, "T.annotate_restrict_buffers takes tensor parameters")
    raises(TileLangSyntaxError, "l2", bad_ratio, "hit ratio 2.0 is not a number in [0, 1]")


def test_break_under_symbolic_if_in_python_loop():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                for v in [1, 2, 3]:
                    if bx > v:
                        break  # E:py-break
                for v in [1, 2, 3]:  # a Python-level break is fine
                    if v == 2:
                        break

    raises(TileLangSyntaxError, "py-break", build, "leaves a Python loop at trace time")


def test_return_under_symbolic_if():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                if bx > 0:
                    return  # E:return

    raises(TileLangSyntaxError, "return", build, "`return` inside a symbolic `if`")


def test_for_else_over_ir_loop():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                for i in T.serial(4):  # E:for-else
                    A[i] = 0.0
                else:
                    A[0] = 1.0

    raises(TileLangSyntaxError, "for-else", build, "`for ... else` over T.serial")


def test_symbolic_if_outside_kernel():
    n = T.dynamic("n")

    def build():
        @T.prim_func
        def main(A: T.Tensor((n,), T.float32)):
            if n > 4:  # E:if-outside
                pass
            with T.Kernel(1) as bx:
                pass

    raises(TileLangSyntaxError, "if-outside", build, "outside `with T.Kernel(...)`")


def helper_without_macro(x):
    if x > 1:  # E:helper
        return 1
    return 0


def test_symbolic_value_in_a_plain_helper():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(4) as bx:
                A[0] = helper_without_macro(bx)

    raises(TileLangSyntaxError, "helper", build, "no Python truth value")


def test_symbolic_select_of_buffers():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
            with T.Kernel(4) as bx:
                C = A if bx > 1 else B  # E:select
                C[0] = 1.0

    raises(TileLangTypeError, "select", build, "needs scalar values, got Buffer")


def test_generator_kernel_is_rejected():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                yield A  # E:yield

    raises(TileLangSyntaxError, "yield", build, "cannot be a generator")


# ---- parameters -------------------------------------------------------------------------------

def test_prim_func_parameter_without_type():
    def build():
        @T.prim_func
        def main(A, B: T.Tensor((4,), T.float32)):  # E:no-type
            with T.Kernel(1) as bx:
                B[0] = 0.0

    raises(TileLangSyntaxError, "no-type", build, "parameter `A` of `main` has no type")


def test_prim_func_parameter_with_bad_type():
    def build():
        @T.prim_func
        def main(A: str):  # E:bad-type
            with T.Kernel(1) as bx:
                pass

    raises(TileLangSyntaxError, "bad-type", build, "parameter `A` is annotated with")


def test_const_in_prim_func():
    def build():
        @T.prim_func
        def main(A: T.Tensor((4,), T.float32)):
            M = T.const("M")  # E:const-prim
            with T.Kernel(M) as bx:
                pass

    raises(TileLangSyntaxError, "const-prim", build, "T.const is only for eager-style")


def test_out_idx_out_of_range():
    @tilelang.jit(out_idx=[5])
    def factory():
        @T.prim_func
        def main(A: T.Tensor((4,), T.float32)):  # E:out-idx
            with T.Kernel(1) as bx:
                A[0] = 0.0

        return main

    raises(TileLangSyntaxError, "out-idx", factory.get_ir, "out_idx entry 5 is out of range")


def test_factory_must_return_prim_func():
    @tilelang.jit
    def factory(n):  # E:factory
        return n

    raises(TileLangSyntaxError, "factory", lambda: factory.get_ir(3), "returned int, not a T.prim_func")


# ---- eager style ------------------------------------------------------------------------------

@tilelang.jit
def eager_unbound(A):
    M, N = T.const("M, N")  # E:unbound
    A: T.Tensor((M, 2 * N), T.float32)
    B = T.empty((M,), T.float32)
    with T.Kernel(M, threads=32) as bx:
        B[bx] = A[bx, 0]
    return B


def test_unbound_const_names_it_and_says_what_to_pass():
    err = raises(UnboundConstError, "unbound", lambda: eager_unbound.get_ir(torch.zeros(4, 8)), "`N`",
                 "N=<int>")
    assert "`M`" not in err.message
    f = eager_unbound.get_ir(torch.zeros(4, 8), N=4)  # passing the size by keyword binds it
    assert [d.value for d in f.params[0].shape] == [4, 8]


@tilelang.jit
def eager_late_const(A):
    M = T.const("M")
    A: T.Tensor((M,), T.float32)
    B = T.empty((M,), T.float32)
    W = T.const("W")  # E:late-const
    with T.Kernel(M, threads=W) as bx:
        B[bx] = A[bx]
    return B


def test_const_declared_after_annotations_is_unbound():
    raises(UnboundConstError, "late-const", lambda: eager_late_const.get_ir(torch.zeros(4)), "`W`")
    f = eager_late_const.get_ir(torch.zeros(4), W=64)
    assert f.body.threads == (64,)


@tilelang.jit
def eager_pair(A, B):
    M, N = T.const("M, N")  # E:pair-const
    A: T.Tensor((M, N), T.float16)
    B: T.Tensor((M, N), T.float16)  # E:pair-ann
    C = T.empty((M, N), T.float16)
    with T.Kernel(M, threads=32) as bx:
        for j in T.Parallel(N):
            C[bx, j] = A[bx, j] + B[bx, j]
    return C


def test_eager_argument_errors():
    a = torch.zeros(4, 8, dtype=torch.float16)
    raises(ArgumentError, "pair-ann", lambda: eager_pair.get_ir(a, torch.zeros(4, 8)), "dtype torch.float32",
           "annotated float16")
    raises(ArgumentError, "pair-const", lambda: eager_pair.get_ir(a, torch.zeros(4, 6, dtype=torch.float16)),
           "`N` is 8 from A.shape[1] but 6 from B.shape[1]")
    with pytest.raises(ArgumentError, match="missing argument B"):
        eager_pair(a)


@tilelang.jit
def eager_use_before_annotation(A):
    M = T.const("M")
    x = A[0]  # E:early-use
    A: T.Tensor((M,), T.float32)
    return x


def test_parameter_used_before_annotation():
    raises(TileLangSyntaxError, "early-use", lambda: eager_use_before_annotation.get_ir(torch.zeros(3)),
           "used before it is annotated")


@tilelang.jit
def eager_annotates_local(A):
    M = T.const("M")
    A: T.Tensor((M,), T.float32)
    Z: T.Tensor((M,), T.float32)  # E:not-param
    return A


def test_tensor_annotation_of_a_non_parameter():
    raises(TileLangSyntaxError, "not-param", lambda: eager_annotates_local.get_ir(torch.zeros(3)),
           "`Z`, which is not a parameter")


@tilelang.jit
def eager_empty_in_kernel(A):
    M = T.const("M")
    A: T.Tensor((M,), T.float32)
    with T.Kernel(1) as bx:
        C = T.empty((M,), T.float32)  # E:empty
        C[0] = A[0]
    return C


def test_empty_inside_kernel():
    raises(TileLangSyntaxError, "empty", lambda: eager_empty_in_kernel.get_ir(torch.zeros(3)),
           "T.empty declares an output")


# ---- error presentation -----------------------------------------------------------------------

def test_errors_carry_no_frontend_frames():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((32,), T.float32)
                T.copy(A, s)

    with pytest.raises(ShapeMismatchError) as info:
        build()
    frames = traceback.extract_tb(info.value.__traceback__)
    internal = [f for f in frames if "/frontend/" in f.filename]
    assert len(internal) <= 1, [f.filename for f in frames]
    assert info.value.__suppress_context__


@T.macro
def guarded_store(A, i):
    if i > 0:
        return  # E:macro-return
    A[i] = 1.0


def test_return_in_macro_under_symbolic_if():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(4) as bx:
                guarded_store(A, bx)

    raises(TileLangSyntaxError, "macro-return", build, "`return` inside a symbolic `if`")


def test_wait_wgmma_checks_its_count():
    """``T.wait_wgmma(n)`` (TileLang's wait after ``wg_wait=-1`` gemms) is accepted and emits nothing, the
    compiler placing the waits; a negative or symbolic count is a mistake, named at its line."""
    def build(count):
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32), n: T.int32):
            with T.Kernel(1, threads=64) as bx:
                T.wait_wgmma(count(n))  # E:wait
                for i in T.Parallel(64):
                    A[i] = 1.0
        return main

    raises(TileLangSyntaxError, "wait", lambda: build(lambda n: -1), "T.wait_wgmma(-1)", "cannot be negative")
    raises(TileLangSyntaxError, "wait", lambda: build(lambda n: n), "must be a Python int")
    a = torch.zeros(64)
    tilelang.compile(build(lambda n: 1), target="interp")(a, 3)
    assert torch.equal(a, torch.ones(64))
