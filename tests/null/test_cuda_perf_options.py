"""The sm_80 path's performance transformations (plugins/cuda/perf_options.py): what each one emits,
and that its pass config switches it off (no GPU: source checks and a compile)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.null.cuda_suite_funcs import suite_funcs
from tilelang_x.core_ir.stages import StageContext, run_stages
from tilelang_x.target import Target

FUNCS = suite_funcs()
OFF = {"tlx.prefetch_fragments": False, "tlx.hoist_fragments": False, "tlx.fold_clear": False}


def _source(name: str, configs: dict[str, Any], arch: str = "sm_80") -> str:
    from tilelang_x.compiler import _core_stages
    from tilelang_x.plugins.cuda.codegen import generate
    from tilelang_x.plugins.cuda.passes import stages

    ctx = StageContext(Target("cuda", arch), {"pass_configs": configs})
    lowered = run_stages(FUNCS[name](), _core_stages() + stages(ctx.target), ctx)
    ctx.data["lowered"] = lowered
    return generate(lowered, ctx)


def _loop(src: str) -> str:
    """The text of the pipelined main loop (from its `for` to the wait_group(0) after it)."""
    start = src.index("for (int ko_i = 0;")
    return src[start:src.index("TLX_CP_ASYNC_WAIT(0);", start)]


def test_prefetch_fragments_double_buffers_across_k_tiles() -> None:
    src = _source("gemm_128x128x32_3stage", {})
    loop = _loop(src)
    # one wait + barrier per k-tile, now before the last k-step, which loads the next tile's step 0
    assert loop.count("__syncthreads();") == 1 and loop.count("TLX_CP_ASYNC_WAIT(1);") == 1
    assert loop.index("TLX_CP_ASYNC_WAIT(1);") > loop.index("tlx_cp_async_commit();")
    assert "(unsigned)((ko_i + 1)) % (unsigned)(3)" in loop.split("__syncthreads();")[1]
    head = src[:src.index("for (int ko_i = 0;")]
    assert head.rstrip().endswith("}") and "TLX_CP_ASYNC_WAIT(1);\n  __syncthreads();" in head
    assert re.search(r"tlx_u32 a_frag_\d+\[32\];", src)  # two sets of 4 x4-atoms


def test_prefetch_fragments_off_gives_the_plain_loop() -> None:
    loop = _loop(_source("gemm_128x128x32_3stage", {"tlx.prefetch_fragments": False}))
    assert loop.split("\n")[1].strip() == "TLX_CP_ASYNC_WAIT(1);"
    assert "ko_i + 1" not in loop


def test_hoist_and_fold_clear_in_flash_attention() -> None:
    src = _source("flash_attention", {})
    assert "a_hoist" in src and "tlx_mma_f16_z(&" in src
    body = src[src.index("for (int k = 0;"):]
    assert "tlx_ldsm_x4(&a_hoist" not in body  # Q fragments come from registers in the loop
    off = _source("flash_attention", OFF)
    assert "a_hoist" not in off and "tlx_mma_f16_z(&" not in off


@pytest.mark.parametrize("name", ["gemm_fp16_tails", "gemm_transpose_B", "gemm_bf16_fp32_accum", "flash_attention"])
def test_each_switch_compiles(name: str) -> None:
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    if find_nvrtc() is None and find_nvcc() is None:
        pytest.skip("no CUDA compiler here")
    for configs in ({}, OFF):
        src = _source(name, configs)
        assert len(compile_cuda(src, "sm_80", kernel_name="main_kernel").cubin) > 0
