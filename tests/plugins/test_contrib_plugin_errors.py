"""A third-party plugin that breaks while a kernel compiles is named, left out, and the kernel is
compiled without it; the interpreter and the other plugins keep working."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import pytest
import torch

from tests.kernels import gemm
from tilelang_x import compiler, registry
from tilelang_x.core_ir.errors import BackendNotImplementedError, TileLangError
from tilelang_x.registry import PluginWarning

RAISING_GEMM = """
    from tilelang_x.hookspecs import hookimpl

    CALLS = []

    @hookimpl(tryfirst=True)  # ahead of any other third-party gemm (the contrib counter)
    def tlx_lower_op(target, op, ctx):
        if target.backend == "interp" and type(op).__name__ == "Gemm":
            CALLS.append(op)
            raise RuntimeError("gemm lowering exploded")
        return None
"""

USER_ERROR_GEMM = """
    from tilelang_x.core_ir.errors import ShapeMismatchError
    from tilelang_x.hookspecs import hookimpl

    @hookimpl(tryfirst=True)
    def tlx_lower_op(target, op, ctx):
        if target.backend == "interp" and type(op).__name__ == "Gemm":
            raise ShapeMismatchError("this vendor's gemm needs tiles of 64")
        return None
"""

BROKEN_BACKEND = """
    from tilelang_x.hookspecs import hookimpl
    from tilelang_x.target import Target, TargetInfo

    @hookimpl
    def tlx_targets():
        return [TargetInfo("brokencpu", (), "a backend whose code generator crashes", {"device": "cpu"})]

    @hookimpl
    def tlx_resolve_target(name, arch):
        return Target("brokencpu") if name == "brokencpu" else None

    @hookimpl
    def tlx_pipeline(target):
        return [] if target.backend == "brokencpu" else None

    @hookimpl
    def tlx_codegen(target, func, ctx):
        if target.backend == "brokencpu":
            return helper(func)
        return None

    def helper(func):
        return {}["no such key"]
"""


def _gemm_ir() -> object:
    return gemm.matmul.get_ir(64, 64, 64, block_M=32, block_N=32, block_K=32, out_dtype="float32")


def _check(kernel: object) -> None:
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 64, generator=g).half()
    b = torch.randn(64, 64, generator=g).half()
    torch.testing.assert_close(kernel(a, b), a.float() @ b.float(), rtol=1e-3, atol=1e-3)  # type: ignore[operator]


def test_raising_lowering_is_named_and_left_out(install_dist) -> None:
    install_dist("tlx-exploding-gemm", {"exploding": "exploding_gemm"}, {"exploding_gemm": RAISING_GEMM})
    with pytest.warns(PluginWarning) as caught:
        kernel = compiler.compile_prim_func(_gemm_ir(), target="interp", out_idx=[-1])
    _check(kernel)  # the built-in executor took over
    (warning,) = [w for w in caught if "exploding" in str(w.message)]
    text = str(warning.message)
    assert "'exploding'" in text and "tlx-exploding-gemm 0.1" in text and "exploding_gemm" in text
    assert "tlx_lower_op raised RuntimeError: gemm lowering exploded" in text
    assert warning.filename == __file__  # points at the caller, not at tilelang-x's insides
    record = {r.name: r for r in registry.plugins()}["exploding"]
    assert record.status == "failed" and "gemm lowering exploded" in record.error
    assert not registry.plugin_manager().has_plugin("exploding")
    # later compiles neither call it nor warn again
    import exploding_gemm

    calls = len(exploding_gemm.CALLS)
    compiler.clear_cache()
    with _no_plugin_warning():
        _check(compiler.compile_prim_func(_gemm_ir(), target="interp", out_idx=[-1]))
    assert len(exploding_gemm.CALLS) == calls


@contextlib.contextmanager
def _no_plugin_warning() -> Iterator[None]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    assert not [w for w in caught if issubclass(w.category, PluginWarning)]


def test_tilelang_error_from_a_plugin_is_an_answer(install_dist) -> None:
    install_dist("tlx-strict-gemm", {"strict": "strict_gemm"}, {"strict_gemm": USER_ERROR_GEMM})
    func = _gemm_ir()
    with pytest.raises(TileLangError, match="this vendor's gemm needs tiles of 64"):
        compiler.compile_prim_func(func, target="interp", out_idx=[-1])
    assert {r.name: r for r in registry.plugins()}["strict"].ok  # not blamed


def test_crashing_backend_is_named(install_dist) -> None:
    install_dist("tlx-broken-backend", {"brokencpu": "broken_backend"}, {"broken_backend": BROKEN_BACKEND})
    func = _gemm_ir()
    with pytest.warns(PluginWarning, match=r"'brokencpu'.*tlx_codegen raised KeyError"):
        with pytest.raises(TileLangError) as info:
            compiler.compile_prim_func(func, target="brokencpu", out_idx=[-1])
    # without the plugin nothing can build for its target: said plainly, with where to look
    assert isinstance(info.value, BackendNotImplementedError)
    text = str(info.value)
    assert "python -m tilelang_x info" in text
    assert "left out after failing: plugin 'brokencpu' from tlx-broken-backend 0.1: tlx_codegen raised KeyError" in text
    # the interpreter is unaffected
    _check(compiler.compile_prim_func(_gemm_ir(), target="interp", out_idx=[-1]))


def test_import_error_leaves_the_interpreter_working(install_dist) -> None:
    install_dist("tlx-missing-dep", {"missing": "missing_dep_plugin"},
                 {"missing_dep_plugin": "import vendor_sdk_that_is_not_installed\n"})
    with pytest.warns(PluginWarning, match="vendor_sdk_that_is_not_installed"):
        kernel = compiler.compile_prim_func(_gemm_ir(), target="interp", out_idx=[-1])
    _check(kernel)
