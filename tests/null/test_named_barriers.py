"""Named barriers: ``T.sync_threads(barrier_id, arrive_count)`` and ``T.named_barrier_arrive``.
The interpreter runs the warps of a block side by side, each waiting at its barriers (results
against torch, deadlocks found); CUDA emits ``bar.sync`` / ``bar.arrive`` and keeps its own named
barriers (warp specialization) out of such kernels. The frontend checks the arguments."""

from __future__ import annotations

import re

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import named_barriers as K
from tests.null.cuda_helpers import cuda_source, sass_text
from tests.null.located import located_errors
from tilelang_x.core_ir.errors import (
    BackendNotImplementedError,
    DeadlockError,
    NotSupportedError,
    TileLangError,
    TileLangSyntaxError,
    VerificationError,
)

where, raises = located_errors(__file__)


def _interp(func: object) -> object:
    return tilelang.compile(func, target="interp")


# ---- the interpreter ---------------------------------------------------------------------------

def test_a_producer_warp_hands_each_step_to_a_consumer_warp() -> None:
    x = torch.randn(8 * 32)
    y = torch.zeros_like(x)
    _interp(K.handoff.get_ir(8, 20))(x, y, 0)
    torch.testing.assert_close(y, x * 2 + 1)


def test_two_groups_of_warps_reduce_at_their_own_barriers() -> None:
    x = torch.randn(256)
    out = torch.zeros(2)
    _interp(K.split_reductions.get_ir())(x, out)
    torch.testing.assert_close(out, torch.stack([x[:128].sum(), x[128:].max()]))


def test_two_warps_pipeline_through_two_slots() -> None:
    """Each warp loops inside its own branch: the producer runs ahead until it waits for a slot the
    consumer has not emptied yet."""
    x = torch.randn(16, 32)
    y = torch.zeros_like(x)
    _interp(K.pipelined_warps.get_ir(16, 5))(x, y, 0)
    torch.testing.assert_close(y, x * 3)


