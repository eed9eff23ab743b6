"""The compile driver and the profiler, end to end through the fake ``fakecpu`` backend."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import tilelang_x
from tilelang_x import compiler, knobs
from tilelang_x.core_ir import Buffer, PrimFunc, Seq, SourceLoc, Var, dtypes
from tilelang_x.core_ir.errors import ArgumentError, BackendNotImplementedError, TileLangError
from tilelang_x.profiler import TensorSupplyType, make_tensor
from tilelang_x.target import Target

LOC = SourceLoc("/home/user/kernels.py", 7, "add")


def add_func(out_idx: tuple[int, ...] = (2,)) -> PrimFunc:
    m = Var("M")
    a = Buffer("A", (m, 8), dtypes.float32)
    b = Buffer("B", (m, 8), dtypes.float32)
    c = Buffer("C", (m, 8), dtypes.float32)
    return PrimFunc("add", (a, b, c), Seq(()), out_idx=out_idx, loc=LOC)


def scale_func() -> PrimFunc:
    x = Buffer("X", (16,), dtypes.float16)
    alpha = Var("alpha", dtypes.float32)
    y = Buffer("Y", (16,), dtypes.float16)
    z = Buffer("Z", (16,), dtypes.float16)
    return PrimFunc("scale", (x, alpha, y, z), Seq(()), loc=LOC)


def test_compile_and_run(fake_backend) -> None:
    kernel = compiler.compile_prim_func(add_func(), target="fakecpu")
    assert kernel.target == Target("fakecpu", "v1")
    assert kernel.get_kernel_source() == "// fakecpu source of add"
    a, b = torch.randn(5, 8), torch.randn(5, 8)
    torch.testing.assert_close(kernel(a, b), a + b)
    assert fake_backend.CALLS == ["fake_lower:add", "compile:add"]
    assert {"fake_lower", "codegen", "compile", "load"} <= set(kernel.stage_times)
    assert kernel.compile_time == pytest.approx(sum(kernel.stage_times.values()))


def test_in_memory_cache(fake_backend) -> None:
    first = compiler.compile_prim_func(add_func(), target="fakecpu")
    # a different function object with the same text is the same kernel
    assert compiler.compile_prim_func(add_func(), target="fakecpu:v1") is first
    assert fake_backend.CALLS.count("compile:add") == 1
    assert compiler.compile_prim_func(add_func(), target="fakecpu:v2") is not first
    assert compiler.compile_prim_func(add_func(), target="fakecpu", out_idx=[-2, -1]) is not first
    other = compiler.compile_prim_func(add_func(), target="fakecpu", options={"pass_configs": {"x": [1]}})
    assert other is not first
    assert compiler.compile_prim_func(add_func(), target="fakecpu", options={"pass_configs": {"x": [1]}}) is other
    compiler.clear_cache()
    assert compiler.cache_size() == 0
    assert compiler.compile_prim_func(add_func(), target="fakecpu") is not first


def test_out_idx_override(fake_backend) -> None:
    kernel = compiler.compile_prim_func(add_func(out_idx=()), target="fakecpu", out_idx=-1)
    assert kernel.out_idx == (2,) and kernel.func.out_idx == (2,)
    assert kernel(np.ones((2, 8), np.float32), np.ones((2, 8), np.float32)).sum() == 32


def test_several_outputs_and_scalars(fake_backend) -> None:
    kernel = tilelang_x.compile(scale_func(), out_idx=[2, 3], target="fakecpu")
    y, z = kernel(torch.ones(16, dtype=torch.float16), 3)
    assert float(y[0]) == 3.0 and float(z[0]) == -2.0
    with pytest.raises(ArgumentError, match="`alpha`"):
        kernel(torch.ones(16, dtype=torch.float16), "3")


def test_dumps(fake_backend, tmp_path) -> None:
    folder = tmp_path / "dumps"
    kernel = compiler.compile_prim_func(
        add_func(), target="fakecpu", options={"dump": "all", "dump_dir": str(folder)}
    )
    assert kernel(torch.ones(1, 8), torch.ones(1, 8)).sum() == 16
    names = sorted(os.listdir(folder))
    (lowered,) = [n for n in names if n.endswith(".fake_lower.txt")]
    assert "def add(" in (folder / lowered).read_text()
    assert names[-1].endswith(".codegen.txt")  # the generated source comes last
    with knobs.scope(compile_dump="nosuch"), pytest.raises(TileLangError, match="unknown stage name"):
        compiler.compile_prim_func(add_func(), target="fakecpu")


def test_unknown_target_backend_has_no_runner(fake_backend) -> None:
    with pytest.raises(BackendNotImplementedError, match="no installed plugin can run kernels for target nowhere"):
        compiler.compile_prim_func(add_func(), target=Target("nowhere"))


def test_compile_needs_a_prim_func(fake_backend) -> None:
    with pytest.raises(TypeError, match="expects a PrimFunc"):
        compiler.compile_prim_func("def f(): pass", target="fakecpu")  # type: ignore[arg-type]


# ---- profiler ---------------------------------------------------------------------------------
def test_profiler_assert_allclose(fake_backend) -> None:
    kernel = compiler.compile_prim_func(add_func(), target="fakecpu")
    profiler = kernel.get_profiler(dynamic_dims={"M": 4})
    profiler.assert_allclose(lambda a, b: a + b)
    with pytest.raises(AssertionError) as info:
        profiler.assert_allclose(lambda a, b: a - b, atol=1e-3, rtol=1e-3)
    text = str(info.value)
    assert "kernel `add` output `C` (float32[M, 8]) differs from the reference" in text
    assert "largest difference" in text and "first mismatches" in text
    # a few mismatches are tolerated
    profiler.assert_allclose(lambda a, b: (a + b).index_put_((torch.tensor([0]),), torch.tensor(99.0)),
                             max_mismatched_ratio=0.5)


def test_profiler_needs_dynamic_sizes(fake_backend) -> None:
    kernel = compiler.compile_prim_func(add_func(), target="fakecpu")
    with pytest.raises(ArgumentError, match="needs a size for dimension `M`"):
        kernel.get_profiler().get_inputs()


def test_profiler_do_bench(fake_backend) -> None:
    kernel = compiler.compile_prim_func(add_func(), target="fakecpu")
    profiler = kernel.get_profiler(TensorSupplyType.Integer, dynamic_dims={"M": 2})
    ms = profiler.do_bench(warmup=1, rep=2)
    assert isinstance(ms, float) and ms >= 0
    times = profiler.do_bench(n_warmup=1, n_repeat=3, return_mode="all")
    assert len(times) == 3
    seen = []
    profiler.do_bench(lambda a, b: seen.append((a.shape, b.shape)), n_warmup=1, n_repeat=1)
    assert seen == [((2, 8), (2, 8))] * 2
    assert profiler.get_kernel_source() == kernel.get_kernel_source()


@pytest.mark.parametrize("supply", list(TensorSupplyType))
@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.int8, dtypes.uint8])
def test_tensor_supply(supply: TensorSupplyType, dtype) -> None:
    t = make_tensor((64,), dtype, supply, "cpu")
    assert t.shape == (64,) and str(t.dtype) == f"torch.{dtype.name}"
    values = t.to(torch.float32)
    if supply is TensorSupplyType.Zero:
        assert (values == 0).all()
    elif supply is TensorSupplyType.One:
        assert (values == 1).all()
    elif supply is TensorSupplyType.Integer or not dtype.is_float:
        assert (values == values.round()).all() and values.min() >= -2 and values.max() <= 2
    assert make_tensor((2,), dtype, TensorSupplyType.Auto, "cpu").dtype == t.dtype
