# ruff: noqa: F841
"""``T.atomic_add / max / min(dst, value, return_prev=True)``: the previous value of one element,
in the interpreter (block-level, per-iteration, per-thread updates; the race check) and in the
CUDA source (one thread fetches for the block into a shared slot; per-thread updates return into
the thread's variable), with the errors of what is not supported."""

from __future__ import annotations

import re

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import atomic_fetch as K
from tests.null.cuda_helpers import cuda_source
from tests.null.located import located_errors
from tilelang_x import knobs
from tilelang_x.core_ir.errors import (
    BackendNotImplementedError,
    NotSupportedError,
    OutOfBoundsError,
    RaceError,
    ShapeMismatchError,
    TileLangSyntaxError,
    VerificationError,
)

where, raises = located_errors(__file__)


def _interp(func: object) -> object:
    return tilelang.compile(func, target="interp")


# ---- the interpreter ---------------------------------------------------------------------------

def test_every_block_takes_distinct_tickets_from_the_queue() -> None:
    tiles, blocks = 16, 3
    x = torch.randn(tiles * 64)
    counter, owner = torch.zeros(1, dtype=torch.int32), torch.full((tiles,), -1, dtype=torch.int32)
    y, claims = torch.zeros_like(x), torch.zeros(tiles, dtype=torch.int32)
    _interp(K.ticket_queue.get_ir(tiles, blocks))(x, counter, y, owner, claims)
    torch.testing.assert_close(y, x * 2)
    assert bool((claims == 1).all())
    # blocks run one after another here: block 0 takes every tile, each block one ticket past the end
    assert int(counter) == tiles + blocks
    assert torch.equal(owner, torch.zeros(tiles, dtype=torch.int32))


def test_each_parallel_iteration_claims_its_own_slot() -> None:
    n = 300
    x = torch.randn(n)
    count, y = torch.zeros(1, dtype=torch.int32), torch.zeros(n)
    _interp(K.compact_positive.get_ir(n))(x, count, y)
    k = int(count)
    assert k == int((x > 0).sum())
    assert torch.equal(y[:k], x[x > 0])  # iterations update in order here


def test_per_thread_updates_under_a_branch_and_a_block_level_one() -> None:
    blocks = 3
    slots, total = torch.zeros(blocks, 128, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    _interp(K.even_thread_slots.get_ir(blocks))(slots, total)
    assert torch.equal(slots[:, 0::2], torch.arange(64, dtype=torch.int32).expand(blocks, 64))
    assert torch.equal(slots[:, 1::2], torch.full((blocks, 64), -1, dtype=torch.int32))
    assert int(total) == blocks * 64


@pytest.mark.parametrize(("kind", "dtype"), [("max", "float32"), ("min", "float32"), ("max", "int32"),
                                             ("min", "int64")])
def test_max_and_min_return_the_running_value(kind: str, dtype: str) -> None:
    n = 128
    x = torch.randint(-500, 500, (n,), generator=torch.Generator().manual_seed(1)).to(getattr(torch, dtype))
    prev, final = torch.zeros_like(x), torch.zeros(1, dtype=x.dtype)
    _interp(K.running_max.get_ir(n, kind, dtype))(x, prev, final)
    start = torch.tensor([-1000 if kind == "max" else 1000], dtype=x.dtype)
    running = torch.cat([start, x])
    running = torch.cummax(running, 0).values if kind == "max" else torch.cummin(running, 0).values
    assert torch.equal(prev, running[:-1])
    assert torch.equal(final, running[-1:])


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_block_level_add_returns_the_sum_before_it(dtype: str) -> None:
    blocks = 5
    tdt = getattr(torch, dtype)
    x = torch.randint(-2, 3, (blocks, 64)).to(tdt)  # whole row sums: the reduction's order does not matter
    acc, before = torch.zeros(1, dtype=tdt), torch.zeros(blocks, dtype=tdt)
    _interp(K.block_sums_with_prev.get_ir(blocks, dtype=dtype))(x, acc, before)
    sums = x.float().sum(1).to(tdt)
    expect = torch.zeros(blocks, dtype=tdt)
    for b in range(1, blocks):  # added one after another in the dtype
        expect[b] = (expect[b - 1].float() + sums[b - 1].float()).to(tdt)
    torch.testing.assert_close(before, expect, atol=0, rtol=0)
    torch.testing.assert_close(acc, (expect[-1].float() + sums[-1].float()).to(tdt).reshape(1), atol=0, rtol=0)


def test_the_update_runs_once_however_often_its_value_is_used() -> None:
    @T.prim_func
    def main(C: T.Tensor((1,), T.int32), Out: T.Tensor((3,), T.int32)):
        with T.Kernel(1, threads=32):
            old = T.atomic_add(C[0], 5, return_prev=True)
            Out[0] = old
            Out[1] = old + old
            v = T.alloc_var(T.int32)
            v = T.atomic_add(C[0], 1, return_prev=True)  # assigned to a variable: stored there
            Out[2] = v

    c, o = torch.full((1,), 10, dtype=torch.int32), torch.zeros(3, dtype=torch.int32)
    _interp(main)(c, o)
    assert o.tolist() == [10, 20, 15] and int(c) == 16


def test_tickets_do_not_race_with_each_other_but_with_a_plain_read() -> None:
    @T.prim_func
    def tickets(C: T.Tensor((1,), T.int32), Out: T.Tensor((4,), T.int32)):
        with T.Kernel(4, threads=32) as bx:
            Out[bx] = T.atomic_add(C[0], 1, return_prev=True)

    @T.prim_func
    def peek(C: T.Tensor((1,), T.int32), Out: T.Tensor((4,), T.int32)):
        with T.Kernel(4, threads=32) as bx:
            if bx == 0:
                Out[0] = T.atomic_add(C[0], 1, return_prev=True)  # E:fetch
            else:
                Out[bx] = C[0]  # E:plain_read

    with knobs.scope(interp_race_check=True):
        o = torch.zeros(4, dtype=torch.int32)
        _interp(tickets)(torch.zeros(1, dtype=torch.int32), o)
        assert o.tolist() == [0, 1, 2, 3]
        raises(RaceError, "plain_read", lambda: _interp(peek)(torch.zeros(1, dtype=torch.int32), o),
               "block (1) reads `C`[0], which block (0) atomically updates", where("fetch")[:-1])


def test_an_element_out_of_range_is_guarded_or_with_the_guards_off_an_error() -> None:
    @T.prim_func
    def main(C: T.Tensor((4,), T.int32), Out: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=32) as bx:
            # C[bx + 4]: a literal C[4] is refused where it is written, before the interpreter runs
            Out[0] = T.atomic_add(C[bx + 4], 1, return_prev=True)  # E:oob

    c, out = torch.ones(4, dtype=torch.int32), torch.full((1,), 7, dtype=torch.int32)
    _interp(main)(c, out)
    assert out.tolist() == [0] and c.tolist() == [1, 1, 1, 1]  # no update, the safe value
    off = tilelang.compile(main, target="interp", pass_configs={"tl.disable_safe_memory_legalize": True})
    raises(OutOfBoundsError, "oob", lambda: off(c, out), "`C`[4]")


def test_a_shared_element_out_of_range_is_an_error() -> None:
    @T.prim_func
    def main(Out: T.Tensor((1,), T.int32), at: T.int32):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.int32)
            T.fill(S, 0)
            Out[0] = T.atomic_add(S[at], 1, return_prev=True)  # E:shared_oob

    raises(OutOfBoundsError, "shared_oob", lambda: _interp(main)(torch.zeros(1, dtype=torch.int32), 4), "`S`[4]")


