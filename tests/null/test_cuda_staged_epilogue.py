"""The staged epilogue (``lower/staged_epilogue.py``, pass config ``tlx.staged_epilogue``), checked
without a GPU: each warp's 32 lanes run the lowered copy in lockstep over a simulated shared
memory (stmatrix as backends.md A2 defines it); every global element must receive the register
(slot, thread) the element-wise copy stores there, exactly once, and the staging accesses must be
race-free between ``__syncwarp``s, inside the workspace and inside the warp's own slot. The SASS
shows STSM and 16-byte global stores."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tests.null.test_cuda_epilogue import _ev, _flat, _gemm, _kernel, _run
from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.stages import StageContext, run_stages
from tilelang_x.core_ir.stmt import If, Seq, Store
from tilelang_x.core_ir.visit import walk
from tilelang_x.plugins.cuda.lir import Block, Evaluate, Intrin, PtrTo, SmemAddr
from tilelang_x.target import Target

ELEMENT = {"tlx.vector_epilogue": False, "tlx.staged_epilogue": False}
#: the per-lane 16-byte stores (the TMA stores, test_cuda_tma_store.py, would take these cases)
STAGED = {"tlx.tma_store": False}


def _lower(func: Any, configs: dict[str, bool]) -> tuple[Any, list[int], int]:
    from tilelang_x.compiler import _core_stages
    from tilelang_x.plugins.cuda.passes import stages

    ctx = StageContext(Target("cuda", "sm_90a"), {"pass_configs": configs})
    lowered = run_stages(func, _core_stages() + stages(ctx.target), ctx)
    grid = [E.as_int(g) for g in _kernel(lowered).grid]
    return lowered, grid, ctx.data["cuda.threads"]


def _is_global_write(m: Any) -> bool:
    if isinstance(m, Store):
        return m.buffer.scope == "global"
    return isinstance(m, Intrin) and m.fn in ("tlx_copy16", "tlx_st2") and m.args[0].buffer.scope == "global"


def _epilogue_block(lowered: Any) -> Any:
    blocks = [n for n in walk(lowered.body) if isinstance(n, Block) and n.label == "parallel"
              and any(_is_global_write(m) for m in walk(n.body))]
    assert blocks, "no epilogue found"
    return blocks[-1]


class _Warp:
    """One warp's lanes running the staged block in lockstep over the workspace."""

    def __init__(self, envs: list[dict[str, int]], shared: dict[int, Any], owner: dict[int, int], warp: int,
                 size: int) -> None:
        self.envs, self.shared, self.owner, self.warp, self.size = envs, shared, owner, warp, size
        self.epoch = 0
        self.out: list[tuple[int, int, int]] = []

    def touch(self, elem: int) -> None:
        assert 0 <= elem < self.size, f"staging access {elem} outside the workspace"
        owner = self.owner.setdefault(elem, self.warp)
        assert owner == self.warp, f"warps {owner} and {self.warp} share staging element {elem}"

    def run(self, s: Any) -> None:
        if isinstance(s, Block):
            self.run(s.body)
        elif isinstance(s, Seq):
            for c in s.stmts:
                self.run(c)
        elif isinstance(s, Evaluate) and isinstance(s.value, Intrin) and s.value.fn == "__syncwarp":
            self.epoch += 1
        elif isinstance(s, Evaluate) and isinstance(s.value, Intrin) and s.value.fn == "tlx_stsm_x4":
            self.stsm(s.value)
        elif isinstance(s, Evaluate) and isinstance(s.value, Intrin) and s.value.fn == "tlx_copy16":
            for env in self.envs:
                self.copy16(s.value, env)
        elif isinstance(s, If):
            assert s.otherwise is None
            for env in self.envs:
                if _ev(s.cond, env):
                    assert isinstance(s.then, Evaluate) and s.then.value.fn == "tlx_copy16"
                    self.copy16(s.then.value, env)
        else:
            raise AssertionError(f"unexpected {type(s).__name__} in a staged epilogue")

    def stsm(self, call: Intrin) -> None:
        addr = call.args[0]
        assert isinstance(addr, SmemAddr)
        rows = [_ev(addr.indices[0], env) for env in self.envs]
        regs = []
        for env in self.envs:  # per lane: 4 registers, each a pair of (slot, tx)
            lane = []
            for r in call.args[1:]:
                assert isinstance(r, Intrin) and r.fn in ("tlx_cvt_h2", "tlx_cvt_b2")
                lane.append(tuple((_ev(a, env)[1], env["tx"]) for a in r.args))
            regs.append(lane)
        for i in range(4):
            for rr in range(8):
                row = rows[8 * i + rr]
                assert row % 8 == 0, "stmatrix row not 16-byte aligned"
                for q in range(4):
                    pair = regs[4 * rr + q][i]
                    for e in range(2):
                        self.write(row + 2 * q + e, pair[e])

    def write(self, elem: int, value: tuple[int, int]) -> None:
        self.touch(elem)
        old = self.shared.get(elem)
        assert old is None or (old[1] != self.epoch and old[2] != self.epoch), f"race on staging element {elem}"
        self.shared[elem] = (value, self.epoch, old[2] if old else -1)

    def copy16(self, call: Intrin, env: dict[str, int]) -> None:
        dst, src, pred = call.args
        assert isinstance(dst, PtrTo) and isinstance(src, PtrTo) and _ev(pred, env)
        d = _flat(dst.buffer, [_ev(i, env) for i in dst.indices])
        s = _ev(src.indices[0], env)
        assert d % 8 == 0 and s % 8 == 0, "16-byte access not aligned"
        for j in range(8):
            self.touch(s + j)
            got = self.shared.get(s + j)
            assert got is not None and got[1] < self.epoch, f"staging element {s + j} read before a __syncwarp"
            self.shared[s + j] = (got[0], got[1], self.epoch)
            slot, tx = got[0]
            self.out.append((d + j, slot, tx))


