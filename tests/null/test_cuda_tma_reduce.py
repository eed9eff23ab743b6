"""A float32 wgmma accumulator added into a global tensor by TMA on sm_90a
(plugins/cuda/lower/tma_reduce.py): FlashAttention backward's dQ."""

from __future__ import annotations

import pytest

from tests.kernels import attention_bwd
from tests.null.cuda_helpers import cuda_source


def _bwd(dim: int = 128, **kw: object) -> object:
    return attention_bwd.flash_bwd.get_ir(2, 3, 512, dim, False, block_M=128, block_N=64, num_stages=2,
                                          threads=256, **kw)


def _body(src: str) -> str:
    return src.split("__global__")[1]


def test_dq_is_added_by_tma_from_per_warp_slots() -> None:
    src, ctx = cuda_source(_bwd(), "sm_90a")
    body = _body(src)
    assert "tlx_red_add2(&dQ" not in body
    assert body.count("tlx_tma_reduce_add_4d(") == 2  # two 32-column chunks per warp
    assert "tlx_st2(&red_stage" in body
    # the previous call's reductions have read the slots before they are written again, and the
    # kernel ends once every reduction has read its slot
    assert body.index("tlx_tma_store_wait_read0") < body.index("tlx_st2(&red_stage")
    assert body.rstrip().endswith("tlx_tma_store_wait_read0();\n  }\n}")
    dq = [m for m in ctx.data["cuda.meta"].tensor_maps if m[0] == 6]  # dQ is argument 6
    assert dq == [(6, "float32", (32, 16, 1, 1), 3)], "a 16 x 32 float32 box: 128-byte rows, 128B swizzle"


def test_the_switch_and_sm80_keep_the_vector_reductions() -> None:
    off, _ = cuda_source(_bwd(), "sm_90a", {"tlx.tma_reduce": False})
    assert "tlx_tma_reduce_add" not in _body(off) and "tlx_red_add2(&dQ" in _body(off)
    element, _ = cuda_source(_bwd(tile_atomic=False), "sm_90a")  # TileLang's older nest of element atomics
    assert _body(element).count("tlx_tma_reduce_add_4d(") == 2
    sm80, _ = cuda_source(_bwd(), "sm_80")
    assert "tlx_tma_reduce_add" not in _body(sm80)


@pytest.mark.parametrize("dim", [64, 128])
def test_the_reductions_compile(dim: int) -> None:
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    if find_nvrtc() is None and find_nvcc() is None:
        pytest.skip("needs a CUDA compiler (nvcc or NVRTC)")
    src, ctx = cuda_source(attention_bwd.flash_bwd.get_ir(2, 3, 512, dim, False, block_M=64, block_N=64), "sm_90a")
    assert "tlx_tma_reduce_add_4d(" in _body(src)
    assert compile_cuda(src, "sm_90a", kernel_name=ctx.data["cuda.meta"].kernel_name).cubin
