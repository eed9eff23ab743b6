"""T.device_assert: the interpreter stops at the first false condition, naming the line, the
message, the block and the parallel loop's variables; CUDA traps after printing the same."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tilelang_x import knobs
from tilelang_x.errors import DeviceAssertError, TileLangTypeError


@tilelang.jit
def bounded(n, limit):
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32)):
        with T.Kernel(2, threads=128) as bx:
            T.device_assert(bx < 2)
            for i in T.Parallel(n // 2):
                T.device_assert(A[bx * (n // 2) + i] < limit, "values stay below the limit")  # E:assert

    return main


def _line(marker: str) -> int:
    with open(__file__) as f:
        return next(n for n, text in enumerate(f, 1) if f"# E:{marker}" in text)


def test_true_conditions_pass() -> None:
    with knobs.scope(target_default="interp"):
        bounded(64, 100.0)(torch.arange(64, dtype=torch.float32))


def test_false_condition_names_line_block_and_iteration() -> None:
    a = torch.arange(64, dtype=torch.float32)
    a[40] = 1e3  # block 1, i = 8
    with knobs.scope(target_default="interp"), pytest.raises(DeviceAssertError) as info:
        bounded(64, 100.0)(a)
    err = info.value
    assert err.loc is not None and err.loc.line == _line("assert") and err.loc.file == __file__
    assert "T.device_assert failed: values stay below the limit (block (1), i=8)" in str(err)


def test_condition_must_be_an_expression() -> None:
    with pytest.raises(TileLangTypeError, match="T.device_assert needs a condition") as info:
        @T.prim_func
        def main(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1):
                T.device_assert("A is small")  # E:string

    assert info.value.loc is not None and info.value.loc.line == _line("string")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_prints_and_traps(arch: str) -> None:
    from tests.null.cuda_helpers import cuda_source

    source, _ = cuda_source(bounded.get_ir(64, 100.0), arch)
    body = source[source.index('extern "C"'):]
    assert body.count("__trap();") == 2 and "T.device_assert failed: values stay below the limit (block" in body
    assert f"test_device_assert.py:{_line('assert')}" in body
