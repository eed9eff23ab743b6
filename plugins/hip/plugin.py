"""Hook implementations of the HIP backend (detection and target names; no compiler yet)."""

from __future__ import annotations

from typing import Any

from ...hookspecs import hookimpl
from . import target as hip


@hookimpl
def tlx_targets() -> list[Any]:
    return [hip.INFO]


@hookimpl
def tlx_detect() -> list[Any]:
    return hip.detect()


@hookimpl
def tlx_status() -> list[tuple[str, bool, str]]:
    return hip.status()


@hookimpl
def tlx_resolve_target(name: str, arch: str | None) -> Any:
    return hip.resolve(name, arch)


@hookimpl
def tlx_pipeline(target: Any) -> Any:
    if target.backend == hip.BACKEND:
        raise hip.not_implemented("compile kernels")
    return None


@hookimpl
def tlx_codegen(target: Any, func: Any, ctx: Any) -> Any:
    if target.backend == hip.BACKEND:
        raise hip.not_implemented("generate code").with_loc(func.loc)
    return None
