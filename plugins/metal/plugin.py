"""Hook implementations of the Metal backend (detection and target names; no compiler yet)."""

from __future__ import annotations

from typing import Any

from ...hookspecs import hookimpl
from . import target as metal


@hookimpl
def tlx_targets() -> list[Any]:
    return [metal.INFO]


@hookimpl
def tlx_detect() -> list[Any]:
    return metal.detect()


@hookimpl
def tlx_status() -> list[tuple[str, bool, str]]:
    return metal.status()


@hookimpl
def tlx_resolve_target(name: str, arch: str | None) -> Any:
    return metal.resolve(name, arch)


@hookimpl
def tlx_pipeline(target: Any) -> Any:
    if target.backend == metal.BACKEND:
        raise metal.not_implemented("compile kernels")
    return None


@hookimpl
def tlx_codegen(target: Any, func: Any, ctx: Any) -> Any:
    if target.backend == metal.BACKEND:
        raise metal.not_implemented("generate code").with_loc(func.loc)
    return None
