"""A fragment element that the thread reading it may not hold, read outside ``T.Parallel`` by every
thread, comes from its owner through shared memory (``broadcast_reads`` in
``plugins/cuda/layout_exchange.py``): TileLang's split-KV decode combine kernel reads
``lse_max_local[0]`` of a fragment spread one element a thread. The interpreter runs the combine
kernel against torch as the suite cases ``combine_split_kv_*`` (tests/kernels/suite.py), and so
does the GPU suite; here: the CUDA source, its compilation, and what stays a ``LayoutError``."""

from __future__ import annotations

import logging
import re

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import attention
from tests.null.cuda_helpers import cuda_source
from tilelang_x import knobs
from tilelang_x.core_ir.errors import LayoutError

COMBINE = [(4, True), (8, True), (4, False), (8, False)]


def _combine(num_split: int, annotate: bool, max_in_local: bool = False):
    return attention.combine_split_kv.get_ir(2, 3, num_split, 128, annotate=annotate, max_in_local=max_in_local)


def _line_of(marker: str, text: str | None = None) -> int:
    lines = (text if text is not None else open(__file__).read()).splitlines()
    return next(k for k, line in enumerate(lines, 1) if marker in line)


def _body(src: str) -> str:
    return src[src.index("__global__"):]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("num_split, annotate", COMBINE)
def test_combine_reads_the_maximum_through_one_shared_copy(num_split: int, annotate: bool, arch: str,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="tilelang_x.cuda.layout"):
        body = _body(cuda_source(_combine(num_split, annotate), arch)[0])
    line = _line_of("for k in T.Pipelined(num_split, num_stages=1):", open(attention.__file__).read())
    assert f"{attention.__file__}:{line}: fragment `lse_max_local` is spread over the threads" in caplog.text
    # one copy serves the pipelined loop and the statement after it: the owners store, a barrier, then the reads
    assert "lse_max_local_bcast0" in body and "_bcast1" not in body
    store = re.search(r"lse_max_local_bcast0\[[^\]]+\] = lse_max_local\[", body)
    assert store is not None, body
    barrier = body.index("__syncthreads();", store.end())
    first_read = body.index("- lse_max_local_bcast0[0])")
    assert store.end() < barrier < first_read
    assert body.count("lse_max_local_bcast0[0]") == 2  # the loop's read and the log-sum's


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("num_split, annotate", COMBINE)
def test_combine_compiles_with_nvcc(num_split: int, annotate: bool, arch: str) -> None:
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc

    if find_nvcc() is None:
        pytest.skip("needs nvcc (a CUDA toolkit on PATH, or TILELANG_X_NVCC)")
    source, ctx = cuda_source(_combine(num_split, annotate), arch)
    binary = compile_cuda(source, arch, kernel_name=ctx.data["cuda.meta"].kernel_name, options={"compiler": "nvcc"})
    assert len(binary.cubin) > 0


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_maximum_kept_in_a_local_needs_no_copy(arch: str) -> None:
    assert "_bcast" not in cuda_source(_combine(8, True, max_in_local=True), arch)[0]


@tilelang.jit(out_idx=[-1])
def _column_max_of_next_thread(rows: int = 4, cols: int = 128):
    @T.prim_func
    def main(X: T.Tensor((rows, cols), T.float32), Y: T.Tensor((cols,), T.float32)):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((rows, cols), T.float32)
            m = T.alloc_fragment((cols,), T.float32)
            T.copy(X, x)
            T.reduce_max(x, m, dim=0)
            tx = T.get_thread_binding()
            Y[tx] = m[(tx + 1) % cols]  # another thread's element

    return main


def test_a_per_thread_index_outside_parallel_reads_the_shared_copy() -> None:
    x = torch.randn(4, 128)
    with knobs.scope(target_default="interp"):
        y = _column_max_of_next_thread()(x)
    torch.testing.assert_close(y, x.max(0).values.roll(-1))
    body = _body(cuda_source(_column_max_of_next_thread.get_ir())[0])
    assert "Y[tx] = m_bcast0[0 + ((tx + 1) & 127)];" in body