def test_a_consumer_branch_before_its_producer_waits_for_it() -> None:
    @T.prim_func
    def main(X: T.Tensor((32,), T.float32), Y: T.Tensor((32,), T.float32)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            S = T.alloc_shared((32,), T.float32)
            if tx >= 32:
                T.sync_threads(1, 64)
                Y[tx - 32] = S[tx - 32]
            else:
                S[tx] = X[tx]
                T.named_barrier_arrive(1, 64)

    x, y = torch.randn(32), torch.zeros(32)
    _interp(main)(x, y)
    assert torch.equal(y, x)


def test_a_barrier_that_never_completes_is_a_deadlock() -> None:
    @T.prim_func
    def main(X: T.Tensor((64,), T.float32)):
        with T.Kernel(2, threads=128):
            tx = T.get_thread_binding()
            if tx < 64:
                T.sync_threads(1, 96)  # E:hang

    raises(DeadlockError, "hang", lambda: _interp(main)(torch.zeros(64)),
           "deadlock in block (0): every warp that has not ended waits", "warp 1 at T.sync_threads(1, 96)")


def test_a_whole_block_barrier_by_name_and_barrier_0() -> None:
    @T.prim_func
    def main(X: T.Tensor((128,), T.float32), Y: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((128,), T.float32)
            for i in T.Parallel(128):
                S[i] = X[i]
            T.sync_threads(3)  # all 128 threads
            T.sync_threads(0, 128)  # the block barrier
            for i in T.Parallel(128):
                Y[i] = S[127 - i]

    x, y = torch.randn(128), torch.zeros(128)
    _interp(main)(x, y)
    assert torch.equal(y, x.flip(0))
    body = cuda_source(main)[0].split('extern "C"')[-1]
    assert re.search(r"tlx_bar_sync\(3, 128\);\s*__syncthreads\(\);\s*Y\[", body), body


def test_part_of_a_warp_or_another_count_or_id_is_an_error() -> None:
    @T.prim_func
    def half_warp(X: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            if tx < 16:
                T.sync_threads(1, 32)  # E:half

    @T.prim_func
    def recount(X: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            if tx < 32:
                T.named_barrier_arrive(1, 64)
            T.sync_threads(1)  # E:recount

    @T.prim_func
    def far(X: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            for k in T.serial(3):
                T.sync_threads(k + 14, 64)  # E:far

    @T.prim_func
    def ragged(X: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=48):  # E:ragged
            tx = T.get_thread_binding()
            if tx < 32:
                T.sync_threads(1, 32)

    x = torch.zeros(64)
    raises(TileLangError, "half", lambda: _interp(half_warp)(x), "only some threads of warp 0")
    raises(BackendNotImplementedError, "ragged", lambda: _interp(ragged)(x), "48 threads, not whole warps")
    raises(TileLangError, "recount", lambda: _interp(recount)(x), "barrier 1 is in use by 64 threads, not 128")
    raises(TileLangError, "far", lambda: _interp(far)(x), "barrier id 16 in warp 0")


# ---- the frontend and the verifier --------------------------------------------------------------

@pytest.mark.parametrize(("args", "words"), [
    ((16, 64), "barrier_id=16 is not a barrier id"),
    ((-1, 64), "barrier_id=-1"),
    ((1.0, 64), "barrier_id=1.0"),
    ((1, 48), "arrive_count=48 must be a positive multiple of 32"),
    ((1, 256), "at most the block's 128 threads"),
    ((0, 64), "barrier 0 is the whole block's (128 threads), not 64"),
])
def test_bad_arguments_name_the_line(args: tuple, words: str) -> None:
    def build() -> None:
        @T.prim_func
        def main(X: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=128):
                T.sync_threads(*args)  # E:args

    raises(TileLangSyntaxError, "args", build, words)


def test_arriving_at_barrier_0_is_refused() -> None:
    def build() -> None:
        @T.prim_func
        def main(X: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64):
                T.named_barrier_arrive(0, 64)  # E:arrive0

    raises(TileLangSyntaxError, "arrive0", build, "barrier 0 is the whole block's")


def test_inside_parallel_and_beside_ws_regions_is_refused() -> None:
    @T.prim_func
    def parallel(X: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                X[i] = 1.0
                T.sync_threads(1, 64)  # E:parallel

    @T.prim_func
    def regions(X: T.Tensor((256,), T.float32)):
        with T.Kernel(1, threads=256):
            with T.ws(0):
                T.sync_threads(1, 128)  # E:ws
            with T.ws(1):
                for i in T.Parallel(128):
                    X[i] = 1.0

    raises(VerificationError, "parallel", lambda: _interp(parallel), "T.sync_threads(1, 64) inside a T.Parallel loop")
    raises(VerificationError, "ws", lambda: _interp(regions), "with T.ws regions or barriers",
           "named barriers of its own")


# ---- CUDA ---------------------------------------------------------------------------------------

def _body(func: object, arch: str = "sm_80") -> str:
    return cuda_source(func, arch)[0].split('extern "C"')[-1]


def test_cuda_emits_bar_arrive_and_bar_sync_in_the_branches() -> None:
    body = _body(K.handoff.get_ir())
    producer = body[body.index("if (tx < 32) {"):body.index("} else {")]
    consumer = body[body.index("} else {"):]
    assert producer.index("S[") < producer.index("tlx_bar_arrive(1, 64);")
    assert consumer.index("tlx_bar_sync(1, 64);") < consumer.index("Y[")
    body = _body(K.pipelined_warps.get_ir())
    assert re.search(r"if \(0 < j\) \{\s*tlx_bar_sync\(s \+ 3, 64\);", body)
    assert "tlx_bar_arrive(s + 1, 64);" in body and "tlx_bar_sync(s_1 + 1, 64);" in body
    assert "tlx_bar_arrive(s_1 + 3, 64);" in body


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize(("kernel", "syncs", "arrivals"), [
    ("handoff", {"0x1, 0x40"}, {"0x1, 0x40"}),
    ("split_reductions", {"0x1, 0x80", "0x2, 0x80"}, set()),
    ("pipelined_warps", {f"0x{i}, 0x40" for i in range(1, 5)}, {f"0x{i}, 0x40" for i in range(1, 5)}),
])
def test_cuda_compiles_to_bar_instructions(kernel: str, syncs: set[str], arrivals: set[str], arch: str) -> None:
    sass = sass_text(getattr(K, kernel).get_ir(), arch)
    assert set(re.findall(r"BAR\.SYNC(?:\.DEFER_BLOCKING)? (0x\w+, 0x\w+) ;", sass)) == syncs
    assert set(re.findall(r"BAR\.ARV (0x\w+, 0x\w+) ;", sass)) == arrivals


def _gemm(named: bool) -> object:
    @T.prim_func
    def main(A: T.Tensor((512, 512), T.float16), B: T.Tensor((512, 512), T.float16),
             C: T.Tensor((512, 512), T.float32)):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 32), T.float16)
            B_s = T.alloc_shared((32, 128), T.float16)
            C_f = T.alloc_fragment((128, 128), T.float32)
            T.clear(C_f)
            for k in T.Pipelined(16, num_stages=3):
                T.copy(A[by * 128, k * 32], A_s)
                T.copy(B[k * 32, bx * 128], B_s)
                T.gemm(A_s, B_s, C_f)
            if named:
                T.sync_threads(1, 128)
            T.copy(C_f, C[by * 128, bx * 128])

    return main


def test_cuda_does_not_warp_specialize_a_kernel_with_named_barriers() -> None:
    """Warp specialization uses named barrier 1 for its consumers (and 2, 3 for pingpong): a kernel
    that names barriers keeps its threads as written, and so the ids are the kernel's."""
    src, ctx = cuda_source(_gemm(False), "sm_90a")
    assert "cuda.ws" in ctx.data
    src, ctx = cuda_source(_gemm(True), "sm_90a")
    body = src.split('extern "C"')[-1]
    assert "cuda.ws" not in ctx.data and "tlx_named_bar_sync" not in body and "tlx_bar_sync(1, 128);" in body


def test_cuda_refuses_named_barriers_beside_the_compilers_own() -> None:
    """Never the case by construction (above); the check before codegen keeps it so."""
    from tilelang_x.core_ir.source import SourceLoc
    from tilelang_x.core_ir.stmt import Seq
    from tilelang_x.plugins.cuda.lir import Evaluate, Intrin
    from tilelang_x.plugins.cuda.named_barriers import check_ids

    user = Evaluate(Intrin("tlx_bar_sync", (T.int32(1), T.int32(64))), SourceLoc("k.py", 7))
    ws = Evaluate(Intrin("tlx_named_bar_sync", (T.int32(1), T.int32(256))))
    check_ids(Seq((user,)))
    with pytest.raises(NotSupportedError, match=r"k.py:7: .*share ids with the ones the compiler placed "
                       r"\(tlx_named_bar_sync\)"):
        check_ids(Seq((ws, user)))


def test_interp_tile_ops_and_pipelined_loops_run_once_for_the_block_of_warps() -> None:
    a, b = torch.randn(512, 512).half(), torch.randn(512, 512).half()
    c = torch.zeros(512, 512)
    _interp(_gemm(True))(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-2, rtol=1e-2)
