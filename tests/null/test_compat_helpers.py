"""TileLang's helpers for the Python around kernels: tilelang.cdiv / next_power_of_2 for tile
sizes, T.dtype and a dtype's .as_torch()."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tilelang_x.core_ir.errors import NotSupportedError, TileLangTypeError


@pytest.mark.parametrize(("a", "b", "want"), [(0, 4, 0), (1, 4, 1), (8, 4, 2), (9, 4, 3), (8192, 8192, 1)])
def test_cdiv(a: int, b: int, want: int) -> None:
    assert tilelang.cdiv(a, b) == want
    assert tilelang.math.cdiv(a, b) == want


@pytest.mark.parametrize(("x", "want"), [(0, 1), (1, 1), (2, 2), (3, 4), (200, 256), (8192, 8192), (2**40 + 1, 2**41)])
def test_next_power_of_2(x: int, want: int) -> None:
    assert tilelang.next_power_of_2(x) == want


def test_dtype_from_any_spelling_and_back_to_torch() -> None:
    assert T.dtype("bfloat16") is T.bfloat16 and T.dtype(torch.float16) is T.float16 and T.dtype(T.int8) is T.int8
    assert T.dtype("float8_e4m3").as_torch() is torch.float8_e4m3fn and T.float32.as_torch() is torch.float32
    with pytest.raises(TileLangTypeError):
        T.dtype("float7")


def test_module_level_helpers_tilelang_examples_import() -> None:
    from tilelang_x.carver.arch import driver

    assert tilelang.DataType("float16").bits == 16
    if torch.cuda.is_available():
        assert driver.get_num_sms() == torch.cuda.get_device_properties(0).multi_processor_count
    else:
        with pytest.raises(tilelang.TileLangError, match="needs a CUDA device"):
            driver.get_num_sms()
    with pytest.raises(NotSupportedError, match=r"tilelang.intrinsics.TensorCoreIntrinEmitter is not supported"):
        _ = tilelang.intrinsics.TensorCoreIntrinEmitter


def test_mma_swizzle_layout_annotates_a_shared_operand() -> None:
    from tests.null.cuda_helpers import cuda_source

    @T.prim_func
    def copy_through(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), T.float16)
            T.annotate_layout({A_s: tilelang.intrinsics.make_mma_swizzle_layout(A_s)})
            T.copy(A, A_s)
            T.copy(A_s, B)

    a = torch.randn(64, 64, dtype=torch.float16)
    assert torch.equal(tilelang.compile(copy_through, out_idx=[-1], target="interp")(a), a)
    _, ctx = cuda_source(copy_through, "sm_80")
    assert next(v for k, v in ctx.data["cuda.layouts"].items() if k.name == "A_s").swizzle == "sw128"


def test_torch_assert_close_allows_a_small_fraction_of_mismatches() -> None:
    from tilelang_x.utils.tensor import torch_assert_close

    ref = torch.arange(1000, dtype=torch.float32)
    off_by_one = ref.clone()
    off_by_one[7] += 1  # one element in a thousand: within the default max_mismatched_ratio
    torch_assert_close(off_by_one, ref)
    tilelang.testing.torch_assert_close(off_by_one, ref)
    off_by_one[8] += 1
    with pytest.raises(AssertionError, match="2 of 1000 elements"):
        torch_assert_close(off_by_one, ref)
    torch_assert_close(off_by_one, ref, max_mismatched_ratio=0.002)
    with pytest.raises(AssertionError, match="dtype mismatch"):
        torch_assert_close(ref.half(), ref)


def test_tvm_float8_spellings_and_map_torch_type() -> None:
    from tilelang_x.utils.tensor import map_torch_type

    assert T.dtype("e4m3_float8") is T.float8_e4m3 and T.dtype("e5m2_float8") is T.float8_e5m2
    assert map_torch_type("e4m3_float8") is torch.float8_e4m3fn and map_torch_type("bfloat16") is torch.bfloat16
    assert map_torch_type(T.float32) is torch.float32


def test_set_random_seed_repeats_torch_draws() -> None:
    tilelang.testing.set_random_seed(3)
    a = torch.randn(4)
    tilelang.testing.set_random_seed(3)
    assert torch.equal(a, torch.randn(4))


def test_thread_storage_sync_key_is_accepted() -> None:
    assert tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC.value == "tl.disable_thread_storage_sync"


@tilelang.jit
def mask_outside_window(threads: int = 128, block_K: int = 256):
    # written as TileLang's DeepSeek v3.2 indexer cleans its logits: TVM's T.thread_binding spelling
    seq_len = T.dynamic("seq_len")
    seq_len_kv = T.dynamic("seq_len_kv")

    @T.prim_func
    def main(Logits: T.Tensor([seq_len, seq_len_kv], "float"), Starts: T.Tensor([seq_len], "int32"),
             Ends: T.Tensor([seq_len], "int32")):
        with T.Kernel(seq_len, threads=threads) as bx:
            tx = T.thread_binding(0, threads, thread="threadIdx.x")
            start = T.alloc_local([1], "int32")
            end = T.alloc_local([1], "int32")
            start[0] = Starts[bx]
            end[0] = Ends[bx]
            for n_i in T.serial(T.ceildiv(seq_len_kv, block_K)):
                for k_i in T.serial(block_K // threads):
                    idx = n_i * block_K + k_i * threads + tx
                    if idx < seq_len_kv and (idx < start[0] or idx >= end[0]):
                        Logits[bx, idx] = -T.infinity("float")

    return main


def test_tvm_thread_binding_spelling_runs_and_compiles() -> None:
    from tests.kernels.safe_access import window_inputs
    from tests.null.cuda_helpers import cuda_source

    logits, starts, ends, want = window_inputs()
    kernel = tilelang.compile(mask_outside_window.get_ir(), target="interp")
    kernel(logits, starts, ends)
    assert torch.equal(logits, want)
    source, _ = cuda_source(mask_outside_window.get_ir(), "sm_80")
    assert "threadIdx.x" in source


@pytest.mark.parametrize(("stop", "axis", "match"), [
    (64, "threadIdx.x", "the range must be the block's, 0 to 128"),
    (128, "blockIdx.x", "thread must be 'threadIdx.x'"),
])
def test_tvm_thread_binding_names_the_fix(stop: int, axis: str, match: str) -> None:
    from tilelang_x.core_ir.errors import TileLangSyntaxError

    @tilelang.jit(out_idx=[-1])
    def lane_ids(stop: int, axis: str):
        @T.prim_func
        def main(A: T.Tensor((128,), "int32")):
            with T.Kernel(1, threads=128):
                tx = T.thread_binding(0, stop, thread=axis)
                A[tx] = tx

        return main

    with pytest.raises(TileLangSyntaxError, match=match) as info:
        lane_ids.get_ir(stop, axis)
    assert "test_compat_helpers.py" in str(info.value)


def test_dtypes_are_their_names_as_in_tilelang() -> None:
    import copy
    import pickle

    # TileLang's KDA examples map dtypes to torch with getattr(torch, T.bfloat16)
    assert getattr(torch, T.bfloat16) is torch.bfloat16 and getattr(torch, T.float32) is torch.float32
    assert isinstance(T.float16, str) and T.float16 == "float16" and f"{T.int8}" == "int8"
    assert {"float16": 1}[T.float16] == 1 and T.float16 != T.bfloat16
    assert pickle.loads(pickle.dumps(T.uint8)) is T.uint8 and copy.deepcopy(T.int32) is T.int32
    with pytest.raises(AttributeError):
        T.float16.bits = 8


@T.macro
def _scaled_copy(src, dst, n: T.int32, scale: T.float32):
    for i in T.Parallel(n):
        dst[i] = src[i] * scale


def test_macro_parameters_annotated_with_dtypes() -> None:
    # as TileLang's vertical-slash sparse attention annotates `column_count: T.int32`
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            _scaled_copy(A, B, 64, 2.0)

    a = torch.randn(64)
    torch.testing.assert_close(tilelang.compile(main, out_idx=[-1], target="interp")(a), a * 2)


@tilelang.jit
def _scale_rows_dynamic(block_M: int = 32, block_N: int = 32):
    from tilelang_x import tvm

    # TileLang's dynamic-shape GEMM example declares its sizes with TVM's te.var
    M = tvm.te.var("m")
    N = tvm.tir.Var("n", "int32")

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            tile = T.alloc_fragment((block_M, block_N), T.float32)
            T.copy(A[by * block_M, bx * block_N], tile)
            for i, j in T.Parallel(block_M, block_N):
                tile[i, j] = tile[i, j] * 2.0
            T.copy(tile, B[by * block_M, bx * block_N])

    return main


def test_tvm_te_var_is_a_run_time_size() -> None:
    from tilelang_x import tvm

    kernel = tilelang.compile(_scale_rows_dynamic.get_ir(), target="interp")
    for m, n in ((40, 70), (64, 33)):
        a = torch.randn(m, n)
        b = torch.zeros(m, n)
        kernel(a, b)
        assert torch.equal(b, a * 2)
    assert tvm.DataType("float16") is T.float16
    with pytest.raises(NotSupportedError, match=r"tvm.relay is not supported"):
        _ = tvm.relay