def _staged_writes(block: Any, grid: list[int], threads: int) -> set[tuple[int, int, int]]:
    ws = next(n.buffer for n in walk(block) if isinstance(n, SmemAddr))
    size = E.as_int(ws.shape[0])
    out: set[tuple[int, int, int]] = set()
    for pos in itertools.product(*(range(g) for g in grid)):
        env = dict(zip(("bx", "by", "bz"), pos))
        owner: dict[int, int] = {}
        for w in range(threads // 32):
            warp = _Warp([{**env, "tx": 32 * w + lane} for lane in range(32)], {}, owner, w, size)
            warp.run(block)
            for key in warp.out:
                assert key not in out, key
                out.add(key)
    flats = [k[0] for k in out]
    assert len(flats) == len(set(flats)), "a global element written twice"
    return out


def _element_writes(block: Any, grid: list[int], threads: int) -> set[tuple[int, int, int]]:
    out: set[tuple[int, int, int]] = set()
    for pos in itertools.product(*(range(g) for g in grid)):
        env = dict(zip(("bx", "by", "bz"), pos))
        for tx in range(threads):
            for flat, slot in _run(block, {**env, "tx": tx}):
                out.add((flat, slot, tx))
    return out


CASES = {
    "128x256_ws": lambda: _gemm(256, 512, 128, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256),
    "tails_relu": lambda: _gemm(200, 136, 96, block_M=64, block_N=64, block_K=32, relu=True),
    "bf16_mi2": lambda: _gemm(256, 128, 64, block_M=128, block_N=64, block_K=32, in_dtype=dtypes.bfloat16,
                              out_dtype=dtypes.bfloat16, threads=128),
    "chunk32_tail": lambda: _gemm(72, 40, 64, block_M=64, block_N=32, block_K=32),
    "chunk16": lambda: _gemm(64, 48, 64, block_M=64, block_N=16, block_K=32),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_staged_epilogue_writes_what_the_element_copy_writes(name: str) -> None:
    staged, grid, threads = _lower(CASES[name](), STAGED)
    block = _epilogue_block(staged)
    assert any(isinstance(n, Intrin) and n.fn == "tlx_stsm_x4" for n in walk(block)), "staged path not taken"
    ref, grid_ref, threads_ref = _lower(CASES[name](), ELEMENT)
    ref_block = _epilogue_block(ref)
    assert (grid, threads) == (grid_ref, threads_ref)
    assert _staged_writes(block, grid, threads) == _element_writes(ref_block, grid, threads)


def test_off_keeps_the_vector_epilogue_and_persistent_stages() -> None:
    make = CASES["128x256_ws"]
    lowered, _, _ = _lower(make(), {"tlx.staged_epilogue": False})
    assert not any(isinstance(n, Intrin) and n.fn == "tlx_stsm_x4" for n in walk(lowered.body))
    many = _gemm(2048, 4096, 128, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)
    lowered, grid, _ = _lower(many, {"tlx.persistent": True})  # 256 tiles on 132 blocks
    assert grid == [132]
    assert any(isinstance(n, Intrin) and n.fn == "tlx_stsm_x4" for n in walk(lowered.body))


def test_fp32_output_keeps_the_vector_epilogue() -> None:
    lowered, _, _ = _lower(_gemm(128, 128, 64, block_M=64, block_N=64, out_dtype=dtypes.float32), {})
    assert not any(isinstance(n, Intrin) and n.fn == "tlx_stsm_x4" for n in walk(lowered.body))


def _sass_ops(func: Any, configs: dict[str, bool]) -> dict[str, int]:
    from tests.null.cuda_helpers import sass_ops

    return sass_ops(func, r"\b(STG\.E(?:\.U16|\.64|\.128)?|STSM\.[A-Z0-9.]+|LDS(?:\.[A-Z0-9]+)*|BAR\.[A-Z.]+)\b",
                    "sm_90a", configs)


def test_sass_staged_epilogue() -> None:
    """128×256 tile, 8 consumer warps: per thread 16 STSM.x4, 16 LDS.128 and 16 16-byte global
    stores, no 2- or 4-byte stores."""
    func = _gemm(512, 512, 512, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)
    ops = _sass_ops(func, STAGED)
    assert ops.get("STG.E.128") == 16 and not ops.get("STG.E.U16") and not ops.get("STG.E"), ops
    assert ops.get("STSM.16.M88.4") == 16 and ops.get("LDS.128") == 16, ops


@pytest.mark.parametrize("configs", [{}, STAGED, {"tlx.defer_store_drain": False}])
def test_persistent_epilogue_has_no_consumer_barrier(configs: dict[str, bool]) -> None:
    """Each warp's slots are its own: a persistent kernel's tile loop holds no barrier of all
    consumers (sync insertion would put one before every epilogue); each epilogue begins with a
    __syncwarp, after the deferred stores' wait where there is one."""
    many = _gemm(2048, 4096, 128, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)
    lowered, grid, _ = _lower(many, {"tlx.persistent": True, **configs})
    assert grid == [132]
    calls = [n.fn for n in walk(lowered.body) if isinstance(n, Intrin)]
    assert "tlx_named_bar_sync" not in calls and "tlx_stsm_x4" in calls
    before = calls[:calls.index("tlx_stsm_x4")]
    assert before[-1] == "__syncwarp" and (before[-2] == "tlx_tma_store_wait_read0") == (not configs), before
