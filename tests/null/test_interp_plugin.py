"""The interpreter as a plugin: its hooks, and a third-party plugin overriding one tile op."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pluggy
import pytest

from tilelang_x import hookspecs
from tilelang_x.core_ir import dtypes as D
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.buffer import Buffer, Region
from tilelang_x.core_ir.errors import BackendNotImplementedError, UnknownTargetError
from tilelang_x.core_ir.stmt import Alloc, Kernel, PrimFunc, Seq
from tilelang_x.core_ir.tileops import Copy, Fill, TileOp
from tilelang_x.hookspecs import hookimpl
from tilelang_x.plugins.interp import plugin
from tilelang_x.plugins.interp.compile import build_program
from tilelang_x.plugins.interp.runtime import make_launcher
from tilelang_x.target import Target

INTERP = Target("interp")


def fill_kernel() -> PrimFunc:
    Out = Buffer("Out", (8,), D.float32)
    s = Buffer("s", (8,), D.float32, "shared")
    bx = E.Var("bx")
    body = Seq((Alloc(s), Fill(Region.full(s), E.const(3.0)), Copy(Region.full(s), Region.full(Out))))
    return PrimFunc("f", (Out,), Seq((Kernel((E.const(1),), (bx,), (32,), body),)))


def test_hooks_describe_the_target():
    (info,) = plugin.tlx_targets()
    assert info.backend == "interp" and info.description
    assert plugin.tlx_detect() == []
    assert plugin.tlx_status() == [("interp", True, "always available")]
    assert plugin.tlx_resolve_target(name="interp", arch=None) == INTERP
    assert plugin.tlx_resolve_target(name="cuda", arch="sm_90a") is None
    with pytest.raises(UnknownTargetError):
        plugin.tlx_resolve_target(name="interp", arch="sm_80")
    assert plugin.tlx_pipeline(target=INTERP) == []
    assert plugin.tlx_pipeline(target=Target("cuda")) is None


def test_codegen_is_the_ir_text_and_profiler_times():
    f = fill_kernel()
    assert plugin.tlx_codegen(target=INTERP, func=f, ctx=None) == f.script()
    assert plugin.tlx_codegen(target=Target("cuda"), func=f, ctx=None) is None
    binary = plugin.tlx_compile(target=INTERP, func=f, source="", ctx=None)
    launch = plugin.tlx_load(target=INTERP, func=f, binary=binary, ctx=None)
    out = np.zeros(8, np.float32)
    timer = plugin.tlx_profiler(target=INTERP)
    times = timer(lambda: launch([out], None), 1, 2)
    assert times and all(t >= 0 for t in times)
    assert (out == 3).all()


class _FasterFill:
    """A third-party plugin: replaces the interpreter's fill, leaves every other op alone."""

    @hookimpl
    def tlx_lower_op(self, target, op, ctx):
        if target.backend != "interp" or not isinstance(op, Fill):
            return None

        def fill(rt):
            rt.write(op.dst, rt.eval(op.value) * 2)

        return fill


def _manager(*extra) -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(plugin, "interp")
    for p in extra:
        pm.register(p)
    return pm


def test_third_party_plugin_overrides_one_op():
    f = fill_kernel()
    out = np.zeros(8, np.float32)
    make_launcher(build_program(f, INTERP, _manager().hook.tlx_lower_op))([out])
    assert (out == 3).all()
    make_launcher(build_program(f, INTERP, _manager(_FasterFill()).hook.tlx_lower_op))([out])
    assert (out == 6).all()


def test_unknown_tile_op_needs_an_executor():
    from dataclasses import dataclass, field

    from tilelang_x.core_ir.source import SourceLoc

    @dataclass(frozen=True, eq=False)
    class Mystery(TileOp):
        dst: Region
        loc: SourceLoc | None = field(default=None, compare=False)
        name = "mystery"

    Out = Buffer("Out", (4,), D.float32)
    f = PrimFunc("m", (Out,), Kernel((E.const(1),), (E.Var("bx"),), (32,), Mystery(Region.full(Out))))
    with pytest.raises(BackendNotImplementedError, match="mystery"):
        build_program(f, INTERP, _manager().hook.tlx_lower_op)


def test_loading_the_plugin_is_cheap():
    code = "import sys, tilelang_x.plugins.interp.plugin; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
