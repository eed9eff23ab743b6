"""Hook implementations of the Ascend backend (detection and target names; no compiler yet)."""

from __future__ import annotations

from typing import Any

from ...hookspecs import hookimpl
from . import target as ascend


@hookimpl
def tlx_targets() -> list[Any]:
    return [ascend.INFO]


@hookimpl
def tlx_detect() -> list[Any]:
    return ascend.detect()


@hookimpl
def tlx_status() -> list[tuple[str, bool, str]]:
    return ascend.status()


@hookimpl
def tlx_resolve_target(name: str, arch: str | None) -> Any:
    return ascend.resolve(name, arch)


@hookimpl
def tlx_pipeline(target: Any) -> Any:
    if target.backend == ascend.BACKEND:
        raise ascend.not_implemented("compile kernels")
    return None


@hookimpl
def tlx_codegen(target: Any, func: Any, ctx: Any) -> Any:
    if target.backend == ascend.BACKEND:
        raise ascend.not_implemented("generate code").with_loc(func.loc)
    return None
