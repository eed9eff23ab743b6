"""A ``T.vectorized`` loop of per-thread stores to shared memory (TileLang's fp8 grouped GEMM widens
its weights so) is one vector access of each thread on CUDA: one barrier of the block after the
loop, none between its iterations; a loop that reads what it writes keeps a barrier per store."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source
from tilelang_x import knobs


@tilelang.jit(out_idx=[-1])
def doubled_rows(read_back=False):
    """``B[r, c] = 2 * A[r, c]`` (``read_back``: ``B[r, c] = 2 * A[r - 1, c]``, rotated) through a
    shared tile each thread writes its row of with a vectorized loop."""

    @T.prim_func
    def main(A: T.Tensor((128, 8), T.float16), B: T.Tensor((128, 8), T.float16)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((128, 8), T.float16)
            tx = T.get_thread_binding()
            for i in T.vectorized(8):
                S[tx, i] = A[tx, i] * 2
            if read_back:
                for i in T.vectorized(8):
                    S[(tx + 1) % 128, i] = S[tx, i]  # reads rows another thread writes
            T.copy(S, B)

    return main


def _loop_and_after(source: str) -> tuple[str, str]:
    body = source[source.index('extern "C"'):]
    start = body.index("for (int i")
    end = body.index("}", start)
    return body[start:end], body[end:]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_per_thread_stores_of_a_vectorized_loop_share_one_barrier(arch: str) -> None:
    source = cuda_source(doubled_rows.get_ir(), arch)[0]
    loop, after = _loop_and_after(source)
    assert "__syncthreads" not in loop
    assert after.split("tlx_copy")[0].count("__syncthreads") == 1  # then the block reads the tile


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_vectorized_loop_reading_what_it_writes_keeps_its_barriers(arch: str) -> None:
    source = cuda_source(doubled_rows.get_ir(read_back=True), arch)[0]
    body = source[source.index('extern "C"'):]
    second = body[body.index("for (int i", body.index("for (int i") + 1):]
    assert "__syncthreads" in second[:second.index("}")]


def test_interpreter_results() -> None:
    a = torch.randn(128, 8).half()
    with knobs.scope(target_default="interp"):
        torch.testing.assert_close(doubled_rows()(a), a * 2)
