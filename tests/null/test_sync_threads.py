"""T.sync_threads / T.sync_warp: accepted where TileLang kernels put them (the interpreter runs
statements in order for the whole block; CUDA emits the barrier), refused inside T.Parallel.
Named barriers (T.sync_threads(id, count)) are in test_named_barriers.py."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tilelang_x import knobs
from tilelang_x.errors import VerificationError


@tilelang.jit(out_idx=[-1])
def reversed_rows(n):
    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((n,), T.float32)
            for i in T.Parallel(n):
                s[i] = X[i] * 2
            T.sync_threads()
            T.sync_warp()
            for i in T.Parallel(n):
                Y[i] = s[n - 1 - i]

    return main


def test_interpreter_runs_them() -> None:
    x = torch.randn(256)
    with knobs.scope(target_default="interp"):
        y = reversed_rows(256)(x)
    assert torch.equal(y, (x * 2).flip(0))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_emits_them(arch: str) -> None:
    from tests.null.cuda_helpers import cuda_source

    body = cuda_source(reversed_rows.get_ir(256), arch)[0].split('extern "C"')[-1]
    assert body.index("__syncthreads();") < body.index("__syncwarp();") < body.index("Y[")


def test_inside_parallel_is_refused() -> None:
    @T.prim_func
    def main(X: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                X[i] = X[i] + 1
                T.sync_threads()  # E:inside

    with pytest.raises(VerificationError, match=r"T.sync_threads\(\) inside a T.Parallel loop") as info:
        tilelang.compile(main, target="interp")
    assert info.value.loc is not None and info.value.loc.line == _line("inside")


def _line(marker: str) -> int:
    with open(__file__) as f:
        return next(n for n, text in enumerate(f, 1) if f"# E:{marker}" in text)
