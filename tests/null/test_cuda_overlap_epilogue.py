"""A persistent GEMM's epilogue stored during the next tile's first k-steps (hopper/overlap_epilogue.py,
pass config ``tlx.overlap_epilogue``, by default on for k-loops of at most 64 steps)."""

from __future__ import annotations

import re

import pytest

from tests.kernels import gemm
from tests.null.cuda_helpers import cuda_source, sass_text
from tilelang_x.core_ir import dtypes

ON = {"tlx.overlap_epilogue": True}


def _gemm(**kw):
    args = dict(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256)
    return gemm.matmul.get_ir(4096, 4096, 4096, **{**args, **kw})


def _consumer(source: str) -> str:
    body = source[source.index('extern "C"'):]
    return body[body.index("TLX_SETMAXNREG_INC"):]


def test_on_by_default_for_a_short_k_loop_only() -> None:
    assert "tlx_epi_regs" in cuda_source(_gemm(), "sm_90a")[0]
    assert "tlx_epi_regs" not in cuda_source(_gemm(), "sm_90a", {"tlx.overlap_epilogue": False})[0]
    long_k = gemm.matmul.get_ir(4096, 4096, 8192, block_M=128, block_N=256, block_K=64, num_stages=4, threads=256)
    assert "tlx_epi_regs" not in cuda_source(long_k, "sm_90a")[0]
    assert "tlx_epi_regs" in cuda_source(long_k, "sm_90a", ON)[0]


def test_chunks_run_in_the_next_tiles_first_k_steps() -> None:
    code = _consumer(cuda_source(_gemm(), "sm_90a", ON)[0])
    lines = [ln.strip() for ln in code.splitlines()]
    assert "tlx_u32 tlx_epi_regs[64];" in lines and "int tlx_epi_tile[2];" in lines
    # the four iterations that store the chunks are peeled off (kept rolled, as the k-loop is by
    # default: tlx.rolled_k_loop); the rest is the plain loop
    head = lines.index("for (int ko_i = 0; ko_i < 4; ++ko_i) {")
    rest = lines.index("for (int ko_i = 4; ko_i < 64; ++ko_i) {")
    assert lines[head - 1] == "#pragma unroll 1"
    guards = [i for i, ln in enumerate(lines) if ln.startswith("if ((tlx_tile_j > 0) && (ko_i ==")]
    assert len(guards) == 4 and all(head < i < rest for i in guards)
    # after the iteration's wgmma is issued, at the previous tile's coordinates
    assert lines.index("TLX_WGMMA_WAIT(1);") < guards[0]
    stores = [ln for ln in lines if ln.startswith("tlx_tma_store_2d(")]
    assert len(stores) == 8 and all("tlx_epi_tile[0] * 256" in ln and "bx" not in ln for ln in stores)
    # the 64 converted pairs are kept once the tile's last wgmma is done
    keeps = [i for i, ln in enumerate(lines) if ln.startswith("tlx_epi_regs[")]
    assert len(keeps) == 64 and lines[keeps[0] - 1] == "tlx_fence_regs(&C_local[0], 128);"
    assert all("tlx_epi_regs[" in ln for ln in lines if ln.startswith("tlx_stsm_x4("))
    # the block's last tile is stored after the tile loop, before the final drain
    assert code.rstrip().endswith("tlx_tma_store_wait_read0();\n    }\n  }\n}")
    assert code.count("tlx_tma_store_2d(") == 8


def test_a_relu_epilogue_moves_too_and_a_float32_output_does_not() -> None:
    code = _consumer(cuda_source(_gemm(relu=True), "sm_90a", ON)[0])
    # the ReLU stays at the end of its tile, on the accumulators, before the pairs are kept
    assert code.index("fmaxf(C_local[") < code.index("tlx_epi_regs[0] = tlx_cvt_h2(C_local[0], C_local[1]);")
    code = _consumer(cuda_source(_gemm(out_dtype=dtypes.float32), "sm_90a", ON)[0])
    assert "tlx_epi_regs" not in code


def test_stream_k_and_non_persistent_kernels_keep_their_epilogue() -> None:
    stream_k = gemm.matmul.get_ir(1536, 4096, 4096, block_M=128, block_N=256, block_K=64, num_stages=4, threads=256)
    assert "tlx_epi_regs" not in cuda_source(stream_k, "sm_90a", {**ON, "tlx.stream_k": True})[0]
    assert "tlx_epi_regs" not in cuda_source(_gemm(), "sm_90a", {**ON, "tlx.persistent": False})[0]


def test_no_spills() -> None:
    sass = sass_text(_gemm(), "sm_90a", ON)
    if "HGMMA" not in sass:
        pytest.skip("no SASS")
    assert not re.search(r"\b(LDL|STL)\b", sass)
    assert sass.count("STSM") == 32  # the chunks in the peeled iterations and after the tile loop
    assert sass.count("HGMMA") == 8  # 4 in the peeled iterations' loop, 4 in the steady-state loop
