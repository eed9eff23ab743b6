"""The FlashAttention-3 rotation of warp-specialized compute loops (plugins/cuda/hopper/rotate.py),
checked without a GPU: the consumer loop issues QKᵀ of block k and P·V of block k-1 in one
ping-pong turn, waits for the first group only before the softmax, and for the second after it;
the SASS keeps the softmax between the two waits and touches no register of a group in flight;
loops of other shapes keep their form."""

from __future__ import annotations

import re
from typing import Any

import pytest

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import attention, gemm
from tests.null.cuda_helpers import consumer_loop as _consumer_loop
from tests.null.cuda_helpers import cuda_source, sass_text
from tests.null.cuda_helpers import flash_attention_ir as _fa

OFF = {"tlx.softmax_rotation": False}


def _instructions(sass: str) -> list[str]:
    return [ln.split("*/", 1)[1].split(";")[0].strip() for ln in sass.splitlines()
            if re.search(r"/\*[0-9a-f]{4}\*/", ln)]


def inflight_violations(sass: str) -> list[str]:
    """Instructions other than wgmma that touch the accumulator registers of a wgmma group after
    its first HGMMA and before a WARPGROUP.DEPBAR that retires it (``.LE gsb0, n`` retires all
    but the newest n groups)."""
    bad: list[str] = []
    groups: list[tuple[int, int]] = []  # committed groups, oldest first
    current: list[tuple[int, int]] = []
    for ins in _instructions(sass):
        m = re.match(r"(@!?U?P\w+\s+)?HGMMA\.64x(\d+)x\d+\.F32\S*\s+R(\d+),", ins)
        if m:
            lo = int(m.group(3))
            current.append((lo, lo + int(m.group(2)) // 2 - 1))
            if "gsb0" in ins:
                groups.append(current[0])
                current = []
            continue
        wait = re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x(\d+)", ins)
        if wait:
            keep = int(wait.group(1), 16)
            groups = groups[len(groups) - keep:] if keep else []
            continue
        regs = [int(r) for r in re.findall(r"\bR(\d+)\b", ins)]
        if any(lo <= r <= hi for lo, hi in groups + current for r in regs):
            bad.append(ins)
    return bad


def test_checker_catches_a_read_of_inflight_registers() -> None:
    sass = ("        /*0010*/  HGMMA.64x128x16.F32 R24, gdesc[UR8], R24, gsb0 ;\n"
            "        /*0020*/  HGMMA.64x128x16.F32 R88, gdesc[UR8], R88, gsb0 ;\n"
            "        /*0030*/  WARPGROUP.DEPBAR.LE gsb0, 0x1 ;\n"
            "        /*0040*/  FADD R30, R30, R1 ;\n"
            "        /*0050*/  FADD R90, R90, R1 ;\n"
            "        /*0060*/  WARPGROUP.DEPBAR.LE gsb0, 0x0 ;\n"
            "        /*0070*/  FADD R91, R91, R1 ;\n")
    assert inflight_violations(sass) == ["FADD R90, R90, R1"]


@pytest.mark.parametrize("causal", [False, True])
def test_both_gemms_issue_in_one_turn_and_the_softmax_runs_between_the_waits(causal: bool) -> None:
    src, _ = cuda_source(_fa(causal), "sm_90a")
    loop = _consumer_loop(src)
    assert loop.startswith("for (int k_i = 1;")
    assert loop.count("tlx_pp_wait(tx >> 7);") == 1 and loop.count("tlx_pp_pass(tx >> 7);") == 1
    turn = loop[loop.index("tlx_pp_wait"):loop.index("tlx_pp_pass")]
    assert turn.count("tlx_wgmma_commit();") == 2 and "tlx_mbar_wait(tlx_full1_s" in turn  # QK^T, then P.V
    wait1, wait0 = loop.index("TLX_WGMMA_WAIT(1);"), loop.index("tlx_wgmma_wait0();")
    assert wait1 < loop.index("tlx_mbar_arrive(tlx_empty_s") < loop.index("tlx_exp2f") < \
        loop.index("tlx_sched_pin(&logsum[0], 2);") < wait0 < loop.index("tlx_mbar_arrive(tlx_empty1_s")
    assert loop.index("acc_s_cast[", wait0) > wait0  # P is rewritten only once P.V has read it
    # the prologue's QK^T and the epilogue's P.V take turns too; the hand-overs balance
    before, rest = src.split("for (int k_i", 1)
    prologue = before[before.index("if ((tx >> 7) == 1) {\n      tlx_pp_pass(tx >> 7);"):]
    assert prologue.count("tlx_pp_wait(tx >> 7);") == 1 and prologue.count("tlx_wgmma_commit();") == 1
    after_loop = rest[rest.index("\n    }\n"):]
    epilogue = after_loop[:after_loop.index("if ((tx >> 7) == 0) {\n      tlx_pp_wait(tx >> 7);")]
    assert epilogue.count("tlx_pp_wait(tx >> 7);") == 1
    assert epilogue.index("tlx_pp_wait(tx >> 7);") < epilogue.index("tlx_wgmma_rs_") < epilogue.index("tlx_pp_pass")
    # the last P.V runs after the loop, before the epilogue divides by the row sums
    divide = rest.index("__frcp_rn(logsum")
    assert rest.index("tlx_wgmma_rs_") < rest.index("tlx_mbar_arrive(tlx_empty1_s + (") < divide


@pytest.mark.parametrize("causal", [False, True])
def test_sass_keeps_the_softmax_between_the_waits(causal: bool) -> None:
    ins = _instructions(sass_text(_fa(causal), "sm_90a"))
    assert inflight_violations("\n".join(f"/*0000*/ {i} ;" for i in ins)) == []
    waits = [i for i, s in enumerate(ins) if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in s]
    assert len(waits) == 1
    tail = ins[waits[0]:]
    wait0 = next(i for i, s in enumerate(tail) if "WARPGROUP.DEPBAR.LE gsb0, 0x0" in s)
    assert sum("MUFU.EX2" in s for s in tail[:wait0]) >= 64  # every exp2 of the 64x128 score tile


def test_the_causal_mask_is_applied_after_the_score_gemm() -> None:
    """The select between 0 and -inf before QK^T becomes zero stores (folded into the first wgmma)
    and, on the diagonal block only, -inf where the mask is off once the scores are in."""
    loop = _consumer_loop(cuda_source(_fa(causal=True), "sm_90a")[0])
    issue, rest = loop.split("TLX_WGMMA_WAIT(1);", 1)
    assert "-__int_as_float(0x7f800000)" not in issue and "= 0.0f;" in issue
    mask = rest.index("? acc_s[")
    assert mask < rest.index("tlx_exp2f") and rest.rindex("} else {", 0, mask) > 0


def test_other_loops_keep_their_form() -> None:
    func = gemm.matmul.get_ir(1024, 1024, 1024, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)
    assert cuda_source(func, "sm_90a")[0] == cuda_source(func, "sm_90a", OFF)[0]
    src = cuda_source(_fa(), "sm_90a", OFF)[0]
    assert "TLX_WGMMA_WAIT(1)" not in src and "tlx_sched_pin(&" not in src
    many = attention.flash_attention.get_ir(4, 32, 1024, 128, False, block_M=128, block_N=128, num_stages=2,
                                            threads=256)  # more blocks than SMs
    src = cuda_source(many, "sm_90a", {"tlx.persistent": True})[0]
    assert "tlx_tile_j" in src and "tlx_sched_pin(&" not in src


@tilelang.jit(out_idx=[3])
def _rescale_after_pv(seq: int, dim: int, block: int):
    """A FlashAttention-like loop whose P·V is not its last statement: not rotated."""

    @T.prim_func
    def main(Q: T.Tensor([seq, dim], T.float16), K: T.Tensor([seq, dim], T.float16),
             V: T.Tensor([seq, dim], T.float16), Out: T.Tensor([seq, dim], T.float16)):
        with T.Kernel(T.ceildiv(seq, block), threads=256) as bx:
            q = T.alloc_shared([block, dim], T.float16)
            k = T.alloc_shared([block, dim], T.float16)
            v = T.alloc_shared([block, dim], T.float16)
            s = T.alloc_fragment([block, block], T.float32)
            p = T.alloc_fragment([block, block], T.float16)
            o = T.alloc_fragment([block, dim], T.float32)
            T.copy(Q[bx * block, 0], q)
            T.clear(o)
            for i in T.Pipelined(T.ceildiv(seq, block), num_stages=2):
                T.copy(K[i * block, 0], k)
                T.copy(V[i * block, 0], v)
                T.clear(s)
                T.gemm(q, k, s, transpose_B=True)
                T.copy(s, p)
                T.gemm(p, v, o)
                for a, b in T.Parallel(block, dim):
                    o[a, b] *= 0.5
            T.copy(o, Out[bx * block, 0])

    return main


def test_a_loop_whose_pv_is_not_last_is_not_rotated() -> None:
    func = _rescale_after_pv.get_ir(1024, 128, 128)
    src = cuda_source(func, "sm_90a", {"tlx.ws_compute_loops": True})[0]
    assert "tlx_pp_wait(tx" in src and "TLX_WGMMA_WAIT(1)" not in src


def _score_init(value_of: Any, extent: int = 8) -> Any:
    """``for i, j in T.Parallel(extent, 8): S[i, j] = value_of(i, j)`` on an 8x8 float32 fragment."""
    from tilelang_x.core_ir import dtypes
    from tilelang_x.core_ir import expr as E
    from tilelang_x.core_ir.buffer import Buffer
    from tilelang_x.core_ir.stmt import For, Store

    s = Buffer("S", (8, 8), dtypes.float32, "fragment")
    i, j = E.Var("i", dtypes.int32), E.Var("j", dtypes.int32)
    body = Store(s, (i, j), value_of(i, j))
    return s, For(i, E.const(extent), "parallel", For(j, E.const(8), "parallel", body))


def test_only_whole_zero_or_minus_inf_initialisations_move_after_the_gemm() -> None:
    from tilelang_x.core_ir import dtypes
    from tilelang_x.core_ir import expr as E
    from tilelang_x.core_ir.buffer import Region
    from tilelang_x.core_ir.printer import stmt_to_str
    from tilelang_x.core_ir.stmt import Seq
    from tilelang_x.core_ir.tileops import Fill
    from tilelang_x.plugins.cuda.hopper.rotate import _deferred

    f32 = dtypes.float32
    zero, minus_inf = E.const(0.0, f32), E.const(float("-inf"), f32)
    def nothing(x: Any) -> bool:
        return isinstance(x, Seq) and not x.stmts

    s, clear = _score_init(lambda i, j: zero)
    assert nothing(_deferred(clear, s))
    assert nothing(_deferred(Fill(Region.full(s), zero), s))
    assert _deferred(Fill(Region.full(s), E.const(1.0, f32)), s) is None
    assert _deferred(Fill(Region.full(s), E.const(-0.0, f32)), s) is None  # only +0 and -inf are recognised
    s, mask = _score_init(lambda i, j: E.select(E.binary(">=", i, j), zero, minus_inf))
    masked = _deferred(mask, s)
    assert masked is not None and "T.if_then_else(i >= j, S[i, j], -inf)" in stmt_to_str(masked)
    s, partial = _score_init(lambda i, j: zero, extent=4)  # rows 4..7 keep their values: not an init
    assert _deferred(partial, s) is None
    s, other = _score_init(lambda i, j: E.select(E.binary(">=", i, j), minus_inf, zero))
    assert _deferred(other, s) is None
