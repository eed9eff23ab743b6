"""TileLang's DeepSeek-V3 fp8 GEMM and grouped GEMM / fused MoE examples (tests/kernels/fp8_blockscale,
tests/kernels/moe) through the CUDA stages with the pass configs their ``@tilelang.jit`` gives (the
suite's compile test leaves those out), and the instructions they get on sm_90a."""

from __future__ import annotations

import pytest

from tests.kernels import fp8_blockscale, moe
from tests.null.cuda_helpers import cuda_source
from tilelang_x.core_ir.kernel_parts import kernel_parts


def _compiled_sources(jit_func, arch: str, *args, **kwargs) -> list[str]:
    """The generated kernel code of every ``T.Kernel`` of ``jit_func(*args, **kwargs)``, compiled."""
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    configs = jit_func.options.get("pass_configs") or {}
    sources = []
    for part in kernel_parts(jit_func.get_ir(*args, **kwargs)):
        source, ctx = cuda_source(part, arch, configs)
        if find_nvrtc() is not None or find_nvcc() is not None:
            compile_cuda(source, arch, kernel_name=ctx.data["cuda.meta"].kernel_name)
        sources.append(source[source.index('extern "C"'):])
    return sources


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_fused_moe_kernels_compile_with_their_pass_configs(arch: str) -> None:
    routed = _compiled_sources(moe.moe_routed, arch, 512, 256, 8, "float16", 1024, 8, coalesced_width=2)
    shared = _compiled_sources(moe.moe_shared, arch, 512, 256, 1, "float16", 300)
    grouped = _compiled_sources(moe.grouped_gemm, arch, [63, 0, 130, 40], 256, 256, 64, 128, 64, 2, 256)
    grouped += _compiled_sources(moe.grouped_gemm_bwd, arch, 384, 4, 256, 256, 64, 128, 64, 2, 256)
    assert len(routed) == len(shared) == len(grouped) == 2
    for source in routed + shared + grouped:
        assert "tlx_tma_load" not in source and "tlx_tma_store" not in source  # tl.disable_tma_lower
    if arch == "sm_90a":
        # the tokens' tile is a fragment: wgmma takes it from registers, the expert's weights from shared
        assert all("tlx_wgmma_rs_f16" in source for source in routed + shared)


def test_deepgemm_fp8_uses_float8_wgmma_on_sm90a() -> None:
    (source,) = _compiled_sources(fp8_blockscale.deepgemm_fp8, "sm_90a", 256, 256, 512, 128)
    assert "tlx_wgmma_ss_e4m3" in source
    (source,) = _compiled_sources(fp8_blockscale.gemm_fp8_2xacc, "sm_90a", 256, 256, 512, 128, 128, 64)
    assert "tlx_wgmma_ss_e4m3" in source
