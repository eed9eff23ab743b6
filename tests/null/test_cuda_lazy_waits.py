"""wgmma waits placed where their groups are needed in warp-specialized compute loops (sm_90a,
plugins/cuda/hopper/lazy_waits.py): FlashAttention backward D128."""

from __future__ import annotations

import re

from tests.kernels import attention_bwd
from tests.null.cuda_helpers import cuda_source


def _loop(configs: dict[str, bool] | None = None, causal: bool = False) -> str:
    func = attention_bwd.flash_bwd.get_ir(2, 3, 512, 128, causal, block_M=128, block_N=64, num_stages=2, threads=256)
    src, _ = cuda_source(func, "sm_90a", configs)
    body = src.split("__global__")[1]
    start = body.index("for (int k_i")
    return body[start:body.index("\n    }\n", start)]


def _events(loop: str) -> list[str]:
    pattern = (r"tlx_wgmma_commit\(\)|tlx_wgmma_wait0\(\)|TLX_WGMMA_WAIT\(\d\)|tlx_mbar_arrive\(tlx_empty"
               r"|tlx_named_bar_sync")
    return [m.group(0) for m in re.finditer(pattern, loop)]


def test_groups_stay_in_flight_until_needed() -> None:
    lazy = _events(_loop({"tlx.early_wgmma_issue": False}))
    eager = _events(_loop({"tlx.lazy_wgmma_waits": False, "tlx.early_wgmma_issue": False}))
    # eager: every one of the five gemms waits for itself at once
    assert eager.count("tlx_wgmma_commit()") == 5 and eager.count("tlx_wgmma_wait0()") == 5
    # lazy: dP's gemm runs during the cast of P, dV's during dS^T's computation (wait_group 1),
    # dK's across the barrier and the store of dS^T; the loop still ends with every group done
    assert lazy.count("tlx_wgmma_commit()") == 5 and "TLX_WGMMA_WAIT(1)" in lazy
    assert lazy.count("tlx_wgmma_wait0()") < 5 and lazy[-2:] == ["tlx_wgmma_wait0()", "tlx_mbar_arrive(tlx_empty"]
    second, third = [i for i, e in enumerate(lazy) if e == "tlx_wgmma_commit()"][1:3]
    assert not any(e.startswith(("tlx_wgmma_wait0", "TLX_WGMMA_WAIT")) for e in lazy[second + 1:third])


def test_the_stage_is_released_after_the_groups_reading_it() -> None:
    lazy = _events(_loop())
    release = lazy.index("tlx_mbar_arrive(tlx_empty")
    assert lazy[release - 1] == "tlx_wgmma_wait0()"


def _first_events(loop: str) -> list[str]:
    return _events(loop[:loop.index("tlx_exp2f")])


def test_a_gemm_is_issued_before_the_work_it_does_not_depend_on() -> None:
    # dP = V dO^T reads nothing the exponentials of S = K Q^T write: both are issued before them,
    # which wait for S's group alone; without tlx.early_wgmma_issue dP waits for the exponentials
    for causal in (False, True):
        early = _loop(causal=causal)
        assert _first_events(early) == ["tlx_wgmma_commit()", "tlx_wgmma_commit()", "TLX_WGMMA_WAIT(1)"]
        # the causal mask (a branch of plain stores) keeps dP's group in flight too
        assert "tlx_wgmma_wait0()" not in _events(early[early.index("tlx_exp2f"):early.index("tlx_afrag_h")])
    late = _loop({"tlx.early_wgmma_issue": False})
    assert _first_events(late) == ["tlx_wgmma_commit()", "tlx_wgmma_wait0()"]
