"""Every suite kernel goes through the CUDA stages and codegen and compiles for sm_80 and sm_90a
(NVRTC or nvcc, whichever is installed); a few generated sources are compared with golden files
(regenerate with TILELANG_X_ACCEPT=1)."""

from __future__ import annotations

import os

import pytest

import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source
from tests.null.cuda_suite_funcs import suite_funcs
from tilelang_x import knobs

FUNCS = suite_funcs()
GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "cuda")


def _toolchain_or_skip() -> None:
    from tilelang_x.plugins.cuda.compile import find_nvcc, find_nvrtc

    if find_nvrtc() is None and find_nvcc() is None:
        pytest.skip("no CUDA compiler here (install nvidia-cuda-nvrtc or nvcc)")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_suite_kernel_generates_and_compiles(name: str, arch: str) -> None:
    _toolchain_or_skip()
    from tilelang_x.plugins.cuda.compile import compile_cuda

    source, ctx = cuda_source(FUNCS[name](), arch)
    meta = ctx.data["cuda.meta"]
    assert f"{meta.kernel_name}(" in source
    binary = compile_cuda(source, arch, kernel_name=meta.kernel_name)
    assert len(binary.cubin) > 0


def test_gemm_uses_tensor_core_path() -> None:
    source, ctx = cuda_source(FUNCS["gemm_128x128x32_3stage"]())
    assert "tlx_mma_f16(" in source and "tlx_ldsm_x4(" in source and "tlx_cp_async16(" in source
    assert "TLX_CP_ASYNC_WAIT(1);" in source
    meta = ctx.data["cuda.meta"]
    assert meta.grid(()) == (8, 8, 1) and meta.block == (128, 1, 1)
    assert meta.smem_bytes == 3 * (128 * 32 + 32 * 128) * 2
    assert [p.readonly for p in meta.params] == [True, True, False]


def test_bf16_and_transpose_paths() -> None:
    assert "tlx_mma_bf16(" in cuda_source(FUNCS["gemm_bf16_fp32_accum"]())[0]
    src = cuda_source(FUNCS["gemm_transpose_B"]())[0]
    assert "tlx_ldsm_x4(&b_frag" in src  # B stored [N][K]: no .trans


def test_dynamic_dim_is_a_parameter() -> None:
    _, ctx = cuda_source(FUNCS["vector_add_dynamic"]())
    meta = ctx.data["cuda.meta"]
    assert meta.dims == ("n",)
    assert [p.kind for p in meta.params] == ["buffer", "buffer", "buffer", "dim"]
    assert meta.grid([1000]) == (4, 1, 1) and meta.grid({"n": 77}) == (1, 1, 1)


def test_flash_attention_feeds_registers_to_second_gemm() -> None:
    src = cuda_source(FUNCS["flash_attention_causal"]())[0]
    assert "tlx_afrag_h(" in src and "tlx_shfl_xor(" in src


@pytest.mark.parametrize("name", ["gemm_fp16_tails", "softmax_rows", "column_sum_atomic_add"])
def test_golden_source(name: str) -> None:
    source, _ = cuda_source(FUNCS[name]())
    body = source[source.index('extern "C"'):]
    path = os.path.join(GOLDEN, f"{name}.cu")
    if knobs.testing.accept or not os.path.exists(path):
        os.makedirs(GOLDEN, exist_ok=True)
        with open(path, "w") as fh:
            fh.write(body)
        if not knobs.testing.accept:
            pytest.skip(f"wrote missing golden file {path}")
    with open(path) as fh:
        assert body == fh.read(), f"generated CUDA for {name} changed; rerun with TILELANG_X_ACCEPT=1 and review"


@T.prim_func
def _select_trip_count(X: T.Tensor((64,), T.float32), Y: T.Tensor((64,), T.float32)):
    with T.Kernel(2, threads=32) as bx:
        for i in T.serial(T.if_then_else(bx > 0, 3, 5)):
            Y[bx * 8 + i] = X[bx * 8 + i] * 2.0


def test_loop_bound_keeps_the_parentheses_of_a_conditional() -> None:
    """``i < (c ? a : b)``: without them C reads ``(i < c) ? a : b``, a loop that never ends (a
    stream-K walk's tile count hung the H200 this way, 2026-11-30)."""
    src, _ = cuda_source(_select_trip_count, "sm_80")
    bound = next(ln for ln in src.splitlines() if "for (int i" in ln)
    assert "; i < ((0 < bx) ? 3 : 5); ++i)" in bound, bound
