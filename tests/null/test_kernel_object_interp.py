"""JITKernel end to end through the interpreter plugin (a PrimFunc built by hand)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tilelang_x import compiler
from tilelang_x.core_ir import Buffer, For, If, Kernel, PrimFunc, SourceLoc, Store, Var, dtypes
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.errors import ArgumentError
from tilelang_x.target import Target

pytestmark = pytest.mark.usefixtures("fresh_registry")


def vadd(block: int = 4) -> PrimFunc:
    """``C[i] = A[i] + B[i]`` over a dynamic length ``M``, ``block`` elements per program."""
    m = Var("M")
    a = Buffer("A", (m,), dtypes.float32)
    b = Buffer("B", (m,), dtypes.float32)
    c = Buffer("C", (m,), dtypes.float32)
    bx, i = Var("bx"), Var("i")
    idx = bx * block + i
    body = Kernel(
        (E.binary("//", m + (block - 1), block),), (bx,), (128,),
        For(i, E.const(block), "parallel", If(idx < m, Store(c, (idx,), a[idx] + b[idx]))),
    )
    return PrimFunc("vadd", (a, b, c), body, out_idx=(2,), loc=SourceLoc("/home/user/vadd.py", 5, "vadd"))


def test_runs_in_the_interpreter() -> None:
    kernel = compiler.compile_prim_func(vadd(), target="interp")
    assert kernel.target == Target("interp")
    assert "def vadd(" in kernel.get_kernel_source()
    for n in (1, 7, 33):
        a, b = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(kernel(a, b), a + b)
    out = kernel(np.arange(5, dtype=np.float32), np.ones(5, np.float32))
    assert isinstance(out, np.ndarray) and out.tolist() == [1, 2, 3, 4, 5]


def test_explicit_output() -> None:
    kernel = compiler.compile_prim_func(vadd(), target="interp")
    c = torch.zeros(6)
    assert kernel(torch.ones(6), torch.ones(6), c) is None
    assert c.tolist() == [2.0] * 6


def test_argument_errors_point_at_the_kernel() -> None:
    kernel = compiler.compile_prim_func(vadd(), target="interp")
    with pytest.raises(ArgumentError, match=r"^/home/user/vadd.py:5: kernel `vadd`, parameter `B`"):
        kernel(torch.ones(3), torch.ones(4))


def test_profiler() -> None:
    kernel = compiler.compile_prim_func(vadd(), target="interp")
    profiler = kernel.get_profiler(dynamic_dims={"M": 64})
    profiler.assert_allclose(lambda a, b: a + b)
    assert profiler.do_bench(n_warmup=1, n_repeat=2) > 0
