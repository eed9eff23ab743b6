# Kernel code is written as users write it (unused block and loop variables included).
# ruff: noqa: F841, F842, B007, E741, F821
"""The mistakes kernel authors make, each answered by a TileLang error that names the line of the
mistake (marked ``# E:<case name>``) and says what to change.

Each ``case_*`` function makes one mistake; ``@mistake`` records the error type and the phrases its
message (with the hint) must hold.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source
from tests.null.located import located_errors
from tilelang_x.core_ir.errors import (
    ArgumentError,
    BackendNotImplementedError,
    LayoutError,
    NotSupportedError,
    OutOfBoundsError,
    ShapeMismatchError,
    TileLangError,
    TileLangSyntaxError,
    TileLangTypeError,
    UnknownTargetError,
    VerificationError,
)

where, raises = located_errors(__file__)


@dataclass(frozen=True)
class Mistake:
    fn: Callable[[], object]
    exc: type
    words: tuple[str, ...]

    @property
    def tag(self) -> str:
        return self.fn.__name__.removeprefix("case_")


MISTAKES: list[Mistake] = []


def mistake(exc: type, *words: str) -> Callable[[Callable[[], object]], Callable[[], object]]:
    def register(fn: Callable[[], object]) -> Callable[[], object]:
        MISTAKES.append(Mistake(fn, exc, words))
        return fn

    return register


def interp(func: object, *args: object, out_idx: list[int] | None = None) -> object:
    kernel = tilelang.compile(func, target="interp", out_idx=out_idx)
    return kernel(*args) if args else kernel


def doubler() -> object:
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64, 64), T.float32)):  # E:call
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(64, 64):
                B[i, j] = A[i, j] * 2.0

    return main


# ---- T.* calls whose arguments do not fit ------------------------------------------------------

@mistake(TileLangSyntaxError, "T.gemm() got an unexpected keyword argument 'trans_B'", "did you mean `transpose_B=`")
def case_gemm_keyword_typo():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 64), T.float16)
            c = T.alloc_fragment((64, 64), T.float32)
            T.gemm(a, a, c, trans_B=True)  # E:gemm_keyword_typo


@mistake(TileLangSyntaxError, "T.Kernel() got an unexpected keyword argument 'thread'", "`threads=`")
def case_kernel_keyword_typo():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, thread=128) as bx:  # E:kernel_keyword_typo
            A[0] = 1.0


@mistake(TileLangSyntaxError, "T.alloc_shared() missing 1 required positional argument: 'dtype'",
         "T.alloc_shared(shape, dtype")
def case_alloc_without_dtype():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((64,))  # E:alloc_without_dtype


@mistake(TileLangSyntaxError, "T.copy() takes 2 positional arguments but 3 were given")
def case_copy_with_three_operands():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((64,), T.float32)
            T.copy(A, s, 64)  # E:copy_with_three_operands


@mistake(TileLangSyntaxError, "T.Pipelined() got an unexpected keyword argument 'stages'", "num_stages=")
def case_pipelined_keyword_typo():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            for k in T.Pipelined(4, stages=2):  # E:pipelined_keyword_typo
                A[k] = 1.0


@T.macro
def scale_into(dst, value):
    dst[0] = value


@mistake(TileLangSyntaxError, "T.macro `scale_into`: missing a required argument: 'value'",
         "call it as scale_into(dst, value)")
def case_macro_missing_argument():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            scale_into(A)  # E:macro_missing_argument


@mistake(TileLangSyntaxError, "T.macro `scale_into`: too many positional arguments")
def case_macro_too_many_arguments():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            scale_into(A, 1.0, 2.0)  # E:macro_too_many_arguments


@mistake(TileLangSyntaxError, "T.reduce_max clear must be a Python bool, got the string 'False'", "without quotes")
def case_bool_flag_as_string():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((64, 64), T.float32)
            r = T.alloc_fragment((64,), T.float32)
            T.reduce_max(f, r, dim=1, clear="False")  # E:bool_flag_as_string


@mistake(TileLangSyntaxError, "name 'by' is not defined", "put the names in parentheses: `as (..., by)`")
def case_block_indices_without_parentheses():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32)):
        with T.Kernel(4, 4, threads=128) as bx, by:  # E:block_indices_without_parentheses
            A[bx, by] = 1.0


@mistake(TileLangTypeError, "cannot use tuple value (i_0, i_1)", "this name holds 2 index variables")
def case_one_name_for_two_loop_indices():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32)):
        with T.Kernel(4, threads=128) as bx:
            for i in T.Parallel(64, 64):
                A[i, 0] = 1.0  # E:one_name_for_two_loop_indices


@mistake(TileLangSyntaxError, "name 'block_M' is not defined")
def case_undefined_name():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32)):
        with T.Kernel(4, threads=128) as bx:
            A[bx, 0] = block_M  # E:undefined_name


@mistake(TileLangSyntaxError, "T.dec_max_nreg(20): setmaxnreg takes a multiple of 8 from 24 to 256", "24 or 40")
def case_register_count_off_the_grid():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=256) as bx:
            with T.ws(1):
                T.dec_max_nreg(20)  # E:register_count_off_the_grid
            with T.ws(0):
                T.fill(A, 0.0)


@mistake(TileLangSyntaxError, "T.warpgroup_wait(-1): the count of groups left in flight cannot be negative",
         "T.warpgroup_wait(0) waits for every group")
def case_negative_wgmma_wait():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            T.fill(A, 0.0)
            T.warpgroup_wait(-1)  # E:negative_wgmma_wait


# ---- Python applied to kernel values -----------------------------------------------------------

@mistake(TileLangTypeError, "not 'Var'", "T.cast(x, dtype) instead of int()")
def case_int_of_a_block_index():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(4, threads=128) as bx:
            A[int(bx)] = 1.0  # E:int_of_a_block_index


@mistake(TileLangTypeError, "must be real number", "T.exp, T.log")
def case_math_exp_of_an_element():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(64):
                A[i] = math.exp(A[i])  # E:math_exp_of_an_element


@mistake(TileLangTypeError, "has no len()", "A.shape[k]")
def case_len_of_a_buffer():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            for i in T.serial(len(A)):  # E:len_of_a_buffer
                A[i] = 1.0


@mistake(TileLangTypeError, "'Region'", "index every dimension")
def case_row_used_as_a_value():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(64):
                B[i] = A[i] + 1.0  # E:row_used_as_a_value


@mistake(TileLangTypeError, "'Var' object does not support item assignment", "only buffers take indices")
def case_scalar_parameter_indexed():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32), n: T.int32):
        with T.Kernel(1, threads=32) as bx:
            n[0] = 3  # E:scalar_parameter_indexed


@mistake(VerificationError, "variable `k` is used outside the scope", "T.alloc_var")
def case_python_variable_as_running_sum():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32), B: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            acc = 0.0
            for k in T.serial(64):
                acc = acc + A[k]
            B[0] = acc  # E:python_variable_as_running_sum

    interp(main, torch.ones(64), torch.zeros(1))


@mistake(VerificationError, "variable `i` is used outside the scope")
def case_loop_variable_after_its_loop():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            for i in T.serial(4):
                A[i] = 1.0
            A[i] = 2.0  # E:loop_variable_after_its_loop

    interp(main, torch.zeros(64))


# ---- indices -----------------------------------------------------------------------------------

@mistake(VerificationError, "index `1.5` of `A` has dtype float32, not an integer type")
def case_float_index():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            A[1.5] = 0.0  # E:float_index

    interp(main, torch.zeros(64))


@mistake(OutOfBoundsError, "index -1 of `A` is negative", "A.shape[k] - 1")
def case_negative_index():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            A[-1] = 1.0  # E:negative_index


@mistake(OutOfBoundsError, "index -32 of `A` is negative")
def case_negative_slice():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((32, 64), T.float32)
            T.copy(A[-32:, :], s)  # E:negative_slice


@mistake(OutOfBoundsError, "index 64 is past the end of `A`, whose dimension 0 has 64 elements", "0 to 63")
def case_constant_index_past_the_end():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            A[64] = 1.0  # E:constant_index_past_the_end


@mistake(OutOfBoundsError, "index 80 is past the end of `A`")
def case_copy_from_a_row_past_the_end():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((32, 64), T.float16)
            T.copy(A[80, 0], s)  # E:copy_from_a_row_past_the_end
            T.copy(s, B[0, 0])


@mistake(ShapeMismatchError, "slice 32:0 of `A` (dimension 0) is empty")
def case_empty_slice():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((32, 64), T.float32)
            T.copy(A[32:0, :], s)  # E:empty_slice


@mistake(TileLangSyntaxError, "a list is not an index of `A`")
def case_list_as_index():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            A[[0, 1]] = 0.0  # E:list_as_index


@mistake(TileLangSyntaxError, "`A` has 2 dimensions but the store gives 1 index")
def case_store_with_too_few_indices():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            A[0] = 0.0  # E:store_with_too_few_indices


@mistake(OutOfBoundsError, "3 indices given for 2-d buffer `A`")
def case_too_many_indices():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            A[0, 1, 2] = 0.0  # E:too_many_indices


@mistake(OutOfBoundsError, "write to `f` out of bounds: index `j` of dimension 1 runs from 0 to 127",
         "match `f`'s shape (64, 64)")
def case_parallel_past_the_fragment():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((64, 64), T.float32)
            for i, j in T.Parallel(64, 128):
                f[i, j] = 1.0  # E:parallel_past_the_fragment
            T.copy(f, A)

    cuda_source(main, "sm_80")  # found before any backend: the CUDA backend itself checks nothing


@mistake(VerificationError, "the T.Parallel iterations depend on each other",
         "`f` is read at [i] and written at [i + 1]", "T.serial")
def case_parallel_iterations_depend_on_each_other():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64) as bx:
            f = T.alloc_fragment((64,), T.float32)
            T.clear(f)
            for i in T.Parallel(63):
                f[i + 1] = f[i] + 1.0  # E:parallel_iterations_depend_on_each_other
            T.copy(f, A)

    interp(main, torch.zeros(64))


# ---- kernel structure and allocations ----------------------------------------------------------

@mistake(TileLangSyntaxError, "T.Kernel blocks cannot be nested")
def case_kernel_in_kernel():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            with T.Kernel(2) as by:  # E:kernel_in_kernel
                A[0] = 1.0


@mistake(TileLangSyntaxError, "store to `A` outside `with T.Kernel(...)`")
def case_no_kernel():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        A[0] = 1.0  # E:no_kernel


@mistake(TileLangSyntaxError, "threads=2048 is 2048 threads a block", "at most 1024")
def case_too_many_threads():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=2048) as bx:  # E:too_many_threads
            A[0] = 0.0


@mistake(TileLangTypeError, "T.alloc_shared: shape (0, 64) has a dimension of size 0")
def case_tile_of_size_zero():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((0, 64), T.float32)  # E:tile_of_size_zero


@mistake(NotSupportedError, "T.alloc_shraed is not supported", "did you mean T.alloc_shared")
def case_misspelled_language_name():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shraed((64,), T.float32)  # E:misspelled_language_name


@mistake(TileLangTypeError, "unknown dtype 'float17'", "float16")
def case_cast_to_unknown_dtype():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            A[0] = T.cast(A[1], "float17")  # E:cast_to_unknown_dtype


@mistake(TileLangTypeError, "shape entry float32 is not an integer",
         "the shape comes first: T.alloc_shared(shape, dtype)")
def case_alloc_with_dtype_and_shape_swapped():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared(T.float32, (64,))  # E:alloc_with_dtype_and_shape_swapped


@mistake(TileLangTypeError, "T.cast takes the value first: T.cast(value, dtype)")
def case_cast_with_arguments_swapped():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            A[0] = T.cast(T.float16, A[1])  # E:cast_with_arguments_swapped


@mistake(TileLangTypeError, "cannot use str value 'zero'")
def case_fill_with_a_string():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            f = T.alloc_fragment((64,), T.float32)
            T.fill(f, "zero")  # E:fill_with_a_string


@mistake(TileLangSyntaxError, "T.Pipelined num_stages=-1 must be a non-negative int")
def case_negative_num_stages():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((16, 64), T.float16)
            for k in T.Pipelined(4, num_stages=-1):  # E:negative_num_stages
                T.copy(A[k * 16, 0], s)


@mistake(TileLangSyntaxError, "T.use_swizzle order='diagonal'", "order='row' or 'column'")
def case_swizzle_order():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(4, 4, threads=32) as (bx, by):
            T.use_swizzle(10, order="diagonal")  # E:swizzle_order
            A[bx] = 1.0


@mistake(TileLangSyntaxError, "T.use_swizzle panel_size must be positive, got 0")
def case_swizzle_panel_of_zero():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(4, 4, threads=32) as (bx, by):
            T.use_swizzle(panel_size=0)  # E:swizzle_panel_of_zero
            A[bx] = 1.0


# ---- tile ops ----------------------------------------------------------------------------------

@mistake(ShapeMismatchError, "transpose_B=True", "K of A is 32 but K of B is 64")
def case_gemm_wrong_transpose():
    @T.prim_func
    def main(A: T.Tensor((64, 32), T.float16)):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 32), T.float16)
            b = T.alloc_shared((32, 64), T.float16)
            c = T.alloc_fragment((64, 64), T.float32)
            T.gemm(a, b, c, transpose_B=True)  # E:gemm_wrong_transpose


@mistake(ShapeMismatchError, "N of B is 64 but C has 32 columns")
def case_gemm_accumulator_shape():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 64), T.float16)
            c = T.alloc_fragment((64, 32), T.float32)
            T.gemm(a, a, c)  # E:gemm_accumulator_shape


@mistake(TileLangTypeError, "operand `a` is float16 but the accumulator `c` is int32", "T.float32")
def case_gemm_integer_accumulator():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 64), T.float16)
            c = T.alloc_fragment((64, 64), T.int32)
            T.gemm(a, a, c)  # E:gemm_integer_accumulator


@mistake(ShapeMismatchError, "gives [64], but `r` is [64, 2]")
def case_reduce_destination_shape():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((64, 64), T.float32)
            r = T.alloc_fragment((64, 2), T.float32)
            T.reduce_sum(f, r, dim=1)  # E:reduce_destination_shape


@mistake(TileLangSyntaxError, "dim=-3 is out of range", "[-2, 1]")
def case_reduce_dim_out_of_range():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((64, 64), T.float32)
            r = T.alloc_fragment((64,), T.float32)
            T.reduce_sum(f, r, dim=-3)  # E:reduce_dim_out_of_range


@mistake(TileLangSyntaxError, "source `A` is a global buffer", "copy global data in first")
def case_reduce_global_tensor():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            T.reduce_sum(A, B, dim=1)  # E:reduce_global_tensor


@mistake(ShapeMismatchError, "source `A` region [64, 64] vs destination `s` region [32, 128]")
def case_copy_between_shapes():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((32, 128), T.float32)
            T.copy(A, s)  # E:copy_between_shapes


# ---- the CUDA backend (codegen only: no GPU needed) -------------------------------------------

@mistake(LayoutError, "shared tile `s` needs a constant shape")
def case_shared_tile_of_symbolic_shape():
    M = T.symbolic("M")

    @T.prim_func
    def main(A: T.Tensor((M,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((M,), T.float32)  # E:shared_tile_of_symbolic_shape
            T.copy(A, s)

    cuda_source(main, "sm_80")


@mistake(TileLangError, "needs 1024.0 KB of shared memory, but sm_80 allows 163.0 KB", "`s` 1024.0 KB",
         "num_stages")
def case_too_much_shared_memory():
    @T.prim_func
    def main(A: T.Tensor((512, 512), T.float32)):
        with T.Kernel(1, threads=128) as bx:  # E:too_much_shared_memory
            s = T.alloc_shared((512, 512), T.float32)
            T.copy(A, s)
            T.copy(s, A)

    cuda_source(main, "sm_80")


@mistake(LayoutError, "T.gemm on CUDA runs on whole warps: a block of 100 threads", "threads=96 or 128")
def case_gemm_in_a_block_of_partial_warps():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16), C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=100) as bx:
            a = T.alloc_shared((64, 64), T.float16)
            b = T.alloc_shared((64, 64), T.float16)
            c = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, c, clear_accum=True)  # E:gemm_in_a_block_of_partial_warps
            T.copy(c, C)

    cuda_source(main, "sm_80")


@mistake(BackendNotImplementedError, "T.atomic_add on int8 is not supported on CUDA", "int32")
def case_atomic_add_on_int8():
    @T.prim_func
    def main(A: T.Tensor((64,), T.int8)):
        with T.Kernel(1, threads=32) as bx:
            T.atomic_add(A[0], 1)  # E:atomic_add_on_int8

    cuda_source(main, "sm_90a")


@mistake(LayoutError, "T.gemm with a fragment operand", "B (`b`) must be in shared memory; only A may be a fragment")
def case_gemm_fragment_b():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float16), C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 64), T.float16)
            b = T.alloc_fragment((64, 64), T.float16)
            c = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, a)
            T.copy(A, b)
            T.clear(c)
            T.gemm(a, b, c)  # E:gemm_fragment_b
            T.copy(c, C)

    cuda_source(main, "sm_90a")


@mistake(LayoutError, "layout conflict for `f`", "indexes `f` with the loop's variables in another order")
def case_fragment_read_transposed():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, f)
            for i, j in T.Parallel(64, 64):
                B[j, i] = f[i, j] + f[j, i]  # E:fragment_read_transposed

    cuda_source(main, "sm_80")


@mistake(LayoutError, "a fragment A (`a`) cannot be transposed (transpose_A=True)", "T.alloc_shared")
def case_gemm_transposed_fragment_a():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float16), C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_fragment((64, 64), T.float16)
            b = T.alloc_shared((64, 64), T.float16)
            c = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, a)
            T.copy(A, b)
            T.clear(c)
            T.gemm(a, b, c, transpose_A=True)  # E:gemm_transposed_fragment_a
            T.copy(c, C)

    cuda_source(main, "sm_80")


# ---- calls, compile options and targets --------------------------------------------------------

@tilelang.jit(target="interp")
def eager_copy(A):
    M = T.const("M")
    A: T.Tensor((M,), T.float32)  # E:eager_tensor_given_a_float
    B = T.empty((M,), T.float32)
    with T.Kernel(1, threads=32) as bx:
        B[0] = A[0]
    return B


@mistake(ArgumentError, "argument `A` is float 1.0, but `A` is annotated as a tensor", "torch tensor")
def case_eager_tensor_given_a_float():
    eager_copy(1.0)


@mistake(ArgumentError, "parameter `A` (float32[64, 64]): expected dtype float32, got torch.float16",
         ".to(torch.float32)")
def case_call_with_wrong_dtype():
    interp(doubler(), torch.zeros(64, 64, dtype=torch.float16), torch.zeros(64, 64))


@mistake(ArgumentError, "dimension 1 must be 64, got 32")
def case_call_with_wrong_shape():
    interp(doubler(), torch.zeros(64, 32), torch.zeros(64, 64))


@mistake(ArgumentError, "takes 2 input(s) (A, B) but got 1")
def case_call_with_too_few_tensors():
    interp(doubler(), torch.zeros(64, 64))


@mistake(ArgumentError, "is not contiguous", ".contiguous()")
def case_call_with_a_transposed_tensor():
    interp(doubler(), torch.zeros(64, 64).t(), torch.zeros(64, 64))


@mistake(ArgumentError, "is on device 'meta', but target interp runs kernels on 'cpu'", ".cpu()")
def case_call_with_a_tensor_on_another_device():
    interp(doubler(), torch.zeros(64, 64, device="meta"), torch.zeros(64, 64))


@mistake(ArgumentError, "arguments are passed by position, not by name (A=..., B=...)", "main(A, B)")
def case_call_with_keyword_tensors():
    interp(doubler())(A=torch.zeros(64, 64), B=torch.zeros(64, 64))


@tilelang.jit(out_idx=[-1], target="interp")
def copy_factory(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            B[0, 0] = A[0, 0]

    return main


@mistake(TileLangSyntaxError, "factory `copy_factory`: missing a required argument: 'N'",
         "kernel = copy_factory(M, N)`, then call `kernel(tensors...)`")
def case_tensor_passed_to_the_factory():
    copy_factory(torch.zeros(4, 4))  # E:tensor_passed_to_the_factory


def scaled_fill() -> object:
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32), n: T.int32):  # E:int_too_large_for_its_parameter
        with T.Kernel(1, threads=32) as bx:
            A[0] = T.cast(n, T.float32)

    return main


@mistake(ArgumentError, "parameter `n` (int32 scalar): 1099511627776 does not fit int32", "-2147483648 to 2147483647")
def case_int_too_large_for_its_parameter():
    kernel = interp(scaled_fill())
    kernel(torch.zeros(64), 5)  # the second call takes the fast path
    kernel(torch.zeros(64), 2**40)


@mistake(TileLangSyntaxError, "out_idx entry 2 is out of range", "[-2, 1]")
def case_out_idx_out_of_range():
    interp(doubler(), out_idx=[2])


def _compile_with(configs: dict[str, object]) -> object:
    return tilelang.compile(doubler(), target="interp", pass_configs=configs)


@mistake(TileLangSyntaxError, "unknown pass config 'tlx.staged_epilouge'", "did you mean tlx.staged_epilogue")
def case_misspelled_pass_config():
    _compile_with({"tlx.staged_epilouge": False})


@mistake(TileLangSyntaxError, "pass config 'tlx.staged_epilogue' is 'false'; it takes True or False")
def case_pass_config_given_a_string():
    _compile_with({"tlx.staged_epilogue": "false"})


def _compile_for(target: str) -> object:
    return tilelang.compile(doubler(), target=target)  # E:target


@mistake(UnknownTargetError, "CUDA architecture 'sm_75' is not supported", "sm_80")
def case_unsupported_cuda_arch():
    _compile_for("cuda:sm_75")


@mistake(UnknownTargetError, "unknown target 'foo'", "interp")
def case_unknown_target():
    _compile_for("foo")



def _tag(m: Mistake) -> str:
    """The marker the error must name: the case's own, or the shared line its error points at
    (a call's errors name the kernel's definition, a target's the compile call)."""
    if m.tag.startswith(("call_", "out_idx", "misspelled_pass", "pass_config")):
        return "call"
    if m.tag in ("unsupported_cuda_arch", "unknown_target"):
        return "target"
    return m.tag


@pytest.mark.parametrize("m", MISTAKES, ids=[m.tag for m in MISTAKES])
def test_mistake_names_its_line_and_what_to_change(m: Mistake) -> None:
    raises(m.exc, _tag(m), m.fn, *m.words)


def test_every_case_is_registered_once() -> None:
    assert len({m.tag for m in MISTAKES}) == len(MISTAKES) >= 40


def test_a_kernel_with_the_same_text_as_another_keeps_its_own_line() -> None:
    interp(doubler())

    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64, 64), T.float32)):  # E:twin
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(64, 64):
                B[i, j] = A[i, j] * 2.0

    assert main.script() == doubler().script()
    raises(ArgumentError, "twin", lambda: interp(main, torch.zeros(64, 32), torch.zeros(64, 64)), "dimension 1")


def test_every_name_the_docs_list_as_unsupported_has_its_hint() -> None:
    """The table of docs/language.md's "What is not supported" and the hints the error gives agree."""
    import pathlib
    import re

    from tilelang_x.frontend.language import _INSTEAD

    text = (pathlib.Path(__file__).parents[2] / "docs" / "language.md").read_text()
    section = text[text.index("## What is not supported"):text.index("## Known backend gaps")]
    names = {n for row in section.splitlines() if row.startswith("| `T.")
             for n in re.findall(r"`T\.(\w+)`", row.split(" | ")[0])}
    assert len(names) > 40
    assert names <= set(_INSTEAD), sorted(names - set(_INSTEAD))
    for name in sorted(names):
        with pytest.raises(NotSupportedError) as err:
            getattr(T, name)
        assert err.value.hint == _INSTEAD[name]
