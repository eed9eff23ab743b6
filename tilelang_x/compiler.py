"""The compile driver: tile-level ``PrimFunc`` → ``JITKernel`` for one target.

``compile_prim_func`` resolves the target, runs the core stages (``specialize``, ``simplify``,
``verify``) and the backend's stages (``tlx_pipeline``) through one stage runner, so
``TILELANG_X_DUMP=stage,...`` (or ``options["dump"]``) can dump the IR after any of them, then
``tlx_codegen`` → ``tlx_compile`` → ``tlx_load``. Kernels are cached in memory, keyed by the
function's text, ``out_idx``, the target and the options.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from typing import Any

from . import knobs, registry
from .args import normalize_out_idx
from .core_ir.errors import BackendNotImplementedError, TileLangError
from .core_ir.stages import StageContext, run_stages
from .core_ir.stmt import PrimFunc
from .kernel import JITKernel
from .target import Target

__all__ = ["compile_prim_func", "clear_cache", "cache_size"]

_cache: dict[tuple[Any, ...], JITKernel] = {}
_cache_lock = threading.Lock()


def _core_stages() -> list[tuple[str, Any]]:
    try:
        from .core_ir.passes import CORE_STAGES
    except ModuleNotFoundError as exc:  # TODO: drop once core_ir/passes.py has landed
        if exc.name != f"{__package__}.core_ir.passes":
            raise
        return []
    return list(CORE_STAGES)


def _dump_request(options: dict[str, Any]) -> tuple[list[str], str]:
    dump = options.get("dump", knobs.compile.dump)
    if isinstance(dump, str):
        names = [n.strip() for n in dump.split(",") if n.strip()]
    elif dump is True:
        names = ["all"]
    else:
        names = list(dump or ())
    return names, str(options.get("dump_dir", knobs.compile.dump_dir))


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_freeze(v) for v in value]
        return tuple(sorted(items, key=repr)) if isinstance(value, (set, frozenset)) else tuple(items)
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


def _timed(times: dict[str, float], name: str, fn: Any, **kwargs: Any) -> Any:
    start = time.perf_counter()
    try:
        return fn(**kwargs)
    finally:
        times[name] = time.perf_counter() - start


def compile_prim_func(
    func: PrimFunc,
    *,
    target: str | Target | None = None,
    out_idx: int | Sequence[int] | None = None,
    options: dict[str, Any] | None = None,
) -> JITKernel:
    """Compile ``func`` for ``target`` (``None``: ``TILELANG_X_TARGET``, default ``"auto"``).

    ``out_idx`` (default: the function's own) names the parameters the kernel allocates and
    returns; negative indices count from the end. ``options`` go to every stage through
    ``StageContext.options``; ``options["dump"]`` (a list of stage names or ``"all"``) and
    ``options["dump_dir"]`` override the ``TILELANG_X_DUMP`` knobs.
    """
    if not isinstance(func, PrimFunc):
        raise TypeError(f"compile_prim_func expects a PrimFunc, got {type(func).__name__}")
    tgt = registry.resolve_target(target)
    opts = dict(options or {})
    outs = normalize_out_idx(func, out_idx)
    if outs != func.out_idx:
        func = dataclasses.replace(func, out_idx=outs)
    dump, dump_dir = _dump_request(opts)
    opts.pop("dump", None)
    opts.pop("dump_dir", None)
    key = None if dump else (func.script(), outs, tgt, _freeze(opts))
    if key is not None:
        with _cache_lock:
            cached = _cache.get(key)
        if cached is not None:
            return cached
    kernel = _compile(func, tgt, outs, opts, dump, dump_dir)
    if key is not None:
        with _cache_lock:
            kernel = _cache.setdefault(key, kernel)
    return kernel


def _compile(
    func: PrimFunc, tgt: Target, outs: tuple[int, ...], opts: dict[str, Any], dump: list[str], dump_dir: str
) -> JITKernel:
    hooks = registry.hook()
    ctx = StageContext(tgt, opts)
    try:
        stages = _core_stages() + list(hooks.tlx_pipeline(target=tgt) or ())
        lowered = run_stages(func, stages, ctx, dump, dump_dir)
        times = ctx.timings
        source = _timed(times, "codegen", hooks.tlx_codegen, target=tgt, func=lowered, ctx=ctx)
        binary = _timed(times, "compile", hooks.tlx_compile, target=tgt, func=lowered, source=source, ctx=ctx)
        launcher = _timed(times, "load", hooks.tlx_load, target=tgt, func=lowered, binary=binary, ctx=ctx)
    except TileLangError as err:
        raise err.with_loc(func.loc) from None
    if launcher is None:
        raise BackendNotImplementedError(
            f"no installed plugin can run kernels for target {tgt}",
            loc=func.loc,
            hint="see `python -m tilelang_x info` for the plugins and targets available here",
        )
    if source is None:
        source = lowered.script()
    return JITKernel(func, tgt, source, launcher, outs, lowered_func=lowered, stage_times=times)


def clear_cache() -> None:
    """Forget every compiled kernel held in memory."""
    with _cache_lock:
        _cache.clear()


def cache_size() -> int:
    """How many kernels the in-memory cache holds."""
    return len(_cache)