# ---- what the frontend refuses ------------------------------------------------------------------

def test_a_region_destination_or_a_tile_value_is_refused() -> None:
    def region() -> None:
        @T.prim_func
        def main(C: T.Tensor((4,), T.int32)):
            with T.Kernel(1, threads=32):
                T.atomic_add(C[0:4], 1, return_prev=True)  # E:region

    def tile() -> None:
        @T.prim_func
        def main(C: T.Tensor((4,), T.float32), V: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=32):
                T.atomic_max(C[0], V, return_prev=True)  # E:tile

    raises(ShapeMismatchError, "region", region, "returns the previous value of one element", "[4]")
    raises(ShapeMismatchError, "tile", tile, "the value is a tile")


def test_other_atomics_and_registers_are_refused() -> None:
    def bitwise() -> None:
        @T.prim_func
        def main(C: T.Tensor((4,), T.int32)):
            with T.Kernel(1, threads=32):
                T.atomic_or(C[0], 1, return_prev=True)  # E:or

    def packed() -> None:
        @T.prim_func
        def main(C: T.Tensor((4,), T.float32), V: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=32):
                T.atomic_addx2(C[0], V[0], return_prev=True)  # E:x2

    def local() -> None:
        @T.prim_func
        def main(C: T.Tensor((4,), T.int32)):
            with T.Kernel(1, threads=32):
                r = T.alloc_local((1,), T.int32)
                T.atomic_add(r[0], 1, return_prev=True)  # E:local

    raises(NotSupportedError, "or", bitwise, "T.atomic_or(..., return_prev=True) is not supported")
    raises(NotSupportedError, "x2", packed, "T.atomic_addx2(..., return_prev=True)")
    raises(TileLangSyntaxError, "local", local, "global or shared")


# ---- CUDA ---------------------------------------------------------------------------------------

def _body(func: object, arch: str = "sm_80") -> str:
    src = cuda_source(func, arch)[0]
    return src[src.index('extern "C"'):]


def test_cuda_block_level_update_is_thread_0s_shared_with_the_block() -> None:
    body = _body(K.ticket_queue.get_ir(16, 3))
    # before the loop and at the end of each iteration: thread 0 updates, the block reads the slot
    fetches = re.findall(r"__syncthreads\(\);\s*if \(tx == 0\) \{\s*(\w+)\[0\] = atomicAdd\(&Counter\[0\], 1\);"
                         r"\s*\}\s*__syncthreads\(\);\s*int (\w+) = \1\[0\];\s*t = \2;", body)
    assert len(fetches) == 2, body
    assert body.count("atomicAdd(&Counter") == 2


