# Kernel code is written as users write it (unused block variables included).
# ruff: noqa: F841
"""``T.annotate_pass_configs`` / ``T.annotate_compile_flags``: recorded on the PrimFunc, merged
with the jit's own by the compile driver (the jit's pass configs win), flags reaching the device
compiler, part of the cache key, and the located errors (``# E:<tag>`` marks the line an error
names)."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.null.located import located_errors
from tilelang_x.core_ir.errors import CompilationError, TileLangSyntaxError, TileLangTypeError
from tilelang_x.core_ir.stmt import COMPILE_FLAGS, PASS_CONFIGS
from tilelang_x.pass_config import PassConfigKey
from tilelang_x.plugins.cuda import compile as cc

where, raises = located_errors(__file__)


def gemm(configs=None, flags=None):
    @T.prim_func
    def main(A: T.Tensor((256, 256), T.float16), B: T.Tensor((256, 256), T.float16),
             C: T.Tensor((256, 256), T.float32)):
        if configs is not None:
            T.annotate_pass_configs(configs)
        if flags is not None:
            T.annotate_compile_flags(flags)
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 64), T.float16)
            B_s = T.alloc_shared((64, 128), T.float16)
            C_f = T.alloc_fragment((128, 128), T.float32)
            T.clear(C_f)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * 128, bx * 128])

    return main


def _device_compile(monkeypatch, func, **compile_kw):
    """(source, options) the CUDA backend hands the device compiler for ``func``."""
    seen: list[tuple[str, dict]] = []

    def fake(source, arch, *, kernel_name, options=None):
        seen.append((source, dict(options or {})))
        raise CompilationError("stop here")

    monkeypatch.setattr(cc, "compile_cuda", fake)
    with pytest.raises(CompilationError, match="stop here"):
        tilelang.compile(func, target="cuda:sm_90a", **compile_kw)
    assert len(seen) == 1
    return seen[0]


def test_recorded_on_the_prim_func():
    func = gemm({PassConfigKey.TL_DISABLE_WGMMA: True, "tlx.persistent": False}, "-DTLX_A=1 -DTLX_B")
    assert func.attr(PASS_CONFIGS) == (("tl.disable_wgmma", True), ("tlx.persistent", False))
    assert func.attr(COMPILE_FLAGS) == ("-DTLX_A=1", "-DTLX_B")
    assert "# pass_configs=" in func.script() and "-DTLX_B" in func.script()
    assert gemm().attr(PASS_CONFIGS) is None and gemm().attr(COMPILE_FLAGS) is None


def test_a_body_pass_config_takes_effect(monkeypatch):
    plain, _ = _device_compile(monkeypatch, gemm())
    assert "tlx_wgmma_ss_f16_n128" in plain
    off, _ = _device_compile(monkeypatch, gemm({"tl.disable_wgmma": True}))
    assert "tlx_wgmma_ss_f16_n128" not in off


def test_the_jits_pass_config_wins(monkeypatch):
    source, _ = _device_compile(monkeypatch, gemm({"tl.disable_wgmma": True}),
                                pass_configs={"tl.disable_wgmma": False})
    assert "tlx_wgmma_ss_f16_n128" in source
    source, _ = _device_compile(monkeypatch, gemm({"tl.disable_wgmma": False}),
                                pass_configs={"tl.disable_wgmma": True})
    assert "tlx_wgmma_ss_f16_n128" not in source


def test_flags_reach_the_device_compiler_after_the_pass_config_ones(monkeypatch):
    _, options = _device_compile(monkeypatch, gemm(flags=["-DTLX_BODY=1"]), compile_flags=["-DTLX_JIT"],
                                 pass_configs={"tl.device_compile_flags": "-DTLX_DEVICE"})
    assert options["flags"] == ["-DTLX_DEVICE", "-DTLX_BODY=1", "-DTLX_JIT"]


def test_jit_compile_flags_alone_reach_the_device_compiler(monkeypatch):
    _, options = _device_compile(monkeypatch, gemm(), compile_flags="-DTLX_JIT")
    assert options["flags"] == ["-DTLX_JIT"]


def test_the_annotations_are_part_of_the_cache_key():
    def scale(flags=None, configs=None):
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
            if flags is not None:
                T.annotate_compile_flags(flags)
            if configs is not None:
                T.annotate_pass_configs(configs)
            with T.Kernel(1, threads=64) as bx:
                for i in T.Parallel(64):
                    B[i] = A[i] * 2.0

        return main

    base = tilelang.compile(scale(), target="interp")
    assert tilelang.compile(scale(), target="interp") is base
    flagged = tilelang.compile(scale(["-DX"]), target="interp")
    configured = tilelang.compile(scale(configs={"tlx.fold_clear": False}), target="interp")
    assert flagged is not base and configured is not base and flagged is not configured
    assert tilelang.compile(scale(["-DX"]), target="interp") is flagged
    a = torch.arange(64, dtype=torch.float32)
    b = torch.empty(64)
    configured(a, b)
    torch.testing.assert_close(b, a * 2)


def test_eager_jit_body_annotations(monkeypatch):
    @tilelang.jit
    def double(A):
        A: T.Tensor[[64], T.float32]
        T.annotate_pass_configs({"tl.enable_fast_math": True})
        T.annotate_compile_flags(["-DTLX_EAGER"])
        B = T.empty([64], T.float32)
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                B[i] = A[i] * 2.0
        return B

    func = double.get_ir(torch.zeros(64))
    assert func.attr(PASS_CONFIGS) == (("tl.enable_fast_math", True),)
    _, options = _device_compile(monkeypatch, func)
    assert options == {"fast_math": True, "flags": ["-DTLX_EAGER"]}


def _annotated(call):
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        call()
        with T.Kernel(1, threads=64) as bx:
            A[0] = 1.0

    return main


def test_bad_values_raise_located_errors():
    raises(TileLangTypeError, "not-dict", lambda: _annotated(lambda: T.annotate_pass_configs([("a", 1)])),  # E:not-dict
           "needs a dict")
    raises(TileLangTypeError, "bad-key", lambda: _annotated(lambda: T.annotate_pass_configs({3: True})),  # E:bad-key
           "is not a config name")
    raises(TileLangTypeError, "bad-value", lambda: _annotated(
        lambda: T.annotate_pass_configs({"tl.disable_wgmma": object()})), "is not a bool")  # E:bad-value
    bad_flag = lambda: T.annotate_compile_flags(["-O3", 3])  # noqa: E731  # E:bad-flag
    raises(TileLangTypeError, "bad-flag", lambda: _annotated(bad_flag), "list of strings")
    no_trace = lambda: T.annotate_compile_flags(["-O3"])  # noqa: E731  # E:no-trace
    raises(TileLangSyntaxError, "no-trace", no_trace, "while a kernel is traced")
