"""``tlx.gemm_softmax_overlap`` (plugins/cuda/hopper/overlap.py), checked without a GPU: the
FlashAttention loop issues the next block's score wgmma into a second register set before the
softmax, the generated SASS leaves those registers alone until the ``wait_group 0`` (no
WARPGROUP.DEPBAR between that wgmma and the softmax's MUFU.EX2), and loops of other shapes keep
the plain pipeline."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.null.cuda_helpers import cuda_source as _source
from tests.null.cuda_helpers import sass_text
from tests.null.cuda_suite_funcs import suite_funcs
from tests.null.test_cuda_hopper import HOPPER_KERNELS

FUNCS = suite_funcs()
ON = {"tlx.gemm_softmax_overlap": True}
PLAIN = {"tlx.ws_compute_loops": False}


def _fa(causal: bool, dim: int) -> Any:

    from tests.kernels import attention as a
    return a.flash_attention.get_ir(1, 2, 1024, dim, causal, block_M=128, block_N=128, num_stages=2, threads=256)


def _sass_text(func: Any, configs: dict[str, bool]) -> str:
    return sass_text(func, "sm_90a", configs)


def _instructions(sass: str) -> list[str]:
    out = []
    for line in sass.splitlines():
        if re.search(r"/\*[0-9a-f]{4}\*/", line):
            out.append(line.split("*/", 1)[1].split(";")[0].strip())
    return out


def inflight_violations(sass: str) -> list[str]:
    """Instructions (other than wgmma) that touch the accumulator registers of a wgmma group
    between its first HGMMA and the next WARPGROUP.DEPBAR."""
    bad: list[str] = []
    live: list[tuple[int, int]] = []
    for ins in _instructions(sass):
        m = re.match(r"(@!?U?P\w+\s+)?HGMMA\.64x(\d+)x\d+\.F32\S*\s+R(\d+),", ins)
        if m:
            lo = int(m.group(3))
            rng = (lo, lo + int(m.group(2)) // 2 - 1)
            if rng not in live:
                live.append(rng)
            continue
        if "WARPGROUP.DEPBAR" in ins:
            live = []
            continue
        regs = [int(r) for r in re.findall(r"\bR(\d+)\b", ins)]
        if any(lo <= r <= hi for lo, hi in live for r in regs):
            bad.append(ins)
    return bad


def test_checker_catches_a_read_of_inflight_registers() -> None:
    sass = ("        /*0010*/  HGMMA.64x128x16.F32 R24, gdesc[UR8], R24, gsb0 ;\n"
            "        /*0020*/  FADD R30, R30, R1 ;\n"
            "        /*0030*/  WARPGROUP.DEPBAR.LE gsb0, 0x0 ;\n"
            "        /*0040*/  FADD R31, R31, R1 ;\n")
    assert inflight_violations(sass) == ["FADD R30, R30, R1"]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dim", [64, 128])
def test_score_wgmma_overlaps_softmax(causal: bool, dim: int) -> None:
    func = _fa(causal, dim)
    source, _ = _source(func, "sm_90a", {**ON, **PLAIN})
    assert "acc_s_nx" in source and "tlx_kfull_" in source and "tlx_vfull_" in source
    plain, _ = _source(func, "sm_90a", PLAIN)
    assert "acc_s_nx" not in plain and "tlx_kfull_" not in plain  # off by default
    text = _sass_text(func, {**ON, **PLAIN})
    assert inflight_violations(text) == []
    ins = _instructions(text)
    # in the loop: a score HGMMA group is committed and the softmax's exp2 runs before any wait
    commits = [i for i, s in enumerate(ins) if "HGMMA" in s and "gsb0" in s and "tnspB" not in s]
    assert len(commits) == 2, commits  # before the loop (waited at once) and in the loop
    after = ins[commits[1] + 1:]
    first_wait = next(i for i, s in enumerate(after) if "WARPGROUP.DEPBAR" in s)
    first_exp = next(i for i, s in enumerate(after) if "MUFU.EX2" in s)
    assert first_exp < first_wait
    assert any("tnspB" in s for s in after[:first_wait])  # the PV wgmma is issued before the wait


def test_other_loops_keep_the_plain_pipeline() -> None:
    from tests.kernels import gemm
    func = gemm.matmul.get_ir(512, 512, 512, block_M=128, block_N=128, block_K=64, num_stages=3, threads=256)
    configs = {**ON, "tl.disable_warp_specialized": True}
    assert _source(func, "sm_90a", configs)[0] == _source(func, "sm_90a", {"tl.disable_warp_specialized": True})[0]


@pytest.mark.parametrize("name", HOPPER_KERNELS)
def test_suite_kernels_compile_with_overlap(name: str) -> None:
    text = _sass_text(FUNCS[name](), ON)
    assert "HGMMA" in text and inflight_violations(text) == []
