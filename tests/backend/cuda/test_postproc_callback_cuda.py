"""A source post-processing callback (``tilelang.engine.callback``) changes what runs on the GPU."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tilelang_x.compiler import clear_cache
from tilelang_x.engine import callback


@T.prim_func
def double(A: T.Tensor((256,), T.float32), B: T.Tensor((256,), T.float32)):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(128):
            B[bx * 128 + i] = A[bx * 128 + i] * 2


@pytest.fixture(autouse=True)
def _no_callbacks(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(callback, "_registered", {})
    yield
    clear_cache()  # no kernel built from a post-processed source outlives the test


def test_postprocessed_source_is_what_runs() -> None:

    @callback.register_cuda_postproc_callback
    def triple(code: str, _target: object) -> str:
        assert "* 2.0f" in code
        return code.replace("* 2.0f", "* 3.0f")

    kernel = tilelang.compile(double, out_idx=[-1], target="cuda")
    a = torch.randn(256, device="cuda")
    torch.testing.assert_close(kernel(a), a * 3)
    assert "* 3.0f" in kernel.get_kernel_source()
