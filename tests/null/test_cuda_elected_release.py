"""One stage release per consumer warpgroup when wgmma alone reads the stage (hopper/elected_release.py)."""

from __future__ import annotations

import re

from tests.kernels import attention, attention_bwd, gemm
from tests.null.cuda_helpers import cuda_source
from tilelang_x.core_ir import dtypes


def _calls(source: str, fn: str) -> list[str]:
    body = source[source.index('extern "C"'):]
    return [ln.strip() for ln in body.splitlines() if ln.strip().startswith(fn + "(")]


def _gemm(**kw):
    return gemm.matmul.get_ir(1024, 1024, 512, block_M=128, block_N=256, block_K=64, num_stages=4, threads=256, **kw)


def test_gemm_stage_is_released_by_one_thread_of_each_warpgroup() -> None:
    source, _ = cuda_source(_gemm(), "sm_90a")
    inits = [c for c in _calls(source, "tlx_mbar_init") if "tlx_empty_s" in c]
    assert len(inits) == 4 and all(c.endswith(", 2);") for c in inits)  # two consumer warpgroups
    (arrive,) = _calls(source, "tlx_mbar_arrive")
    assert arrive.endswith(", tx & 127);")
    # predicated in the asm, not branched on: the warp stays converged
    assert re.search(r"setp\.eq\.u32 P, %1, 0;\\n @P mbarrier\.arrive", source)


def test_switch_off_keeps_one_arrival_per_consumer_thread() -> None:
    source, _ = cuda_source(_gemm(), "sm_90a", {"tlx.elected_release": False})
    inits = [c for c in _calls(source, "tlx_mbar_init") if "tlx_empty_s" in c]
    assert all(c.endswith(", 256);") for c in inits)
    (arrive,) = _calls(source, "tlx_mbar_arrive")
    assert "tx & 127" not in arrive


def test_flash_attention_k_and_v_stages_are_elected() -> None:
    func = attention.flash_attention.get_ir(1, 2, 1024, 128, False, block_M=128, block_N=128, num_stages=2,
                                            threads=256)
    source, _ = cuda_source(func, "sm_90a")
    empties = [c for c in _calls(source, "tlx_mbar_init") if "tlx_empty" in c]
    assert empties and all(c.endswith(", 2);") for c in empties)
    assert all(c.endswith(", tx & 127);") for c in _calls(source, "tlx_mbar_arrive"))


def test_stage_read_by_ordinary_loads_keeps_every_thread_arrival() -> None:
    # the backward's lse and Delta tiles are read element by element: a thread's wait says nothing
    # of the other threads' loads
    func = attention_bwd.flash_bwd.get_ir(1, 2, 4096, 128, False, block_M=128, block_N=64, num_stages=2, threads=256)
    source, _ = cuda_source(func, "sm_90a")
    empties = [c for c in _calls(source, "tlx_mbar_init") if "tlx_empty" in c]
    assert empties and all(c.endswith(", 256);") for c in empties)
    assert all("tx & 127" not in c for c in _calls(source, "tlx_mbar_arrive"))


def test_swapped_operands_gathered_by_the_threads_keep_every_thread_arrival() -> None:
    # a TF32 gemm with B stored [K, N] runs as C^T = B^T A^T, each thread loading its B^T registers
    func = gemm.matmul.get_ir(1024, 1024, 512, in_dtype=dtypes.float32, out_dtype=dtypes.float32, block_M=128,
                              block_N=128, block_K=32, num_stages=3, threads=256)
    source, _ = cuda_source(func, "sm_90a")
    assert "tlx_wgmma" in source
    empties = [c for c in _calls(source, "tlx_mbar_init") if "tlx_empty" in c]
    assert empties and all(c.endswith(", 256);") for c in empties)
