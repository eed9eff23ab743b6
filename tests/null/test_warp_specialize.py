"""``T.ws`` regions and mbarriers: the frontend's and the verifier's errors (each at the user's
line), the interpreter's barrier semantics and deadlock report. The kernels' results are suite
cases (tests/kernels/warp_specialize.py)."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.null.located import located_errors
from tilelang_x.core_ir.errors import (
    DeadlockError,
    TileLangError,
    TileLangSyntaxError,
    TileLangTypeError,
    VerificationError,
)
from tilelang_x.plugins.interp.team import MBarriers

where, raises = located_errors(__file__)


def _interp(func: object) -> object:
    return tilelang.compile(func, target="interp")


# ---- the interpreter's semantics ----------------------------------------------------------------

def test_a_phase_completes_at_every_count_th_arrival() -> None:
    bars = MBarriers([3, 128])
    assert bars.completed(0, 1) and not bars.completed(0, 0)  # a fresh barrier: phase 0 runs
    bars.arrive(0, 2)
    assert not bars.completed(0, 0)
    bars.arrive(0, 1)
    assert bars.completed(0, 0) and not bars.completed(0, 1)
    bars.arrive(0, 7)  # two more phases (parity 1 again) and one arrival of the next: 2 still missing
    assert bars.phase[0] == 1 and bars.missing[0] == 2
    bars.arrive(1, 256)
    assert bars.phase[1] == 0 and bars.missing[1] == 128


def ping_pong(rounds: int, consumer_arrives: bool = True, count: int = 128) -> object:
    """Warpgroup 0 copies row r of X into shared memory, warpgroup 1 writes it + 1 to Y."""

    @T.prim_func
    def main(X: T.Tensor((rounds, 128), T.float32), Y: T.Tensor((rounds, 128), T.float32)):
        with T.Kernel(1, threads=256) as _:
            S = T.alloc_shared((128,), T.float32)
            full = T.alloc_barrier(count)
            empty = T.alloc_barrier(128)
            with T.ws(0):
                for r in T.serial(rounds):
                    T.barrier_wait(empty, (r + 1) % 2)  # E:producer_wait
                    T.copy(X[r, 0], S)
                    T.barrier_arrive(full)
            with T.ws(1):
                for r in T.serial(rounds):
                    T.barrier_wait(full, r % 2)
                    for i in T.Parallel(128):
                        Y[r, i] = S[i] + 1.0
                    if consumer_arrives:
                        T.barrier_arrive(empty)

    return main


def test_the_consumer_sees_every_round_the_producer_hands_over() -> None:
    x = torch.randn(5, 128)
    y = torch.zeros(5, 128)
    _interp(ping_pong(5))(x, y)
    torch.testing.assert_close(y, x + 1)


def test_a_missing_arrival_is_a_deadlock_naming_the_wait() -> None:
    err = raises(DeadlockError, "producer_wait", lambda: _interp(ping_pong(3, consumer_arrives=False))(
        torch.zeros(3, 128), torch.zeros(3, 128)), "deadlock in block (0)", "warpgroup 0 at T.barrier_wait",
        "warpgroup 1 at T.barrier_wait")
    assert "on a GPU the kernel would hang" in str(err)


def test_an_arrive_count_no_region_reaches_is_a_deadlock() -> None:
    with pytest.raises(DeadlockError, match="every warpgroup that has not ended waits"):
        _interp(ping_pong(2, count=256))(torch.zeros(2, 128), torch.zeros(2, 128))


def test_a_symbolic_parity_outside_0_1_fails_at_run_time() -> None:
    @T.prim_func
    def main(Y: T.Tensor((4,), T.int32)):
        with T.Kernel(1, threads=128) as _:
            bar = T.alloc_barrier(128)
            for r in T.serial(4):
                T.barrier_arrive(bar)
                T.barrier_wait(bar, r)  # E:parity_value
                Y[r] = r

    raises(TileLangError, "parity_value", lambda: _interp(main)(torch.zeros(4, dtype=torch.int32)),
           "parity 2 is neither 0 nor 1")


def test_a_block_level_statement_between_regions_is_a_meeting_of_all_warpgroups() -> None:
    """TileLang's `copy_gemm_0_1` shape: a copy every warpgroup makes, then each region's own work."""

    @T.prim_func
    def main(X: T.Tensor((4, 256), T.float32), Y: T.Tensor((4, 256), T.float32)):
        with T.Kernel(1, threads=256) as _:
            S = T.alloc_shared((256,), T.float32)
            lo = T.alloc_fragment((128,), T.float32)
            hi = T.alloc_fragment((128,), T.float32)
            for r in T.serial(4):
                T.copy(X[r, 0], S)
                with T.ws(0):
                    for i in T.Parallel(128):
                        lo[i] = S[i] * 2.0
                    T.copy(lo, Y[r, 0])
                with T.ws(1):
                    for i in T.Parallel(128):
                        hi[i] = S[128 + i] * 3.0
                    T.copy(hi, Y[r, 128])

    x = torch.randn(4, 256)
    y = torch.zeros(4, 256)
    _interp(main)(x, y)
    torch.testing.assert_close(y, torch.cat([x[:, :128] * 2, x[:, 128:] * 3], 1))


# ---- frontend errors ----------------------------------------------------------------------------

def _kernel(body: str, threads: int = 256) -> None:
    """Trace a kernel whose T.Kernel body is ``body`` (a name of a helper below)."""

    @T.prim_func
    def main(A: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=threads) as _:
            BODIES[body](A)

    return main


def _bad_id(A):
    with T.ws(2):  # E:bad_id
        T.clear(A[0:128])


def _no_id(A):
    with T.ws():  # E:no_id
        pass


def _symbolic_id(A):
    with T.ws(A[0]):  # E:symbolic_id
        pass


def _nested(A):
    with T.ws(0):
        with T.ws(1):  # E:nested
            pass


def _in_parallel(A):
    for i in T.Parallel(4):
        with T.ws(0):  # E:in_parallel
            A[i] = 0.0


def _parity(A):
    bar = T.alloc_barrier(128)
    T.barrier_wait(bar, 2)  # E:parity


def _no_parity(A):
    bar = T.alloc_barrier(128)
    T.barrier_wait(bar)  # E:no_parity


def _not_a_barrier(A):
    S = T.alloc_shared((4,), T.float32)
    T.barrier_arrive(S)  # E:not_a_barrier


def _index_without_list(A):
    T.mbarrier_arrive(0)  # E:index_without_list


def _index_range(A):
    bars = T.alloc_barrier([128, 128])
    T.barrier_arrive(bars[2])  # E:index_range


def _bad_count(A):
    T.alloc_barrier(0)  # E:bad_count


def _barrier_in_region(A):
    with T.ws(0):
        T.alloc_barrier(128)  # E:barrier_in_region


def _arrive_in_parallel(A):
    bar = T.alloc_barrier(128)
    for _ in T.Parallel(4):
        T.barrier_arrive(bar)  # E:arrive_in_parallel


def _list_twice(A):
    T.create_list_of_mbarrier(128)
    T.create_list_of_mbarrier(128)  # E:list_twice


def _barrier_buffer(A):
    T.alloc_buffer((1,), T.uint64, scope="shared.barrier")  # E:barrier_buffer


BODIES = {f.__name__[1:]: f for f in (_bad_id, _no_id, _symbolic_id, _nested, _in_parallel, _parity, _no_parity,
                                      _not_a_barrier, _index_without_list, _index_range, _bad_count,
                                      _barrier_in_region, _arrive_in_parallel, _list_twice, _barrier_buffer)}


@pytest.mark.parametrize("tag, exc, words", [
    ("bad_id", TileLangSyntaxError, ["warpgroup id 2 is out of range", "2 warpgroup(s), ids 0..1"]),
    ("no_id", TileLangSyntaxError, ["T.ws() names no warpgroup"]),
    ("symbolic_id", TileLangTypeError, ["is not a Python int"]),
    ("nested", TileLangSyntaxError, ["cannot be nested", "inside the T.ws(0) region"]),
    ("in_parallel", TileLangSyntaxError, ["T.ws inside a T.Parallel loop"]),
    ("parity", TileLangSyntaxError, ["parity 2 is neither 0 nor 1", "k % 2"]),
    ("no_parity", TileLangSyntaxError, ["needs the parity"]),
    ("not_a_barrier", TileLangTypeError, ["T.barrier_arrive: `", "is not a barrier"]),
    ("index_without_list", TileLangSyntaxError, ["no T.create_list_of_mbarrier list"]),
    ("index_range", TileLangSyntaxError, ["barrier index 2 is out of range", "holds 2"]),
    ("bad_count", TileLangSyntaxError, ["arrive_count=0 must be a positive Python int"]),
    ("barrier_in_region", TileLangSyntaxError, ["inside a T.ws region, loop or if"]),
    ("arrive_in_parallel", TileLangSyntaxError, ["T.barrier_arrive inside a T.Parallel loop"]),
    ("list_twice", TileLangSyntaxError, ["called twice"]),
    ("barrier_buffer", TileLangSyntaxError, ["use T.alloc_barrier"]),
])
def test_frontend_errors_name_the_line(tag: str, exc: type, words: list[str]) -> None:
    raises(exc, tag, lambda: _kernel(tag), *words)


def test_threads_that_are_not_whole_warpgroups() -> None:
    def body(A):
        with T.ws(0):  # E:partial_group
            pass

    BODIES["partial_group"] = body
    raises(TileLangSyntaxError, "partial_group", lambda: _kernel("partial_group", threads=192),
           "whole warpgroups of 128 threads", "threads=192")


def test_outside_a_kernel() -> None:
    def ws_outside():
        @T.prim_func
        def main(A: T.Tensor((128,), T.float32)):
            with T.ws(0):  # E:ws_outside
                pass

        return main

    def barrier_outside():
        @T.prim_func
        def main(A: T.Tensor((128,), T.float32)):
            T.alloc_barrier(128)  # E:barrier_outside

        return main

    raises(TileLangSyntaxError, "ws_outside", ws_outside, "T.ws must be used inside `with T.Kernel(...)`")
    raises(TileLangSyntaxError, "barrier_outside", barrier_outside, "inside `with T.Kernel(...)`")


# ---- verifier errors ----------------------------------------------------------------------------

def _verify(fn: object) -> None:
    tilelang.compile(fn, target="interp")


@pytest.mark.parametrize("outside, words", [(True, "used in T.ws(1), but also outside the T.ws regions"),
                                             (False, "used in T.ws(1), but also in T.ws(0)")])
def test_a_fragment_belongs_to_the_warpgroups_of_its_region(outside: bool, words: str) -> None:
    @T.prim_func
    def main(A: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=256) as _:
            F = T.alloc_fragment((128,), T.float32)
            if outside:
                T.clear(F)
            else:
                with T.ws(0):
                    T.clear(F)
            with T.ws(1):
                T.copy(F, A)  # E:fragment_use

    raises(VerificationError, "fragment_use", lambda: _verify(main), f"fragment `F` is {words}")


def test_a_barrier_used_as_data() -> None:
    @T.prim_func
    def read(A: T.Tensor((1,), T.uint64)):
        with T.Kernel(1, threads=128) as _:
            bar = T.alloc_barrier(128)
            A[0] = bar[0]  # E:barrier_read

    @T.prim_func
    def store(A: T.Tensor((1,), T.uint64)):
        with T.Kernel(1, threads=128) as _:
            bar = T.alloc_barrier(128)
            bar[0] = A[0]  # E:barrier_store

    raises(VerificationError, "barrier_read", lambda: _verify(read), "barrier `bar` is used as data")
    raises(VerificationError, "barrier_store", lambda: _verify(store), "barrier `bar` is used as data")


def test_thread_queries_do_not_mix_with_regions() -> None:
    @T.prim_func
    def main(A: T.Tensor((256,), T.int32)):
        with T.Kernel(1, threads=256) as _:
            with T.ws(0):
                A[0] = 1
            A[T.get_thread_binding()] = 2  # E:simt

    raises(VerificationError, "simt", lambda: _verify(main), "thread queries and warp operations")

    @T.prim_func
    def barriers_only(A: T.Tensor((128,), T.int32)):
        with T.Kernel(1, threads=128) as _:
            bar = T.alloc_barrier(128)
            A[T.get_thread_binding()] = 2  # E:simt_barrier
            T.barrier_arrive(bar)

    raises(VerificationError, "simt_barrier", lambda: _verify(barriers_only), "T.ws regions or barriers")


def test_sync_grid_does_not_mix_with_regions() -> None:
    @T.prim_func
    def main(A: T.Tensor((2,), T.int32)):
        with T.Kernel(2, threads=256) as bx:
            with T.ws(0):
                A[bx] = 1
            T.sync_grid()  # E:grid

    raises(VerificationError, "grid", lambda: _verify(main), "T.sync_grid() in a kernel with T.ws regions")


# ---- CUDA (no GPU: sources, nvcc, SASS) -------------------------------------------------------

def test_cuda_regions_are_warpgroup_branches_with_their_own_barriers() -> None:
    from tests.kernels import warp_specialize as W
    from tests.null.cuda_helpers import cuda_source

    src, ctx = cuda_source(W.gemm_producer_consumer.get_ir(256, 256, 128), "sm_90a")
    src = src[src.index('extern "C"'):]  # the kernel, not the headers
    assert "const int tx = threadIdx.x & 127;" in src
    assert "if (tlx_ws_wg() == 1) {" in src and "if (tlx_ws_wg() == 0) {" in src
    assert src.count("tlx_ws_bar_init(") == 2 and "tlx_ws_bar_fence_init();" in src
    assert "tlx_ws_wait(compute_done_s + (0) * 8, (k + 1) & 1);" in src
    assert "tlx_ws_arrive(data_ready_s + (0) * 8);" in src
    assert "tlx_wgmma_" in src  # the consumer's gemm is wgmma on sm_90a
    body = src[src.index("if (tlx_ws_wg() == 1) {"):]
    assert "__syncthreads()" not in body  # no block barrier between (or inside) the regions
    assert "tlx_ws_sync(2, 128);" in body  # warpgroup 1's named barrier orders its own tile writes
    assert "cp_async" not in src and "tlx_tma" not in src  # the kernel's mbarriers are its pipeline
    assert "cuda.ws" not in ctx.data  # no automatic warp specialization


def test_cuda_statements_outside_regions_run_on_warpgroup_0() -> None:
    from tests.kernels import warp_specialize as W
    from tests.null.cuda_helpers import cuda_source

    src, _ = cuda_source(W.gemm_regions_in_loop.get_ir(128, 256, 256, block_K=64), "sm_80")
    loop = src[src.index("for (int ko = 0;"):]
    assert loop.index("if (tlx_ws_wg() == 1) {") < loop.index("if (tlx_ws_wg() == 0) {")
    assert "__syncthreads()" not in loop
    assert "tlx_ws_wait(mbarrier_s + (0 + (ko & 1)) * 8, ko >> 1);" in loop


def consumer_in_a_block_loop(rounds: int) -> object:
    """The producer region loops by itself; the consumer region sits in a loop of the block."""

    @T.prim_func
    def main(X: T.Tensor((rounds, 128), T.float32), Y: T.Tensor((rounds, 128), T.float32)):
        with T.Kernel(1, threads=256) as _:
            S = T.alloc_shared((2, 128), T.float32)
            full = T.alloc_barrier([128, 128])
            empty = T.alloc_barrier([128, 128])
            with T.ws(1):
                for r in T.serial(rounds):
                    T.barrier_wait(empty[r % 2], (r // 2 + 1) % 2)
                    T.copy(X[r, 0], S[r % 2, :])
                    T.barrier_arrive(full[r % 2])
            for r in T.serial(rounds):
                with T.ws(0):
                    T.barrier_wait(full[r % 2], (r // 2) % 2)
                    for i in T.Parallel(128):
                        Y[r, i] = S[r % 2, i] + 1.0
                    T.barrier_arrive(empty[r % 2])

    return main


def test_no_block_barrier_between_a_producer_and_a_consumer_in_a_later_loop() -> None:
    """The consumer's loop reads what the producer region writes, but a __syncthreads() before the
    loop would wait for the producer to finish, which waits for the consumer: none may be put."""
    from tests.null.cuda_helpers import cuda_source

    x, y = torch.randn(6, 128), torch.zeros(6, 128)
    _interp(consumer_in_a_block_loop(6))(x, y)
    torch.testing.assert_close(y, x + 1)
    src, _ = cuda_source(consumer_in_a_block_loop(6), "sm_80")
    assert "__syncthreads" not in src[src.index("if (tlx_ws_wg() == 1) {"):]


def test_cuda_barriers_of_a_block_statement_are_warpgroup_0_s() -> None:
    """A reduction across warps outside the regions runs on warpgroup 0, so its barriers join
    warpgroup 0 only (a __syncthreads inside `if (warpgroup == 0)` would hang the block)."""
    from tests.kernels import warp_specialize as W
    from tests.null.cuda_helpers import cuda_source

    src, _ = cuda_source(W.column_sums_beside_regions.get_ir(64, 128), "sm_80")
    start = src.index("{  // warpgroup 0")
    block = src[start:src.index("__syncthreads();", start)]  # the meeting's barrier follows it
    assert "if (tlx_ws_wg() == 0) {" in block and "tlx_ws_sync(1, 128);" in block


def test_sync_threads_in_a_region_joins_the_region_s_warpgroup() -> None:
    from tests.null.cuda_helpers import cuda_source

    @T.prim_func
    def main(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=256) as _:
            S = T.alloc_shared((128,), T.float32)
            with T.ws(1):
                for i in T.Parallel(128):
                    S[i] = A[i] * 2.0
                T.sync_threads()
                for i in T.Parallel(128):
                    B[i] = S[127 - i]

    a, b = torch.randn(128), torch.zeros(128)
    _interp(main)(a, b)
    torch.testing.assert_close(b, (a * 2).flip(0))
    src, _ = cuda_source(main, "sm_80")
    region = src[src.index("if (tlx_ws_wg() == 1) {"):]
    assert "tlx_ws_sync(2, 128);" in region and "__syncthreads" not in region


def test_cuda_refuses_a_multi_dimensional_block() -> None:
    from tests.null.cuda_helpers import cuda_source
    from tilelang_x.core_ir.errors import NotSupportedError

    @T.prim_func
    def main(A: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=(128, 2)) as _:  # E:two_dims
            with T.ws(1):
                T.clear(A[0:128])

    raises(NotSupportedError, "two_dims", lambda: cuda_source(main, "sm_80"), "1-D block", "threads=256")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_every_ws_suite_kernel_builds_with_nvcc(arch: str) -> None:
    """tests/null/test_cuda_codegen.py builds them with the default compiler (NVRTC); nvcc too."""
    from tests.null.cuda_helpers import cuda_source
    from tests.null.cuda_suite_funcs import suite_funcs
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc

    if find_nvcc() is None:
        pytest.skip("no nvcc here")
    funcs = {name: f for name, f in suite_funcs().items() if name.startswith("ws_")}
    assert len(funcs) >= 7
    for f in funcs.values():
        src, ctx = cuda_source(f(), arch)
        binary = compile_cuda(src, arch, kernel_name=ctx.data["cuda.meta"].kernel_name,
                              options={"compiler": "nvcc"})
        assert binary.cubin


def test_cuda_sass_has_the_mbarrier_instructions() -> None:
    from tests.kernels import warp_specialize as W
    from tests.null.cuda_helpers import sass_ops

    pattern = r"\b(SYNCS\.[A-Z0-9_.]+|ATOMS\.ARRIVE[A-Z0-9_.]*|HGMMA)\b"
    hopper = sass_ops(W.gemm_producer_consumer.get_ir(256, 256, 128), pattern, "sm_90a")
    assert {"SYNCS.EXCH.64", "SYNCS.ARRIVE.TRANS64.A1T0", "SYNCS.PHASECHK.TRANS64.TRYWAIT", "HGMMA"} <= set(hopper)
    ampere = sass_ops(W.gemm_producer_consumer.get_ir(256, 256, 128), pattern, "sm_80")
    assert "ATOMS.ARRIVE.64" in ampere and not any(op.startswith("SYNCS") for op in ampere)


def test_cuda_a_region_of_several_warpgroups_runs_its_tile_ops_on_the_first() -> None:
    """Its copy runs on warpgroup 0 for both, and both wait for it (their named barrier 9) before
    they arrive: otherwise warpgroup 1's arrivals could complete a phase before the copy."""
    from tests.kernels import warp_specialize as W
    from tests.null.cuda_helpers import cuda_source

    src, ctx = cuda_source(W.scale_rows_producer_consumer.get_ir(128, 64, producers=2), "sm_80")
    region = src[src.index("if ((tlx_ws_wg() >= 0) && (tlx_ws_wg() <= 1)) {"):src.index("if (tlx_ws_wg() == 2) {")]
    copy = region.index("if (tlx_ws_wg() == 0) {")
    assert copy < region.index("tlx_ws_sync(9, 256);") < region.index("tlx_ws_arrive(loaded_s")
    assert ctx.data["cuda.manual_ws_sets"] == {(0, 1): 9}


def test_cuda_refuses_more_sets_of_warpgroups_than_named_barriers() -> None:
    from tests.null.cuda_helpers import cuda_source
    from tilelang_x.core_ir.errors import NotSupportedError

    @T.prim_func
    def main(A: T.Tensor((1024,), T.float32)):
        with T.Kernel(1, threads=1024) as _:
            for g in [1, 2, 3, 4, 5, 6, 7]:
                with T.ws(0, g):
                    A[g] = 1.0
            with T.ws(1, 2):  # E:eighth_set
                A[0] = 1.0

    raises(NotSupportedError, "eighth_set", lambda: cuda_source(main, "sm_80"), "named barriers for 7 sets")
