"""A function with several ``T.Kernel`` blocks compiles as one function per block, launched in
order with the same arguments (core_ir/kernel_parts.py, compiler._compile)."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
from tests.kernels import reductions
from tests.null.cuda_helpers import cuda_source
from tilelang_x.core_ir.kernel_parts import kernel_parts
from tilelang_x.core_ir.stmt import Kernel


def test_each_kernel_becomes_a_function_with_every_parameter() -> None:
    func = reductions.split_row_sum.get_ir(96, 256)
    parts = kernel_parts(func)
    assert [p.name for p in parts] == ["main_0", "main_1"]
    assert all(p.params == func.params and isinstance(p.body, Kernel) for p in parts)
    assert [p.body.grid[1].value for p in parts if len(p.body.grid) > 1] == [4]


def test_a_single_kernel_stays_whole() -> None:
    func = reductions.column_sum.get_ir(200, 100)
    assert kernel_parts(func) == [func]


def test_the_kernels_run_in_order_and_the_kernel_shows_both() -> None:
    kernel = tilelang.compile(reductions.split_row_sum.get_ir(64, 128), target="interp")
    x = torch.randn(64, 128)
    partial = torch.zeros(4, 64)
    torch.testing.assert_close(kernel(x, partial), x.sum(1), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(partial.sum(0), x.sum(1), atol=1e-4, rtol=1e-4)  # the first kernel's output
    assert kernel.lowered_func.script().count("T.Kernel(") == 2
    assert len(kernel.lowered_func.params) == 3


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_each_part_generates_cuda(arch: str) -> None:
    sources = [cuda_source(p, arch)[0] for p in kernel_parts(reductions.split_row_sum.get_ir(96, 256))]
    assert "main_0_kernel(" in sources[0] and "main_1_kernel(" in sources[1]
    # every part takes every argument, so the launch passes one argument list to each
    for src in sources:
        signature = src[src.index("__global__"):src.index("{", src.index("__global__"))]
        assert all(f" {name}" in signature for name in ("A", "Partial", "Out")), signature


def test_the_launch_runs_the_parts_in_order_through_either_entry() -> None:
    from tilelang_x import compiler

    calls: list[tuple[int, str]] = []

    class Part:
        dim_names = ("n",)

        def __init__(self, k: int) -> None:
            self.k = k

        def __call__(self, values, dims) -> None:
            calls.append((self.k, "call"))

        def launch_on(self, device, args, dims) -> None:
            calls.append((self.k, "fast"))

    launch = compiler._InOrder([Part(0), Part(1)])
    launch([1], {"n": 3})
    launch.launch_on(0, [1], (3,))
    assert calls == [(0, "call"), (1, "call"), (0, "fast"), (1, "fast")]
    assert launch.dim_names == ("n",)
    assert not hasattr(compiler._InOrder([Part(0), lambda values, dims: None]), "launch_on")
