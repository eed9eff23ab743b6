"""The compile options a kernel's body adds (``T.annotate_pass_configs``,
``T.annotate_compile_flags``), merged into those the jit or ``tilelang.compile`` gives.

As in TileLang, the given pass configs win where both name a key, and the body's flags come
before the given ``compile_flags``; the CUDA backend passes them all to NVRTC / nvcc after
``tl.device_compile_flags``.
"""

from __future__ import annotations

from typing import Any

from .core_ir.stmt import COMPILE_FLAGS, PASS_CONFIGS, PrimFunc

__all__ = ["with_body_options"]


def with_body_options(func: PrimFunc, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` (not changed) with ``func``'s own pass configs and compile flags merged in."""
    configs = dict(func.attr(PASS_CONFIGS, ()))
    flags = list(func.attr(COMPILE_FLAGS, ()))
    if not configs and not flags:
        return options
    out = dict(options)
    if configs:
        out["pass_configs"] = {**configs, **(options.get("pass_configs") or {})}
    if flags:
        out["compile_flags"] = [*flags, *(options.get("compile_flags") or ())]
    return out
