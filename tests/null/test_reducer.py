"""T.alloc_reducer: the errors of the frontend (each naming its line), the interpreter's handling
of T.Parallel iterations that update the same element, and the CUDA code (sm_80, sm_90a)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source
from tests.null.located import located_errors
from tilelang_x.core_ir.errors import BackendNotImplementedError, TileLangSyntaxError, TileLangTypeError
from tilelang_x.core_ir.tileops import FinalizeReducer, ReducerInit, ReducerUpdate
from tilelang_x.core_ir.visit import walk

where, raises = located_errors(__file__)


def _kernel(body, n=16, m=64, threads=128, dtype=T.float32):
    """A kernel over X [m, n] whose body ``body(X, Y)`` (made a T.macro) runs inside T.Kernel(1)."""
    body = T.macro(body)

    @T.prim_func
    def main(X: T.Tensor((m, n), dtype), Y: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=threads):
            body(X, Y)

    return main


# ---- errors ------------------------------------------------------------------------------------

def test_reading_an_open_reducer_is_an_error():
    def body(X, Y):
        r = T.alloc_reducer((16,), T.float32)
        T.clear(r)
        for i, j in T.Parallel(64, 16):
            r[j] += X[i, j]
        Y[0] = r[0]  # E:read-open
        T.finalize_reducer(r)

    err = raises(TileLangSyntaxError, "read-open", lambda: _kernel(body), "reads reducer `r` while its reduction is "
                 "open")
    assert "T.finalize_reducer(r)" in err.hint


def test_tile_op_on_an_open_reducer_is_an_error():
    def body(X, Y):
        r = T.alloc_reducer((16,), T.float32)
        T.clear(r)
        T.copy(r, Y)  # E:copy-open

    raises(TileLangSyntaxError, "copy-open", lambda: _kernel(body), "T.copy uses reducer `r`")


def test_store_that_is_not_the_reducer_op_is_an_error():
    def plain(X, Y):
        r = T.alloc_reducer((16,), T.float32, op="max")
        T.fill(r, -1e30)
        for i, j in T.Parallel(64, 16):
            r[j] = X[i, j]  # E:plain-store

    def wrong_op(X, Y):
        r = T.alloc_reducer((16,), T.float32, op="max")
        T.fill(r, -1e30)
        for i, j in T.Parallel(64, 16):
            r[j] += X[i, j]  # E:wrong-op

    err = raises(TileLangSyntaxError, "plain-store", lambda: _kernel(plain), "store to reducer `r` (op='max')")
    assert "r[i] = T.max(r[i], v)" in err.hint
    raises(TileLangSyntaxError, "wrong-op", lambda: _kernel(wrong_op), "a reducer is only updated")


def test_update_outside_parallel_or_epoch_is_an_error():
    def block_level(X, Y):
        r = T.alloc_reducer((16,), T.float32)
        T.clear(r)
        r[0] += X[0, 0]  # E:block-level

    def before_open(X, Y):
        r = T.alloc_reducer((16,), T.float32)
        for i, j in T.Parallel(64, 16):
            T.reducer_update(r[j], X[i, j])  # E:before-open

    raises(TileLangSyntaxError, "block-level", lambda: _kernel(block_level), "outside a T.Parallel loop")
    raises(TileLangSyntaxError, "before-open", lambda: _kernel(before_open), "updated outside its reduction")


def test_finalize_rules():
    def in_loop(X, Y):
        r = T.alloc_reducer((16,), T.float32)
        T.clear(r)
        for _k in T.serial(2):
            for i, j in T.Parallel(64, 16):
                r[j] += X[i, j]
            T.finalize_reducer(r)  # E:finalize-in-loop

    def v2_needs_dst(X, Y):
        r = T.alloc_reducer((16,), T.float32)
        T.reducer_init(r)
        T.finalize_reducer(r)  # E:v2-dst

    def dead_after_v2(X, Y):
        r = T.alloc_reducer((16,), T.float32)
        out = T.alloc_fragment((16,), T.float32)
        T.reducer_init(r)
        T.finalize_reducer(r, out)
        T.copy(r, Y)  # E:dead

    def not_open(X, Y):
        r = T.alloc_reducer((16,), T.float32)
        T.finalize_reducer(r)  # E:not-open

    raises(TileLangSyntaxError, "finalize-in-loop", lambda: _kernel(in_loop), "not in the block that opened")
    raises(TileLangSyntaxError, "v2-dst", lambda: _kernel(v2_needs_dst), "needs a destination")
    raises(TileLangSyntaxError, "dead", lambda: _kernel(dead_after_v2), "after T.finalize_reducer(r, dst)")
    raises(TileLangSyntaxError, "not-open", lambda: _kernel(not_open), "is not open")


def test_alloc_and_update_arguments_are_checked():
    def bad_op(X, Y):
        T.alloc_reducer((16,), T.float32, op="mean")  # E:bad-op

    def float_bits(X, Y):
        T.alloc_reducer((16,), T.float32, op="bitor")  # E:float-bits

    def bad_replication(X, Y):
        T.alloc_reducer((16,), T.float32, replication="some")  # E:replication

    def update_not_an_element(X, Y):
        r = T.alloc_reducer((16,), T.float32)
        T.reducer_init(r)
        for i, j in T.Parallel(64, 16):
            T.reducer_update(X[i, j], 1.0)  # E:not-reducer

    raises(TileLangSyntaxError, "bad-op", lambda: _kernel(bad_op), "unknown op 'mean'")
    raises(TileLangTypeError, "float-bits", lambda: _kernel(float_bits), "needs an integer dtype")
    raises(TileLangSyntaxError, "replication", lambda: _kernel(bad_replication), "replication='some'")
    raises(TileLangSyntaxError, "not-reducer", lambda: _kernel(update_not_an_element),
           "expects an element of a reducer")


# ---- IR and interpreter ------------------------------------------------------------------------

def _sums(X, Y):
    r = T.alloc_reducer((16,), T.float32, op="sum")
    T.fill(r, 2.0)
    for i, j in T.Parallel(64, 16):
        if X[i, j] > 0:
            r[j] += X[i, j]
    T.finalize_reducer(r)
    T.copy(r, Y)


def test_frontend_builds_reducer_ops():
    nodes = list(walk(_kernel(_sums).body))
    init = [n for n in nodes if isinstance(n, ReducerInit)]
    updates = [n for n in nodes if isinstance(n, ReducerUpdate)]
    assert len(init) == 1 and init[0].kind == "sum" and float(init[0].value.value) == 2.0
    assert len(updates) == 1 and updates[0].kind == "sum"
    assert [n.dst for n in nodes if isinstance(n, FinalizeReducer)] == [None]


def test_interpreter_counts_every_colliding_lane_once_and_the_seed_once():
    x = torch.randn(64, 16)
    y = torch.zeros(16)
    tilelang.compile(_kernel(_sums), target="interp")(x, y)
    # 64 iterations update each element; masked-off lanes (x <= 0) do not count; seed 2.0 once
    torch.testing.assert_close(y, 2.0 + x.clamp(min=0).sum(0))


def _bins(X, Y):
    count = T.alloc_reducer((16,), T.int32, op="sum")
    xors = T.alloc_reducer((16,), T.int32, op="bitxor")
    lo = T.alloc_reducer((16,), T.int32, op="min")
    out = T.alloc_fragment((16,), T.int32)
    T.reducer_init(count, 5)
    T.reducer_init(xors)
    T.reducer_init(lo, 1000)
    for i, j in T.Parallel(64, 16):
        T.reducer_update(count[0], 1)  # all 1024 iterations hit element 0
        T.reducer_update(xors[(i + j) % 3], X[i, j])
        T.reducer_update(lo[j], X[i, j])
    T.finalize_reducer(count, out)
    Y[0] = out[0]
    T.finalize_reducer(xors, out)
    Y[1] = out[0]
    Y[2] = out[1]
    T.finalize_reducer(lo, out)
    Y[3] = out[7]


def test_interpreter_integer_reducers_are_exact():
    g = torch.Generator().manual_seed(5)
    x = torch.randint(0, 1 << 20, (64, 16), generator=g, dtype=torch.int32)
    y = torch.zeros(16, dtype=torch.int32)
    tilelang.compile(_kernel(_bins, dtype=T.int32), target="interp")(x, y)
    flat = [(i + j) % 3 for i in range(64) for j in range(16)]
    xs = x.flatten().tolist()
    x0 = np.bitwise_xor.reduce([v for v, b in zip(xs, flat) if b == 0])
    x1 = np.bitwise_xor.reduce([v for v, b in zip(xs, flat) if b == 1])
    assert y[:4].tolist() == [5 + 64 * 16, x0, x1, min(1000, int(x[:, 7].min()))]


# ---- CUDA --------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_private_copies_and_block_combine(arch):
    src = cuda_source(_kernel(_sums), arch)[0]
    assert "float r[16];" in src
    assert re.search(r"r\[u_\d+\] = \(tx == 0\) \? 2\.0f : 0\.0f;", src)  # the seed once, in thread 0
    for off in (1, 2, 4, 8, 16):
        assert re.search(rf"(red_\d+\[u_\d+\]) = \1 \+ tlx_shfl_xor\(\1, {off}\);", src)
    assert "if ((tx & 31) == 0) {" in src  # one total per warp through shared memory
    assert src.count("// finalize_reducer") == 1


def test_cuda_replicated_iterations_update_once():
    # 16 x 4 iterations over 128 threads: every iteration runs in two threads, only one adds
    def body(X, Y):
        f = T.alloc_fragment((16, 4), T.float32)
        r = T.alloc_reducer((4,), T.float32)
        T.copy(X[0:16, 0:4], f)
        T.clear(r)
        for i, j in T.Parallel(16, 4):
            r[j] += f[i, j]
        T.finalize_reducer(r)
        T.copy(r, Y[0:4])

    src = cuda_source(_kernel(body), "sm_80")[0]
    update = next(line for line in src.splitlines() if "r[" in line and "= r[" in line and "+ f[" in line)
    guard = src.splitlines()[src.splitlines().index(update) - 1]
    assert guard.strip().startswith("if (") and "tx" in guard


def test_cuda_small_block_uses_only_shuffles():
    src = cuda_source(_kernel(_sums, threads=32), "sm_80")[0]
    assert "tlx_shfl_xor" in src and "rdc_ws" not in src


def test_cuda_refuses_large_reducers_and_odd_blocks():
    def big(X, Y):
        r = T.alloc_reducer((512,), T.float32)
        T.clear(r)
        T.finalize_reducer(r)  # E:big

    with pytest.raises(BackendNotImplementedError, match="512 elements"):
        cuda_source(_kernel(big), "sm_80")
    with pytest.raises(BackendNotImplementedError, match="not 48"):
        cuda_source(_kernel(_sums, threads=48), "sm_80")


def test_cuda_reducer_kernels_are_not_warp_specialized():
    from tests.kernels import reducers

    _, ctx = cuda_source(reducers.column_sums_pipelined.get_ir(200, 96), "sm_90a", {"tlx.ws_compute_loops": True})
    assert ctx.data.get("cuda.ws") is None


def test_other_backends_refuse_reducer_kernels():
    for target in ("hip", "metal", "ascend"):
        with pytest.raises(BackendNotImplementedError):
            tilelang.compile(_kernel(_sums), target=target)


def test_interpreter_lane_invariant_atomic_counts_every_lane():
    @T.prim_func
    def main(C: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=128):
            for _i, _j in T.Parallel(8, 4):
                T.atomic_add(C[0], 1)  # the same element and value in all 32 lanes

    c = torch.zeros(1, dtype=torch.int32)
    tilelang.compile(main, target="interp")(c)
    assert c.item() == 32
