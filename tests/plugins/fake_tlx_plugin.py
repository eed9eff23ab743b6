"""A stand-in third-party backend, installed by the tests as the distribution ``fake-tlx-plugin``.

Target ``fakecpu`` runs on the CPU: its "compiler" looks the kernel up by name in ``KERNELS``
(plain numpy/torch functions of the parameter values), so the compile driver and the kernel
object can be tested end to end without the interpreter. It also answers
``tlx_resolve_target("hip", ...)`` to show that a third-party plugin's firstresult hooks win over
the built-in ones.
"""

from __future__ import annotations

from typing import Any

from tilelang_x.hookspecs import hookimpl
from tilelang_x.target import DetectedDevice, Target, TargetInfo

CALLS: list[str] = []


def _add(args: list[Any], dims: dict[Any, int]) -> None:
    a, b, c = args[:3]
    c[...] = a + b


def _scale(args: list[Any], dims: dict[Any, int]) -> None:
    x, alpha, y, z = args
    y[...] = x * alpha
    z[...] = x - alpha


KERNELS = {"add": _add, "scale": _scale}


@hookimpl
def tlx_targets() -> list[TargetInfo]:
    return [TargetInfo("fakecpu", ("v1", "v2"), "a fake CPU backend for tests", {"device": "cpu"})]


@hookimpl
def tlx_detect() -> list[DetectedDevice]:
    return []


@hookimpl
def tlx_status() -> list[tuple[str, bool, str]]:
    return [("fakecpu", True, "")]


@hookimpl
def tlx_resolve_target(name: str, arch: str | None) -> Target | None:
    if name == "fakecpu":
        return Target("fakecpu", arch or "v1")
    if name == "hip" and arch == "gfx-fake":
        return Target("hip", "gfx-fake", (("by", "fake"),))
    return None


@hookimpl
def tlx_pipeline(target: Target) -> Any:
    if target.backend != "fakecpu":
        return None

    def mark(func: Any, ctx: Any) -> Any:
        CALLS.append(f"fake_lower:{func.name}")
        return func

    return [("fake_lower", mark)]


@hookimpl
def tlx_codegen(target: Target, func: Any, ctx: Any) -> str | None:
    if target.backend != "fakecpu":
        return None
    return f"// fakecpu source of {func.name}"


@hookimpl
def tlx_compile(target: Target, func: Any, source: str, ctx: Any) -> Any:
    if target.backend != "fakecpu":
        return None
    CALLS.append(f"compile:{func.name}")
    return KERNELS[func.name]


@hookimpl
def tlx_load(target: Target, func: Any, binary: Any, ctx: Any) -> Any:
    if target.backend != "fakecpu":
        return None
    return binary
