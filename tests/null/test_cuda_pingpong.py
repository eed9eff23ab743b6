"""Ping-pong of two consumer warpgroups in warp-specialized compute loops (hopper/pingpong.py)."""

from __future__ import annotations

import re

from tests.null.cuda_helpers import consumer_loop, cuda_source, sass_text
from tests.null.cuda_helpers import flash_attention_ir as _fa

WS = {"tlx.ws_compute_loops": True, "tlx.pingpong": True, "tlx.softmax_rotation": False}


def test_each_wgmma_issue_takes_a_turn_and_hands_it_over() -> None:
    src, _ = cuda_source(_fa(), "sm_90a", WS)
    loop = consumer_loop(src)
    assert loop.count("tlx_pp_wait(tx >> 7);") == 2 and loop.count("tlx_pp_pass(tx >> 7);") == 2
    for issue in re.findall(r"tlx_pp_wait\(tx >> 7\);(.*?)tlx_pp_pass", loop, re.S):
        assert issue.lstrip().startswith("tlx_wgmma_arrive();") and issue.rstrip().endswith("tlx_wgmma_commit();")
    # no block barrier keeps the warpgroups in lockstep; the hand-overs balance around the loop
    assert "tlx_named_bar_sync" not in loop
    before, after = src.split("for (int k_i", 1)
    assert before.rstrip().endswith("if ((tx >> 7) == 1) {\n      tlx_pp_pass(tx >> 7);\n    }")
    assert "if ((tx >> 7) == 0) {\n      tlx_pp_wait(tx >> 7);" in after


def test_pingpong_needs_two_consumer_warpgroups_and_can_be_turned_off() -> None:
    assert "tlx_pp_wait(tx" not in cuda_source(_fa(), "sm_90a", {**WS, "tlx.pingpong": False})[0]
    assert "tlx_pp_wait(tx" not in cuda_source(_fa(threads=128, block_m=64), "sm_90a", WS)[0]
    assert "tlx_pp_wait(tx" not in cuda_source(_fa(), "sm_90a", {"tlx.ws_compute_loops": False})[0]


def test_compute_loops_are_warp_specialized_when_the_block_owns_the_sm() -> None:
    # D128: 192 KB of shared memory, one block per SM -> a producer warpgroup, ping-pong consumers
    src = cuda_source(_fa(), "sm_90a")[0]
    assert "__launch_bounds__(384, 1)" in src and "tlx_pp_wait(tx" in src
    # D64: 96 KB, two blocks fit on an SM and overlap each other: the plain TMA pipeline
    src = cuda_source(_fa(dim=64), "sm_90a")[0]
    assert "__launch_bounds__(256" in src and "tlx_pp_wait(tx" not in src and "tlx_mbar_wait" in src


def test_pingpong_compiles_to_named_barriers() -> None:
    sass = sass_text(_fa(), "sm_90a", WS)
    assert "BAR.ARV" in sass and "HGMMA" in sass


def test_k_and_v_tiles_have_their_own_barriers() -> None:
    """K is released right after QK^T and V waited for right before P.V, so the producer refills
    K while the consumers still work on the iteration."""
    src = cuda_source(_fa(), "sm_90a", {"tlx.barrier_groups": True, "tlx.softmax_rotation": False})[0]
    loop = src[src.index("for (int k_i"):]
    k_release = loop.index("tlx_mbar_arrive(tlx_empty_s")
    v_wait = loop.index("tlx_mbar_wait(tlx_full1_s")
    gemms = [i for i in range(len(loop)) if loop.startswith("tlx_wgmma_commit()", i)]
    assert gemms[0] < k_release < v_wait < gemms[1] < loop.index("tlx_mbar_arrive(tlx_empty1_s")
    producer = src[src.index("for (int k_p"):src.index("for (int k_i")]
    assert producer.index("tlx_empty_s") < producer.index("K_tmap") < producer.index("tlx_empty1_s") \
        < producer.index("V_tmap")
    assert "tlx_full1" not in cuda_source(_fa(), "sm_90a", {"tlx.softmax_rotation": False})[0]  # off by default
