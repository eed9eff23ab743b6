"""Vector accesses to a global tensor make its base-address alignment part of the launch contract
(``ParamSpec.align``), so the launchers refuse a misaligned tensor instead of faulting."""

from __future__ import annotations

from tests.null.cuda_helpers import cuda_source
from tests.null.cuda_suite_funcs import suite_funcs

FUNCS = suite_funcs()


def _align(name: str, arch: str) -> dict[str, int]:
    _, ctx = cuda_source(FUNCS[name](), arch)
    return {p.name: p.align for p in ctx.data["cuda.meta"].params if p.kind == "buffer"}


def test_cp_async_and_vector_stores_ask_for_their_width() -> None:
    assert _align("gemm_fp16_256", "sm_80") == {"A": 16, "B": 16, "C": 4}  # cp.async 16 B, paired fp16 stores
    assert _align("gemm_bf16_fp32_accum", "sm_80")["C"] == 8  # paired fp32 stores


def test_scalar_accesses_and_tma_tiles_ask_for_nothing() -> None:
    assert set(_align("leaky_add_if_then_else", "sm_80").values()) == {1}
    # TMA tiles: the tensor map checks the address at launch (and falls back to the cp.async build)
    hopper = _align("flash_attention", "sm_90a")
    assert hopper["K"] == hopper["V"] == 1 and hopper["Q"] == 16