@tilelang.jit(out_idx=[-1])
def _trace(n: int = 4, cols: int = 128):
    """The sum of ``X[k, k]``: row ``k`` goes into a fragment in a loop, whose element ``k`` every
    thread adds up: the fragment is written in every iteration, so its copy is made in the loop."""

    @T.prim_func
    def main(X: T.Tensor((n, cols), T.float32), Y: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=128):
            row = T.alloc_fragment((cols,), T.float32)
            total = T.alloc_local([1], T.float32)
            total[0] = 0.0
            for k in T.serial(n):
                for i in T.Parallel(cols):
                    row[i] = X[k, i]
                total[0] += row[k]
            Y[0] = total[0]

    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_fragment_written_in_the_loop_is_copied_in_the_loop(arch: str) -> None:
    x = torch.randn(4, 128)
    with knobs.scope(target_default="interp"):
        y = _trace()(x)
    torch.testing.assert_close(y, x[:, :4].diagonal().sum().view(1))
    body = _body(cuda_source(_trace.get_ir(), arch)[0])
    loop = body[body.index("for (int k = 0; k < 4; ++k) {"):]
    store = loop.index("row_bcast0[0 + (tx & 127)] = row[0];")
    read = loop.index("total[0] + row_bcast0[0 + k];")
    # sync insertion: the owners' stores reach every thread before it reads, and a thread still reading
    # the last iteration's value is waited for before the next stores
    assert loop[store:read].count("__syncthreads();") == 1
    assert loop[:store].count("__syncthreads();") == 1


def test_a_derived_per_thread_index_in_a_parallel_loop_keeps_the_layout_error() -> None:
    @T.prim_func
    def shifted(X: T.Tensor((4, 128), T.float32), Y: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((4, 128), T.float32)
            m = T.alloc_fragment((128,), T.float32)
            T.copy(X, x)
            T.reduce_max(x, m, dim=0)
            for i in T.Parallel(128):
                Y[i] = m[(i + 1) % 128]  # another iteration's element

    with pytest.raises(LayoutError, match=r"fragment `m` is spread over threads") as info:
        cuda_source(shifted)
    assert info.value.loc.line == _line_of("# another iteration's element")
    assert info.value.loc.file == __file__


def test_a_store_outside_parallel_keeps_the_layout_error() -> None:
    @T.prim_func
    def overwrite(X: T.Tensor((4, 128), T.float32), Y: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((4, 128), T.float32)
            m = T.alloc_fragment((128,), T.float32)
            T.copy(X, x)
            T.reduce_max(x, m, dim=0)
            m[0] = m[0] + 1.0  # a write of one thread's element
            T.copy(m, Y)

    with pytest.raises(LayoutError, match=r"`m\[0\]` is outside a T.Parallel loop") as info:
        cuda_source(overwrite)
    assert info.value.loc.line == _line_of("# a write of one thread's element")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_read_in_a_warp_specialized_region_keeps_the_layout_error(arch: str) -> None:
    # the threads of other regions never reach a barrier placed in this one
    @T.prim_func
    def ws_read(X: T.Tensor((32, 64), T.float32), Y: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=256):
            X_s = T.alloc_shared((32, 64), T.float32)
            x = T.alloc_fragment((32, 64), T.float32)
            sums = T.alloc_fragment((32,), T.float32)
            ready = T.alloc_barrier([128])
            with T.ws(0):
                T.copy(X, X_s)
                T.barrier_arrive(ready[0])
            with T.ws(1):
                T.barrier_wait(ready[0], 0)
                T.copy(X_s, x)
                T.reduce_sum(x, sums, dim=1)
                Y[0] = sums[0]  # one thread's element, in a region

    with pytest.raises(LayoutError, match=r"`sums\[0\]` is outside a T.Parallel loop") as info:
        cuda_source(ws_read, arch)
    assert info.value.loc.line == _line_of("# one thread's element, in a region")


def test_a_block_wide_store_of_a_fragment_element_syncs_before_its_one_thread() -> None:
    """``A[0, 0] = f[3, 5]`` at the kernel's top level: thread 0 stores for the block, after the
    barrier that publishes the staged fragment; a barrier inside ``if (tx == 0)`` would hang."""

    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((64, 64), T.float32)
            T.clear(f)
            A[0, 0] = f[3, 5]

    src, _ = cuda_source(main)
    one = src[src.index("if (tx == 0) {"):]
    assert "__syncthreads();\n  if (tx == 0) {" in src
    assert "__syncthreads" not in one[:one.index("}")]
