"""The interpreter backend's hook implementations (and nothing else).

Loading this module is cheap (no numpy, no torch): the interpreter itself is imported
when a kernel is first compiled for it.
"""

from __future__ import annotations

from typing import Any

from tilelang_x.hookspecs import hookimpl
from tilelang_x.target import DetectedDevice, Target, TargetInfo

from . import target as _target


@hookimpl
def tlx_targets() -> list[TargetInfo]:
    return [_target.INFO]


@hookimpl
def tlx_detect() -> list[DetectedDevice]:
    # ``auto`` falls back to the interpreter by itself when no device is found
    return []


@hookimpl
def tlx_status() -> list[tuple[str, bool, str]]:
    return [(_target.NAME, True, "always available")]


@hookimpl
def tlx_resolve_target(name: str, arch: str | None) -> Target | None:
    return _target.resolve(name, arch)


@hookimpl
def tlx_pipeline(target: Target) -> list[tuple[str, Any]] | None:
    if not _target.is_ours(target):
        return None
    return []  # the interpreter runs the verified tile-level IR as it is


@hookimpl
def tlx_infer_layout(target: Target, op: Any, ctx: Any) -> Any:
    return None  # no layouts on the interpreter (see layout.py)


@hookimpl(trylast=True)
def tlx_lower_op(target: Target, op: Any, ctx: Any) -> Any:
    if not _target.is_ours(target):
        return None
    from .lower import default_executor

    return default_executor(op, ctx)


@hookimpl
def tlx_codegen(target: Target, func: Any, ctx: Any) -> str | None:
    if not _target.is_ours(target):
        return None
    from .codegen import generate

    return generate(func)


@hookimpl
def tlx_compile(target: Target, func: Any, source: str, ctx: Any) -> Any:
    if not _target.is_ours(target):
        return None
    from .compile import build_program

    options = getattr(ctx, "options", None)
    return build_program(func, target, options=options if isinstance(options, dict) else None)


@hookimpl
def tlx_load(target: Target, func: Any, binary: Any, ctx: Any) -> Any:
    if not _target.is_ours(target):
        return None
    from .runtime import make_launcher

    return make_launcher(binary)


@hookimpl
def tlx_profiler(target: Target) -> Any:
    if not _target.is_ours(target):
        return None
    from .runtime import wallclock_timer

    return wallclock_timer
