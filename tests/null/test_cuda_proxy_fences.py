"""The proxy fences before barriers of a wgmma kernel go only where a thread may have written
shared memory since its last fence (hopper/proxy_fences.py)."""

from __future__ import annotations

from types import SimpleNamespace

from tests.kernels import attention_bwd, gemm
from tests.null.cuda_helpers import cuda_source
from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.buffer import Buffer
from tilelang_x.core_ir.stmt import For, If, Jump, Seq, Store
from tilelang_x.plugins.cuda.hopper.proxy_fences import unfenced_barriers
from tilelang_x.plugins.cuda.lir import Barrier, Evaluate, Intrin

TILE = Buffer("tile", (64,), dtypes.float16, "shared")
CTX = SimpleNamespace(options={}, data={})


def _store() -> Store:
    return Store(TILE, (E.const(0),), E.const(0.0, dtypes.float16))


def _fence() -> Evaluate:
    return Evaluate(Intrin("tlx_fence_proxy_async", ()))


def _loop(body: Seq) -> For:
    return For(E.Var("k"), E.const(4), "serial", body)


def test_a_barrier_after_a_fenced_store_needs_no_fence() -> None:
    b = Barrier()
    assert unfenced_barriers(Seq((_store(), _fence(), b)), CTX) == {id(b)}


def test_a_store_at_the_end_of_a_loop_body_reaches_the_barrier_at_its_start() -> None:
    first, inner = Barrier(), Barrier()
    body = Seq((first, _loop(Seq((inner, _store())))))
    assert unfenced_barriers(body, CTX) == {id(first)}


def test_a_store_on_either_side_of_a_branch_counts() -> None:
    b = Barrier()
    body = Seq((If(E.Var("c") > 0, _store(), None), b))
    assert unfenced_barriers(body, CTX) == set()


def test_break_or_continue_keeps_every_fence() -> None:
    b = Barrier()
    body = Seq((b, _loop(Seq((If(E.Var("c") > 0, Jump("break"), None),)))))
    assert unfenced_barriers(body, CTX) == set()


def _bwd_barriers(configs: dict[str, bool] | None = None) -> list[tuple[bool, str]]:
    """(fenced, line) of each consumer barrier of FlashAttention backward's main kernel, in order."""
    func = attention_bwd.flash_bwd.get_ir(1, 2, 4096, 128, False, block_M=128, block_N=64, num_stages=2, threads=256)
    source, _ = cuda_source(func, "sm_90a", configs)
    lines = [ln.strip() for ln in source[source.index('extern "C"'):].splitlines()]
    return [(lines[i - 1] == "tlx_fence_proxy_async();", ln) for i, ln in enumerate(lines)
            if ln.startswith("tlx_named_bar_sync(")]


def test_flash_attention_backward_loses_the_fence_its_loop_starts_with() -> None:
    # the loop's first barrier follows the previous iteration's dQ reduction, whose stores fenced
    # themselves; the one after dS^T is written to shared memory keeps its fence
    fenced = [f for f, _ in _bwd_barriers()]
    assert fenced == [True, False, True]
    assert [f for f, _ in _bwd_barriers({"tlx.elide_proxy_fences": False})] == [True, True, True]


def test_cp_async_writes_keep_the_fence_before_wgmma_reads_them() -> None:
    # the cp.async pipeline (TMA off): each iteration's barrier follows the copies of the one before
    func = gemm.matmul.get_ir(256, 256, 256, block_M=64, block_N=64, block_K=32, num_stages=2, threads=128)
    source, _ = cuda_source(func, "sm_90a", {"tl.disable_tma_lower": True})
    body = source[source.index('extern "C"'):]
    assert "tlx_cp_async16(" in body and "tlx_wgmma_ss" in body
    lines = [ln.strip() for ln in body.splitlines()]
    barriers = [i for i, ln in enumerate(lines) if ln == "__syncthreads();"]
    assert barriers and all(lines[i - 1] == "tlx_fence_proxy_async();" for i in barriers)
