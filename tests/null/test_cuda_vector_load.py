"""Global → fragment copies as vector loads (plugins/cuda/lower/vector_load.py)."""

from __future__ import annotations

import re

import pytest
import torch

import tilelang_x.language as T
from tests.kernels import attention_bwd, elementwise
from tests.null.cuda_helpers import cuda_source, sass_text
from tilelang_x import knobs


def _loads(src: str) -> list[str]:
    return re.findall(r"tlx_ldv\([^;]*\);", src.split("__global__")[1])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_threads_adjacent_columns_are_one_load(arch: str) -> None:
    # FlashAttention backward's preprocess: 8 fp16 columns per thread of each 32 x 32 tile
    src, _ = cuda_source(attention_bwd.flash_bwd_preprocess.get_ir(2, 4, 256, 64), arch)
    loads = _loads(src)
    assert len(loads) == 2 and all(ld.count("&o[") + ld.count("&do_1[") == 8 for ld in loads)
    off, _ = cuda_source(attention_bwd.flash_bwd_preprocess.get_ir(2, 4, 256, 64), arch, {"tlx.vector_loads": False})
    assert not _loads(off)


def test_the_sass_loads_16_bytes() -> None:
    sass = sass_text(attention_bwd.flash_bwd_preprocess.get_ir(2, 4, 256, 64), "sm_90a")
    assert "LDG.E.128" in sass and "LDG.E.U16" not in sass


@pytest.mark.parametrize(("dtype", "frag", "width"), [(T.float16, T.float32, 8), (T.float16, T.float16, 8),
                                                      (T.bfloat16, T.float32, 8), (T.float32, T.float32, 4)])
def test_16_bytes_whatever_the_types(dtype, frag, width: int) -> None:
    src, _ = cuda_source(elementwise.scaled_tiles.get_ir(100, 200, dtype=dtype, frag_dtype=frag), "sm_80")
    loads = _loads(src)
    assert loads and all(ld.count("&x[") == width for ld in loads)
    assert all("< 100" in ld for ld in loads)  # rows past M read zeros


def test_columns_not_known_to_be_aligned_load_elements() -> None:
    src, _ = cuda_source(elementwise.scaled_tiles.get_ir(64, 128, col0=1), "sm_80")
    assert not _loads(src)
    # a row length that is not a multiple of the vector: narrower vectors
    src, _ = cuda_source(elementwise.scaled_tiles.get_ir(64, 124), "sm_80")
    assert _loads(src) and all(ld.count("&x[") == 4 for ld in _loads(src))


@pytest.mark.parametrize("col0", [0, 1])
def test_the_interpreter_agrees(col0: int) -> None:
    x = torch.randn(70, 130 + col0, dtype=torch.float16)
    with knobs.scope(target_default="interp"):
        y = elementwise.scaled_tiles(70, 130, col0=col0)(x)
    torch.testing.assert_close(y, 2 * x[:, col0:].float())


def _copies(src: str) -> list[str]:
    return re.findall(r"tlx_cpv<(\d+)>\(", src.split("__global__")[1])


@pytest.mark.parametrize(("src_dtype", "dst_dtype", "width"), [
    (T.float32, T.float16, "4"), (T.float32, T.bfloat16, "4"), (T.float16, T.float32, "4"),
    (T.float16, T.float16, "8")])
def test_a_cast_between_tensors_moves_vectors(src_dtype, dst_dtype, width: str) -> None:
    src, _ = cuda_source(elementwise.cast_tiles.get_ir(100, 200, src_dtype=src_dtype, dst_dtype=dst_dtype), "sm_80")
    assert set(_copies(src)) == {width}
    assert "< 100" in src  # the last row tile is checked


def test_the_attention_backward_postprocess() -> None:
    sass = sass_text(attention_bwd.flash_bwd_postprocess.get_ir(2, 4, 256, 128), "sm_90a")
    assert "LDG.E.128" in sass and "STG.E.64" in sass and "STG.E.U16" not in sass


def test_a_cast_with_an_odd_row_length_stays_element_wise() -> None:
    src, _ = cuda_source(elementwise.cast_tiles.get_ir(64, 131), "sm_80")
    assert not _copies(src)


def _aligns(func) -> dict[str, int]:
    _, ctx = cuda_source(func, "sm_90a")
    return {p.name: p.align for p in ctx.data["cuda.meta"].params}


def test_the_launch_checks_the_alignment_the_vectors_need() -> None:
    # the runtime refuses a tensor whose address is not a multiple of these (test_alignment_cuda.py)
    assert _aligns(attention_bwd.flash_bwd_preprocess.get_ir(2, 4, 256, 128)) == {"Out": 16, "dO": 16, "Delta": 1}
    assert _aligns(attention_bwd.flash_bwd_postprocess.get_ir(2, 4, 256, 128)) == {"dQ": 16, "dQ_out": 8}
    assert _aligns(elementwise.scaled_tiles.get_ir(64, 124))["X"] == 8  # 4 fp16 columns a load


@T.prim_func
def _rows_from_offsets(X: T.Tensor((256, 64), T.float16), off: T.Tensor((4,), T.int32),
                       Y: T.Tensor((4, 32, 64), T.float32)):
    with T.Kernel(4, threads=128) as bx:
        x = T.alloc_fragment((32, 64), T.float32)
        T.copy(X[off[bx] - 16:off[bx] + 16, 0:64], x)  # a start read from memory may be negative
        T.copy(x, Y[bx, 0:32, 0:64])


def test_a_start_read_from_memory_is_checked_at_both_ends() -> None:
    # as the element-wise copy and the other vector paths check it (analysis.range_checks)
    loads = _loads(cuda_source(_rows_from_offsets, "sm_80")[0])
    assert loads and all("(0 <= " in ld and "< 256" in ld for ld in loads)
