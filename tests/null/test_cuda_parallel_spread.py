"""A T.Parallel nest with work for every thread that its layout spreads over an eighth of the
block's threads or fewer (its extents share too few factors with the thread count; the layouts
split extents exactly) warns at its line (``PerformanceWarning``); one that fits does not."""

from __future__ import annotations

import warnings

import pytest

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source
from tests.null.located import located_warnings
from tilelang_x.errors import PerformanceWarning


@tilelang.jit
def scale(n, threads=128):
    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=threads):
            for i in T.Parallel(n):  # E:loop
                Y[i] = X[i] * 2

    return main


warns = located_warnings(__file__)


def test_300_elements_on_128_threads_warn_at_the_loop() -> None:
    warns(PerformanceWarning, "loop", lambda: cuda_source(scale.get_ir(300), "sm_90a"),
          r"300 elements runs on 2 of the block's 128 threads",
          r"hint: make the extents a multiple of the thread count")


@pytest.mark.parametrize("n, threads", [(256, 128), (384, 128), (64, 128), (300, 100)])
def test_a_nest_that_spreads_or_is_small_does_not_warn(n: int, threads: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)
        cuda_source(scale.get_ir(n, threads), "sm_90a")