def test_cuda_per_iteration_and_per_thread_updates_return_into_the_thread() -> None:
    body = _body(K.compact_positive.get_ir(300))
    # the slot is data: the store to it is guarded (core_ir/safe_access.py)
    assert re.search(r"int (\w+) = 0;\s*\1 = atomicAdd\(&Count\[0\], 1\);\s*if \(\(0 <= \1\) && \(\1 < 300\)\) \{"
                     r"\s*Y\[\1\] = ", body), body
    body = _body(K.even_thread_slots.get_ir(3))
    assert re.search(r"if \(\(tx & 1\) == 0\) \{\s*int (\w+);\s*\1 = atomicAdd\(&S\[0\], 1\);\s*"
                     r"Slots\[\(bx \* 128\) \+ tx\] = \1;", body), body


def test_cuda_replicated_iterations_update_once() -> None:
    @T.prim_func
    def main(C: T.Tensor((1,), T.int32), Out: T.Tensor((64,), T.int32)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(64):  # two threads per iteration
                Out[i] = T.atomic_add(C[0], 1, return_prev=True)

    body = _body(main)
    assert re.search(r"int (\w+) = 0;\s*if \(\(\(tx >> 6\) & 1\) == 0\) \{\s*\1 = atomicAdd\(&C\[0\], 1\);", body), body


@pytest.mark.parametrize(("func", "call"), [
    (lambda: K.running_max.get_ir(128), "tlx_atomic_fetch_max_f(&S[0], X[tx])"),
    (lambda: K.running_max.get_ir(64, "min", "int64"), "atomicMin((long long*)&S[0], X[tx])"),
    (lambda: K.running_max.get_ir(64, "max", "uint32"), "atomicMax(&S[0], X[tx])"),
    (lambda: K.block_sums_with_prev.get_ir(4, dtype="float16"), "tlx_atomic_fetch_add_h(&Acc[0], "),
    (lambda: K.block_sums_with_prev.get_ir(4, dtype="bfloat16"), "tlx_atomic_fetch_add_b(&Acc[0], "),
    (lambda: K.block_sums_with_prev.get_ir(4, dtype="int64"),
     "(long long)atomicAdd((unsigned long long*)&Acc[0], (unsigned long long)("),
])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_dtypes_generate_and_compile(func: object, call: str, arch: str) -> None:
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc

    source, ctx = cuda_source(func(), arch)  # type: ignore[operator]
    assert call in source
    if find_nvcc() is None:
        pytest.skip("needs nvcc (a CUDA toolkit on PATH, or TILELANG_X_NVCC)")
    binary = compile_cuda(source, arch, kernel_name=ctx.data["cuda.meta"].kernel_name, options={"compiler": "nvcc"})
    assert len(binary.cubin) > 0


def test_cuda_dtypes_without_a_returning_atomic_are_refused() -> None:
    @T.prim_func
    def main(C: T.Tensor((1,), T.float64), Out: T.Tensor((1,), T.float64)):
        with T.Kernel(1, threads=32):
            Out[0] = T.atomic_max(C[0], 1.0, return_prev=True)  # E:f64max

    raises(BackendNotImplementedError, "f64max", lambda: cuda_source(main),
           "T.atomic_max(..., return_prev=True) on float64 is not supported on CUDA", "int64")


def test_cuda_a_branch_that_only_updates_is_followed_by_the_block_barrier() -> None:
    """As a branch that stores: the block's later reads of the element see every update (the
    interpreter's warps meet there too when the kernel names barriers)."""

    @T.prim_func
    def main(C: T.Tensor((1,), T.int32), Out: T.Tensor((128,), T.int32)):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            S = T.alloc_shared((1,), T.int32)
            S[0] = 0
            if tx % 2 == 0:
                slot = T.atomic_add(S[0], 1, return_prev=True)
            Out[tx] = S[0]

    body = _body(main)
    assert re.search(r"atomicAdd\(&S\[0\], 1\);\s*\}\s*\}\s*__syncthreads\(\);\s*Out\[tx\] = S\[0\];", body), body
    out = torch.zeros(128, dtype=torch.int32)
    _interp(main)(torch.zeros(1, dtype=torch.int32), out)
    assert bool((out == 64).all())


def test_a_kernel_with_ws_regions_refuses_it() -> None:
    @T.prim_func
    def main(C: T.Tensor((1,), T.int32), Out: T.Tensor((128,), T.int32)):
        with T.Kernel(1, threads=256):
            with T.ws(0):
                Out[0] = T.atomic_add(C[0], 1, return_prev=True)  # E:ws
            with T.ws(1):
                for i in T.Parallel(128):
                    Out[i] = 1

    raises(VerificationError, "ws", lambda: _interp(main), "return_prev=True) in a kernel with T.ws regions")
