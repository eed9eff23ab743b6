"""FlashAttention backward (tests/kernels/attention_bwd.py) on the CUDA paths, and what it needed
of the compiler: a ``make_swizzled_layout`` annotation yields to the wgmma panels on sm_90a."""

from __future__ import annotations

import logging

import pytest

import tilelang_x
import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source, sass_ops
from tests.null.cuda_suite_funcs import suite_funcs
from tilelang_x.plugins.cuda.hopper.layout import PanelLayout
from tilelang_x.plugins.cuda.layout import SharedLayout


@T.prim_func
def swizzled_operand_gemm(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16),
                          C: T.Tensor((64, 64), T.float32)):
    with T.Kernel(1, threads=128):
        A_s = T.alloc_shared((64, 64), T.float16)
        B_s = T.alloc_shared((64, 64), T.float16)
        acc = T.alloc_fragment((64, 64), T.float32)
        T.annotate_layout({A_s: tilelang_x.layout.make_swizzled_layout(A_s)})
        T.copy(A, A_s)
        T.copy(B, B_s)
        T.clear(acc)
        T.gemm(A_s, B_s, acc, transpose_B=True)
        T.copy(acc, C)


def _plans_and_layout(arch: str) -> tuple[set[str], object]:
    _, ctx = cuda_source(swizzled_operand_gemm, arch)
    layout = next(v for k, v in ctx.data["cuda.layouts"].items() if k.name == "A_s")
    return {p.kind for p in ctx.data["cuda.gemm"].values()}, layout


def test_a_swizzle_request_yields_to_the_wgmma_panel() -> None:
    kinds, layout = _plans_and_layout("sm_90a")
    assert kinds == {"wgmma"} and isinstance(layout, PanelLayout)
    kinds, layout = _plans_and_layout("sm_80")  # the annotation's own swizzle, as before
    assert kinds == {"mma"} and type(layout) is SharedLayout and layout.swizzle == "sw128"


@pytest.mark.parametrize(("name", "gemms"), [("flash_bwd", 5 * 4), ("flash_bwd_d128_causal", 8 + 8 + 4 + 4 + 4)])
def test_every_backward_gemm_runs_on_tensor_cores(name: str, gemms: int) -> None:
    """sm_90a: the five gemms (K·Qᵀ, V·dOᵀ, Pᵀ·dO and dSᵀ·Q from registers, dS·K with dSᵀ
    transposed from shared memory) are wgmma, one HGMMA per k-step of 16; sm_80: mma.sync. dQ is
    added by TMA reductions (``UTMAREDG``, lower/tma_reduce.py) on sm_90a, by float32 reductions
    (``RED``) on sm_80."""
    func = suite_funcs()[name]
    hopper = sass_ops(func(), r"\b(HGMMA|HMMA|REDG?|UTMAREDG)\b")
    assert hopper.get("HGMMA") == gemms and "HMMA" not in hopper and hopper.get("UTMAREDG") and "REDG" not in hopper
    ampere = sass_ops(func(), r"\b(HGMMA|HMMA|REDG?)\.", arch="sm_80")
    assert ampere.get("HMMA") and "HGMMA" not in ampere and ampere.get("RED")


def test_one_dimensional_rows_of_lse_and_delta_are_loaded_by_tma() -> None:
    """The 1-d ``lse`` and ``Delta`` tiles are one-row TMA boxes, unswizzled, so the whole loop
    takes TMA; with D = 128 one block fills the SM and the loop is warp-specialized."""
    for name, specialized in (("flash_bwd", False), ("flash_bwd_d128_causal", True)):
        src, ctx = cuda_source(suite_funcs()[name](), "sm_90a")
        body = src[src.index("__global__"):]
        assert "tlx_tma_load_3d(lse_shared_s" in body and "tlx_tma_load_3d(delta_s" in body
        assert "tlx_cp_async" not in body
        assert ("tlx_empty_s" in body) == specialized
        staged = [v for k, v in ctx.data["cuda.layouts"].items() if k.name in ("lse_shared", "delta")]
        assert staged and all(lay.swizzle == "none" and lay.shape == (2, 64) for lay in staged)


def _rows_copy(annotate: bool):
    @T.prim_func
    def rows_copy(A: T.Tensor((2, 64, 64), T.float32), B: T.Tensor((2, 64, 64), T.float16)):
        with T.Kernel(2, threads=128) as bx:
            if annotate:
                T.annotate_layout({A: T.Layout(A.shape, lambda b, s, d: [b, s // 8, d // 8, d % 2,
                                                                         4 * (s % 8) + (d % 8) // 2])})
            T.copy(A[bx, :, :], B[bx, :, :])

    return rows_copy


def test_a_layout_of_a_global_tensor_is_accepted_and_not_used(caplog: pytest.LogCaptureFixture) -> None:
    """TileLang's FlashAttention backward annotates its float32 dQ (``make_dq_layout``): the tensor
    stays row-major, as in the interpreter, and the code is that of the kernel without it."""
    with caplog.at_level(logging.DEBUG, logger="tilelang_x.cuda.layout"):
        annotated, _ = cuda_source(_rows_copy(True), "sm_90a")
    assert annotated == cuda_source(_rows_copy(False), "sm_90a")[0]
    assert "global tensors stay row-major" in caplog.text


@pytest.mark.parametrize("arch, tile_atomic, want", [
    ("sm_90a", True, "REDG.E.ADD.F32x2."),  # TMA reductions off: one vector reduction per column pair
    ("sm_90a", False, "REDG.E.ADD.F32x2."),  # a nest of element atomics: the same additions
    ("sm_80", True, "RED.E.ADD.F32."),  # no vector reductions before sm_90
])
def test_dq_tile_atomic_adds_column_pairs_on_sm90(arch: str, tile_atomic: bool, want: str) -> None:
    from tests.kernels import attention_bwd

    func = attention_bwd.flash_bwd.get_ir(1, 2, 256, 128, False, block_M=128, block_N=64, threads=256,
                                          tile_atomic=tile_atomic)
    # on sm_90a both forms go by TMA reductions (test_cuda_tma_reduce.py): compared with them off
    configs = {"tlx.tma_reduce": False}
    ops = sass_ops(func, r"\b(REDG?\.E\.ADD\.F32(?:x2)?\.)", arch, configs)
    assert set(ops) == {want}, ops
