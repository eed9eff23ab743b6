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


@pytest.mark.parametrize("name", ["tvm_thread_allreduce", "comm_reducer", "attr"])
def test_tvm_cross_thread_reduction_names_point_to_the_warp_and_tile_reductions(name: str) -> None:
    with pytest.raises(NotSupportedError, match=f"T.{name} is not supported") as info:
        getattr(T, name)
    assert "T.warp_reduce_sum" in info.value.hint and "T.reduce_sum" in info.value.hint


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
