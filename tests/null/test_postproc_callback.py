"""TileLang's post-processing hooks for the generated device source (``tilelang.engine.callback``,
``tilelang.register_cuda_postproc``), which its examples/gdn kernels import: a registered function
rewrites the CUDA C++ of every kernel built afterwards, before the device compiler sees it."""

from __future__ import annotations

import pytest

import tilelang_x as tilelang
import tilelang_x.language as T
from tilelang_x.compiler import build, cache_size, clear_cache
from tilelang_x.core_ir.errors import ArgumentError
from tilelang_x.engine import callback
from tilelang_x.target import Target


@pytest.fixture(autouse=True)
def _no_callbacks(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(callback, "_registered", {})
    yield
    clear_cache()  # no kernel built from a post-processed source outlives the test


@T.prim_func
def double(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
    with T.Kernel(1, threads=128) as _:
        for i in T.Parallel(128):
            B[i] = A[i] * 2


def _cuda_source() -> str:
    return build(double, Target("cuda", "sm_80"), {}).source


def test_decorator_rewrites_the_cuda_source_before_it_compiles() -> None:
    from tilelang_x.engine.callback import register_cuda_postproc_callback  # the examples' import
    from tilelang_x.plugins.cuda.compile import find_nvcc, find_nvrtc

    seen = []

    @register_cuda_postproc_callback
    def mark(code: str, target: Target) -> str:
        seen.append(target.arch)
        return "// post-processed\n" + code.replace("* 2.0f", "* 3.0f")

    assert mark.__name__ == "mark"  # the decorator hands the function back
    if find_nvrtc() is None and find_nvcc() is None:
        pytest.skip("no CUDA compiler here")
    built = build(double, Target("cuda", "sm_80"), {})
    assert seen == ["sm_80"]
    assert built.source.startswith("// post-processed\n") and "* 3.0f" in built.source
    assert len(built.binary.cubin) > 0


@pytest.mark.parametrize("form", ["parentheses", "override_false", "function"])
def test_every_registration_form(form: str) -> None:
    def mark(code: str, _target: Target) -> str:
        return "// mark\n" + code

    if form == "parentheses":
        callback.register_cuda_postproc_callback()(mark)
    elif form == "override_false":
        callback.register_cuda_postproc_callback(override=False)(mark)
    else:
        tilelang.register_cuda_postproc(mark)
    assert callback._registered == {"cuda": mark}


def test_other_backends_sources_are_left_alone() -> None:
    tilelang.register_hip_postproc(lambda code, _target: "// hip only\n" + code)
    assert "// hip only" not in _cuda_source()


def test_override_false_refuses_a_second_callback() -> None:
    callback.register_cuda_postproc(lambda code, _t: code)
    with pytest.raises(ArgumentError, match="already registered") as info:
        callback.register_cuda_postproc_callback(False)(lambda code, _t: code)
    assert info.value.loc is not None and info.value.loc.file == __file__


def test_callback_that_returns_no_source_is_named() -> None:
    @callback.register_cuda_postproc_callback
    def forgetful(code: str, _target: Target) -> None:
        code.upper()

    with pytest.raises(ArgumentError, match="'forgetful' returned NoneType"):
        _cuda_source()


def test_registering_drops_kernels_compiled_from_the_old_source() -> None:
    tilelang.compile(double, out_idx=[-1], target="interp")
    assert cache_size() > 0
    callback.register_cuda_postproc(lambda code, _t: code)
    assert cache_size() == 0
