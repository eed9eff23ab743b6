"""Hand-written asynchronous copies: TMA copies and transaction counts (``T.tma_copy``,
``T.mbarrier_expect_tx``, ``T.mbarrier_arrive_expect_tx``, ``T.fence_proxy_async``) and cp.async
groups (``T.async_copy``, ``T.ptx_commit_group``, ``T.ptx_wait_group``): the interpreter against
torch, the barrier's transaction bytes and the deadlock they can make, copies that land only at
their wait, the errors at the user's line, and the CUDA code (compiled for sm_90a and sm_80 where a
compiler is installed)."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import tma_copy as kernels
from tests.null.cuda_helpers import cuda_source, sass_text
from tests.null.located import located_errors
from tilelang_x.core_ir.errors import (
    DeadlockError,
    NotSupportedError,
    ShapeMismatchError,
    TileLangError,
    TileLangSyntaxError,
    TileLangTypeError,
    VerificationError,
)
from tilelang_x.plugins.interp.team import MBarriers

where, raises = located_errors(__file__)


def _interp(func: object) -> object:
    return tilelang.compile(func, target="interp")


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(torch.float16)


# ---- the barrier's transaction bytes ------------------------------------------------------------

def test_a_phase_waits_for_its_expected_bytes_after_its_arrivals() -> None:
    bars = MBarriers([2])
    bars.expect(0, 64)
    assert bars.arrive(0, 2) == 0
    assert not bars.completed(0, 0) and bars.missing[0] == 0
    assert bars.arrive(0, 1) == 1  # an arrival too many while the bytes are out
    bars.complete(0, 48)
    assert not bars.completed(0, 0)
    bars.complete(0, 16)
    assert bars.completed(0, 0) and bars.missing[0] == 2 and bars.tx[0] == 0


def test_bytes_that_land_before_they_are_expected_balance_too() -> None:
    bars = MBarriers([1])
    bars.complete(0, 32)
    bars.arrive(0, 1)
    assert not bars.completed(0, 0)
    bars.expect(0, 32)
    bars.complete(0, 0)
    assert bars.completed(0, 0)


# ---- the interpreter against torch --------------------------------------------------------------

@pytest.mark.parametrize(("M", "N", "K", "options"), [
    (256, 256, 256, {}),
    (200, 136, 320, {"block_N": 64}),  # partial tiles, a k-loop that wraps the 3-stage ring
    (128, 128, 192, {"consumers": 2, "num_stages": 2}),  # a consumer region of two warpgroups
    (64, 128, 128, {"block_M": 64, "block_K": 32, "num_stages": 2}),
])
def test_warp_specialized_ring_gemm_matches_torch(M: int, N: int, K: int, options: dict[str, int]) -> None:
    a, b = _randn(M, K, seed=1), _randn(K, N, seed=2)
    c = _interp(kernels.gemm_tma_ring.get_ir(M, N, K, **options))(a, b)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)


@pytest.mark.parametrize("num_stages", [2, 3])
def test_tilelang_pipelined_tma_copy_matches_torch(num_stages: int) -> None:
    a, b = _randn(256, 96, seed=3), _randn(96, 128, seed=4)
    c = _interp(kernels.gemm_tma_pipelined.get_ir(256, 128, 96, num_stages=num_stages))(a, b)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)


def test_emit_arrive_completes_a_barrier_of_one() -> None:
    x = torch.randn(200, 64)
    torch.testing.assert_close(_interp(kernels.rows_arrive_expect_tx.get_ir(200, 64))(x), x * 2)


def test_bytes_expected_beyond_the_copies_are_a_deadlock_naming_the_wait() -> None:
    with pytest.raises(DeadlockError) as info:
        _interp(kernels.rows_arrive_expect_tx.get_ir(128, 64, extra_bytes=256))(torch.zeros(128, 64))
    text = str(info.value)
    assert "tma_copy.py:" in text and "T.barrier_wait(bar[0], 0)" in text
    assert "256 expected transaction bytes" in text and "on a GPU the kernel would hang" in text


def _arrive_expect_tx_rows(extra: int) -> object:
    """The producer arrives with T.mbarrier_arrive_expect_tx (count 1) and copies with
    T.tma_copy, whose bytes balance themselves: expecting more than 0 bytes hangs."""

    @T.prim_func
    def main(X: T.Tensor((128, 32), T.float32), Y: T.Tensor((128, 32), T.float32)):
        with T.Kernel(1, threads=256) as _:
            S = T.alloc_shared((128, 32), T.float32)
            full = T.alloc_barrier(1)
            with T.ws(1):
                T.tma_copy(X[0, 0], S, barrier=full)
                T.mbarrier_arrive_expect_tx(full, extra)
            with T.ws(0):
                T.barrier_wait(full, 0)  # E:arrive_expect_wait
                for i, j in T.Parallel(128, 32):
                    Y[i, j] = S[i, j] + 1.0

    return main


def test_arrive_expect_tx_of_no_bytes_is_one_arrival() -> None:
    x = torch.randn(128, 32)
    y = torch.zeros(128, 32)
    _interp(_arrive_expect_tx_rows(0))(x, y)
    torch.testing.assert_close(y, x + 1)


def test_arrive_expect_tx_of_bytes_no_copy_delivers_is_a_deadlock() -> None:
    raises(DeadlockError, "arrive_expect_wait",
           lambda: _interp(_arrive_expect_tx_rows(64))(torch.zeros(128, 32), torch.zeros(128, 32)),
           "64 expected transaction bytes", "warpgroup 0 at T.barrier_wait")


def test_arrivals_beyond_the_count_while_bytes_are_out_fail_at_the_arrive() -> None:
    @T.prim_func
    def main(Y: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            bar = T.alloc_barrier(128)
            T.mbarrier_expect_tx(bar, 16)
            T.barrier_arrive(bar)
            T.barrier_arrive(bar)  # E:extra_arrive
            Y[0] = 1.0

    raises(TileLangError, "extra_arrive", lambda: _interp(main)(torch.zeros(4)),
           "128 arrival(s) at barrier `bar[0]`", "16 expected transaction bytes")


# ---- TMA stores ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("M", "N", "K"), [(256, 256, 128), (200, 136, 96)])
def test_tma_store_gemm_matches_torch(M: int, N: int, K: int) -> None:
    a, b = _randn(M, K, seed=7), _randn(K, N, seed=8)
    c = _interp(kernels.gemm_tma_store.get_ir(M, N, K))(a, b)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)


_NO_DIRECT_STORE = {"tlx.direct_store": False}  # keep the kernel's own shared tile and its TMA store


def test_sm90a_tma_store_is_fenced_issued_once_waited_and_drained() -> None:
    src, ctx = cuda_source(kernels.gemm_tma_store.get_ir(256, 256, 256), "sm_90a", _NO_DIRECT_STORE)
    body = src[src.index('extern "C"'):]
    fence, store = body.index("tlx_ws_fence_proxy_async();"), body.index("tlx_tma_store_2d(C_tmap")
    assert fence < store and body.count("tlx_tma_store_2d(C_tmap") == 2  # two 64-column panels
    assert store < body.index("tlx_tma_store_commit();") < body.index("tlx_ws_bulk_wait<0, true>();")
    assert body.rstrip().endswith("tlx_tma_store_wait_read0();\n  }\n}")  # none in flight at exit
    assert any(s.arg == 2 for s in ctx.data["cuda.tmaps"])


def test_sm90a_tma_store_sass_has_utmastg() -> None:
    assert "UTMASTG" in sass_text(kernels.gemm_tma_store.get_ir(256, 256, 256), configs=_NO_DIRECT_STORE)


def test_sm80_tma_store_is_an_ordinary_store() -> None:
    src, _ = cuda_source(kernels.gemm_tma_store.get_ir(256, 256, 256), "sm_80")
    body = src[src.index('extern "C"'):]
    assert "tlx_tma_store" not in body and "tlx_ws_bulk_wait" not in body


# ---- cp.async groups ---------------------------------------------------------------------------

@pytest.mark.parametrize(("M", "N", "K"), [(128, 128, 128), (100, 72, 96), (64, 64, 32)])
def test_double_buffered_async_copy_gemm_matches_torch(M: int, N: int, K: int) -> None:
    a, b = _randn(M, K, seed=5), _randn(K, N, seed=6)
    c = _interp(kernels.gemm_async_copy.get_ir(M, N, K))(a, b)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)


def _read_at(wait: int | None, commit: bool = False) -> object:
    """Copies row 0 then row 1 of X into S (two groups) and reads S after ``T.ptx_wait_group(wait)``
    (none: no wait); ``commit`` adds an empty group after them."""

    @T.prim_func
    def main(X: T.Tensor((2, 128), T.float32), Y: T.Tensor((2, 128), T.float32)):
        with T.Kernel(1, threads=128) as _:
            S = T.alloc_shared((2, 128), T.float32)
            T.fill(S, -1.0)
            T.async_copy(X[0, 0], S[0, :])
            T.async_copy(X[1, 0], S[1, :])
            if commit:
                T.ptx_commit_group()
            if wait is not None:
                T.ptx_wait_group(wait)
            T.copy(S, Y)

    return main


@pytest.mark.parametrize(("wait", "commit", "landed"), [
    (None, False, 0), (2, False, 0), (1, False, 1), (0, False, 2), (1, True, 2), (2, True, 1),
])
def test_a_copy_lands_once_its_group_is_waited_for(wait: int | None, commit: bool, landed: int) -> None:
    x = torch.randn(2, 128)
    y = torch.zeros(2, 128)
    _interp(_read_at(wait, commit))(x, y)
    want = torch.full((2, 128), -1.0)
    want[:landed] = x[:landed]
    torch.testing.assert_close(y, want)


def test_cuda_async_copy_is_cp_async_with_its_groups() -> None:
    for arch in ("sm_80", "sm_90a"):
        src, _ = cuda_source(kernels.gemm_async_copy.get_ir(256, 256, 256), arch)
        body = src[src.index('extern "C"'):]
        assert "tlx_cp_async16(" in body and body.count("tlx_cp_async_commit();") == 4
        assert "TLX_CP_ASYNC_WAIT(2);" in body and "TLX_CP_ASYNC_WAIT(0);" in body
        wait = body.index("TLX_CP_ASYNC_WAIT(2);")
        assert "__syncthreads();" in body[wait:wait + 80]  # every thread sees the others' copies


# ---- frontend and verifier errors ---------------------------------------------------------------

def _kernel(body: str) -> object:
    @T.prim_func
    def main(A: T.Tensor((256, 64), T.float16), F: T.Tensor((256, 64), T.float32)):
        with T.Kernel(1, threads=256) as _:
            BODIES[body](A, F)

    return main


def _no_barrier(A, F):
    S = T.alloc_shared((64, 64), T.float16)
    T.tma_copy(A[0, 0], S)  # E:no_barrier


def _not_a_barrier(A, F):
    S = T.alloc_shared((64, 64), T.float16)
    T.tma_copy(A[0, 0], S, barrier=S)  # E:not_a_barrier


def _dtype(A, F):
    S = T.alloc_shared((64, 64), T.float16)
    bar = T.alloc_barrier(128)
    T.tma_copy(F[0:64, 0:64], S, barrier=bar)  # E:dtype


def _shape(A, F):
    S = T.alloc_shared((64, 64), T.float16)
    bar = T.alloc_barrier(128)
    T.tma_copy(A[0:32, 0:64], S, barrier=bar)  # E:shape


def _store(A, F):
    S = T.alloc_shared((64, 64), T.float16)
    bar = T.alloc_barrier(128)
    T.tma_copy(S, A[0, 0], barrier=bar)  # E:store


def _store_arrive(A, F):
    S = T.alloc_shared((64, 64), T.float16)
    T.tma_copy(S, A[0, 0], annotations={"emit_arrive": 1})  # E:store_arrive


def _store_wait_negative(A, F):
    T.tma_store_wait(-1)  # E:store_wait_negative


def _to_fragment(A, F):
    R = T.alloc_fragment((64, 64), T.float16)
    bar = T.alloc_barrier(128)
    T.tma_copy(A[0, 0], R, barrier=bar)  # E:to_fragment


def _multicast(A, F):
    S = T.alloc_shared((64, 64), T.float16)
    bar = T.alloc_barrier(128)
    T.tma_copy(A[0, 0], S, barrier=bar, cluster_mask=3)  # E:multicast


def _annotation(A, F):
    S = T.alloc_shared((64, 64), T.float16)
    bar = T.alloc_barrier(128)
    T.tma_copy(A[0, 0], S, barrier=bar, annotations={"is_gather4": True})  # E:annotation


def _negative_tx(A, F):
    bar = T.alloc_barrier(128)
    T.mbarrier_expect_tx(bar, -4)  # E:negative_tx


def _tx_in_parallel(A, F):
    bar = T.alloc_barrier(128)
    for i in T.Parallel(4):
        T.mbarrier_expect_tx(bar, 4)  # E:tx_in_parallel
        F[i, 0] = 0.0


def _fence_in_parallel(A, F):
    for i in T.Parallel(4):
        T.fence_proxy_async()  # E:fence_in_parallel
        F[i, 0] = 0.0


def _async_to_fragment(A, F):
    R = T.alloc_fragment((64, 64), T.float16)
    T.async_copy(A[0, 0], R)  # E:async_to_fragment


def _wait_symbolic(A, F):
    for k in T.serial(2):
        T.ptx_wait_group(k)  # E:wait_symbolic


def _wait_negative(A, F):
    T.ptx_wait_group(-1)  # E:wait_negative


def _tma_with_thread_query(A, F):
    S = T.alloc_shared((64, 64), T.float16)
    bar = T.alloc_barrier(128)
    T.tma_copy(A[0, 0], S, barrier=bar)
    F[T.get_thread_binding(), 0] = 1.0


BODIES = {f.__name__[1:]: f for f in (_no_barrier, _not_a_barrier, _dtype, _shape, _store, _store_arrive,
                                     _store_wait_negative, _to_fragment, _multicast,
                                     _annotation, _negative_tx, _tx_in_parallel, _fence_in_parallel,
                                     _async_to_fragment, _wait_symbolic, _wait_negative, _tma_with_thread_query)}


@pytest.mark.parametrize(("body", "exc", "words"), [
    ("no_barrier", TileLangSyntaxError, "needs barrier="),
    ("not_a_barrier", TileLangTypeError, "is not a barrier"),
    ("dtype", TileLangTypeError, "cannot convert: `F` is float32 but"),
    ("shape", ShapeMismatchError, "shape mismatch"),
    ("store", TileLangSyntaxError, "(a TMA store) takes no barrier="),
    ("store_arrive", TileLangSyntaxError, "emit_arrive is for loads"),
    ("store_wait_negative", TileLangSyntaxError, "must be a non-negative Python int"),
    ("to_fragment", TileLangTypeError, "into a shared tile (or stores one), but `A` is global and"),
    ("multicast", TileLangSyntaxError, "T.tma_copy(cluster_mask=3) in a kernel launched without clusters"),
    ("annotation", NotSupportedError, "'is_gather4'"),
    ("negative_tx", TileLangSyntaxError, "byte count -4 is negative"),
    ("tx_in_parallel", TileLangSyntaxError, "inside a T.Parallel loop"),
    ("fence_in_parallel", TileLangSyntaxError, "inside a T.Parallel loop"),
    ("async_to_fragment", TileLangTypeError, "T.async_copy loads a global tensor into a shared tile"),
    ("wait_symbolic", TileLangSyntaxError, "must be a non-negative Python int"),
    ("wait_negative", TileLangSyntaxError, "must be a non-negative Python int"),
])
def test_misuse_names_the_line(body: str, exc: type, words: str) -> None:
    raises(exc, body, lambda: _kernel(body), words)


def test_outside_a_kernel_names_the_line() -> None:
    def build() -> object:
        @T.prim_func
        def main(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16)):
            T.tma_copy(A, B, barrier=B)  # E:outside

        return main

    raises(TileLangSyntaxError, "outside", build, "T.tma_copy must be used inside `with T.Kernel")


@pytest.mark.parametrize("name", ["ptx_cp_async", "tma_load", "create_tma_descriptor"])
def test_the_explicit_async_builtins_left_out_say_what_to_write(name: str) -> None:
    with pytest.raises(NotSupportedError, match="T.tma_copy|T.async_copy") as info:
        getattr(T, name)
    assert f"T.{name} is not supported by tilelang-x" in str(info.value)


def test_a_thread_query_beside_a_tma_copy_is_refused() -> None:
    with pytest.raises(VerificationError, match="thread queries and warp operations are not supported"):
        _interp(_kernel("tma_with_thread_query"))


# ---- CUDA --------------------------------------------------------------------------------------

def _ring_ir() -> object:
    return kernels.gemm_tma_ring.get_ir(256, 256, 256)


def test_sm90a_issues_tma_loads_and_expects_their_bytes_once() -> None:
    src, ctx = cuda_source(_ring_ir(), "sm_90a")
    assert "cp.async.bulk.tensor" in src and "mbarrier.expect_tx" in src
    # A: one 128 x 64 box; B: two panels of 64 columns; each copy expects its 16 KB once
    assert src.count("tlx_tma_load_2d(A_s_s") == 1 and src.count("tlx_tma_load_2d(B_s_s") == 2
    assert src.count("tlx_ws_expect_tx(full_s") == 2 and ", 16384u);" in src
    assert src.count("if ((tlx_ws_wg() == 1) && (tx == 0))") == 2
    producer = src[src.index("if (tlx_ws_wg() == 1) {"):]
    assert producer.index("tlx_ws_sync(2, 128);") < producer.index("tlx_tma_load_2d(")  # one barrier a round
    assert "tlx_wgmma_ss_f16" in src  # the tiles' TMA panels are wgmma's
    assert len(ctx.data["cuda.tmaps"]) == 2


def test_sm90a_orders_ordinary_reads_of_a_tile_before_its_next_tma_load() -> None:
    @T.prim_func
    def main(X: T.Tensor((4, 64, 64), T.float32), Y: T.Tensor((4, 64, 64), T.float32)):
        with T.Kernel(1, threads=128) as _:
            S = T.alloc_shared((64, 64), T.float32)
            bar = T.alloc_barrier(128)
            for r in T.serial(4):
                T.tma_copy(X[r, 0, 0], S, barrier=bar)
                T.barrier_arrive(bar)
                T.barrier_wait(bar, r % 2)
                for i, j in T.Parallel(64, 64):
                    Y[r, i, j] = S[i, j] * 2.0

    src, _ = cuda_source(main, "sm_90a")
    body = src[src.index("for (int r = 0;"):]
    assert body.index("__syncthreads();") < body.index("tlx_tma_load_3d(")  # the last round's reads first
    x = torch.randn(4, 64, 64)
    y = torch.zeros(4, 64, 64)
    _interp(main)(x, y)
    torch.testing.assert_close(y, x * 2)


def test_sm90a_compiles_and_its_sass_loads_with_utmaldg() -> None:
    sass = sass_text(_ring_ir())
    assert "UTMALDG" in sass and "SYNCS.ARRIVE" in sass


def test_sm90a_fence_and_arrive_expect_tx() -> None:
    src, _ = cuda_source(kernels.rows_arrive_expect_tx.get_ir(200, 64), "sm_90a")
    assert "tlx_ws_fence_proxy_async();" in src and "tlx_ws_arrive_expect_tx(bar_s" in src
    assert "fence.proxy.async.shared::cta" in src


def test_without_tma_the_copy_is_ordinary() -> None:
    for arch, configs in (("sm_80", None), ("sm_90a", {"tl.disable_tma_lower": True})):
        src, ctx = cuda_source(_ring_ir(), arch, configs)
        body = src[src.index('extern "C"'):]
        assert "tlx_tma_load" not in body and "tlx_ws_expect_tx(" not in body
        assert not ctx.data.get("cuda.tmaps")


def test_sm80_emit_arrive_follows_the_copy() -> None:
    src, _ = cuda_source(kernels.rows_arrive_expect_tx.get_ir(200, 64), "sm_80")
    body = src[src.index('extern "C"'):]
    assert body.index("tlx_copy16(") < body.index("tlx_ws_arrive(bar_s") < body.index("tlx_ws_wait(bar_s")


def test_sm80_refuses_an_expected_transaction_count() -> None:
    with pytest.raises(NotSupportedError, match="transaction counts need sm_90") as info:
        cuda_source(_arrive_expect_tx_rows(0), "sm_80")
    assert "test_tma_copy.py:" in str(info.value)


def test_a_tile_tma_cannot_write_is_refused_on_sm90a() -> None:
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float16), C: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128) as _:
            S = T.alloc_shared((64, 64), T.float16)
            bar = T.alloc_barrier(128)
            T.tma_copy(A[0:32, 0:64], S[0:32, :], barrier=bar)  # E:half_tile
            T.barrier_arrive(bar)
            T.barrier_wait(bar, 0)
            T.copy(S, C)

    raises(NotSupportedError, "half_tile", lambda: cuda_source(main, "sm_90a"), "TMA moves whole tiles")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", ["ring", "ring2", "pipelined", "rows", "async", "store"])
def test_kernels_compile(name: str, arch: str) -> None:
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    if find_nvrtc() is None and find_nvcc() is None:
        pytest.skip("no CUDA compiler here (install nvidia-cuda-nvrtc or nvcc)")
    func = {"ring": _ring_ir, "ring2": lambda: kernels.gemm_tma_ring.get_ir(128, 128, 192, consumers=2, num_stages=2),
            "pipelined": lambda: kernels.gemm_tma_pipelined.get_ir(256, 256, 128),
            "rows": lambda: kernels.rows_arrive_expect_tx.get_ir(200, 64),
            "async": lambda: kernels.gemm_async_copy.get_ir(200, 136, 96),
            "store": lambda: kernels.gemm_tma_store.get_ir(200, 136, 96)}[name]()
    src, ctx = cuda_source(func, arch)
    assert len(compile_cuda(src, arch, kernel_name=ctx.data["cuda.meta"].kernel_name).cubin) > 0
