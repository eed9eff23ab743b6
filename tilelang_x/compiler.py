"""The compile driver: tile-level ``PrimFunc`` → ``JITKernel`` for one target.

``compile_prim_func`` resolves the target, runs the core stages (``specialize``, ``simplify``,
``safe_access``, ``verify``) and the backend's stages (``tlx_pipeline``) through one stage runner, then
``tlx_codegen`` → ``tlx_compile`` → ``tlx_load``. Kernels are cached in memory, keyed by the
function's text, ``out_idx``, the target and the options; the expensive part of a compile (the
device toolchain) is cached on disk by the backend itself through ``tilelang_x.cache``.

Dumps: ``TILELANG_X_DUMP=stage,...`` (``knobs.compile.dump``) or ``options["dump"]`` writes the IR
after each named stage to ``TILELANG_X_DUMP_DIR`` / ``options["dump_dir"]``, one file per stage,
``<kernel>.<NN>.<stage>.txt``. Besides the stages, ``input`` is the IR as the frontend built it
and ``codegen`` the generated source; ``all`` means every one. An unknown name is an error that
lists the names this target has.

A third-party plugin whose hook raises something other than a ``TileLangError`` while a kernel
compiles is named in a ``PluginWarning``, left out, and the kernel is compiled again without it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time
import types
import warnings
from collections.abc import Sequence
from typing import Any

from . import knobs, registry
from .args import normalize_out_idx
from .body_options import with_body_options
from .core_ir.errors import BackendNotImplementedError, TileLangError
from .core_ir.kernel_parts import kernel_parts
from .core_ir.source import caller_loc
from .core_ir.stages import StageContext, dump_path, run_stages
from .core_ir.stmt import PrimFunc, Seq
from .engine.callback import postprocess
from .kernel import JITKernel
from .pass_config import check_pass_configs
from .target import Target

__all__ = ["Build", "build", "compile_prim_func", "clear_cache", "cache_size", "dump_stage_names"]

logger = logging.getLogger(__name__)

#: The pseudo-stages a dump can name besides the real ones: the IR as built, the generated source.
INPUT_STAGE = "input"
CODEGEN_STAGE = "codegen"
#: File extension of the ``codegen`` dump per backend (``.txt`` otherwise).
_SOURCE_SUFFIX = {"cuda": ".cu", "hip": ".hip", "metal": ".metal", "ascend": ".cpp"}

_cache: dict[tuple[Any, ...], JITKernel] = {}
_cache_lock = threading.Lock()


def _core_stages() -> list[tuple[str, Any]]:
    from .core_ir.passes import CORE_STAGES

    return list(CORE_STAGES)


def _dump_request(options: dict[str, Any]) -> tuple[list[str], str]:
    dump = options.get("dump", knobs.compile.dump)
    if dump is None or dump is False:
        names: list[str] = []
    elif dump is True:
        names = ["all"]
    elif isinstance(dump, str):
        names = [n.strip() for n in dump.split(",") if n.strip()]
    elif isinstance(dump, (list, tuple, set, frozenset)) and all(isinstance(n, str) for n in dump):
        names = [n.strip() for n in dump if n.strip()]
    else:
        raise TileLangError(
            f"dump must be a stage name, a comma-separated string, a list of names, True or 'all'; got {dump!r}",
            hint="e.g. options={'dump': 'all'} or TILELANG_X_DUMP=input,codegen",
        )
    dump_dir = options.get("dump_dir") or knobs.compile.dump_dir
    return names, os.path.abspath(os.path.expanduser(str(dump_dir)))


def dump_stage_names(target: str | Target | None = None) -> list[str]:
    """The names ``dump`` accepts for ``target``, in order: ``input``, the core stages, the
    backend's stages, ``codegen`` (``all`` means every one)."""
    tgt = registry.resolve_target(target)
    stages = _core_stages() + list(registry.hook().tlx_pipeline(target=tgt) or ())
    return [INPUT_STAGE, *(name for name, _ in stages), CODEGEN_STAGE]


def _check_dump(names: list[str], known: list[str], tgt: Target, dump_dir: str) -> None:
    unknown = [n for n in names if n != "all" and n not in known]
    if unknown:
        raise TileLangError(
            f"unknown stage name{'s' if len(unknown) > 1 else ''} for dumping: {', '.join(unknown)}",
            hint=f"stages for target {tgt}: {', '.join(known)} (or 'all'); set them with TILELANG_X_DUMP "
            "or options['dump']",
        )
    try:
        os.makedirs(dump_dir, exist_ok=True)
    except OSError as exc:
        raise TileLangError(
            f"cannot write IR dumps to {dump_dir}: {exc.strerror or exc}",
            hint="choose another folder with TILELANG_X_DUMP_DIR (knobs.compile.dump_dir) or options['dump_dir']",
        ) from None


def _write_dump(path: str, text: str) -> None:
    try:
        with open(path, "w") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise TileLangError(
            f"cannot write the IR dump {path}: {exc.strerror or exc}",
            hint="choose another folder with TILELANG_X_DUMP_DIR (knobs.compile.dump_dir) or options['dump_dir']",
        ) from None


def _with_default_pass_configs(opts: dict[str, Any]) -> dict[str, Any]:
    """Merge ``TILELANG_X_PASS_CONFIGS`` (a JSON object) under the kernel's own pass_configs."""
    text = knobs.compile.pass_configs
    if not text:
        return opts
    try:
        defaults = json.loads(text)
    except ValueError as exc:
        raise TileLangError(f"TILELANG_X_PASS_CONFIGS is not valid JSON: {exc}",
                            hint='e.g. TILELANG_X_PASS_CONFIGS=\'{"tlx.staged_epilogue": false}\'') from None
    if not isinstance(defaults, dict):
        raise TileLangError("TILELANG_X_PASS_CONFIGS must be a JSON object of pass_configs",
                            hint='e.g. TILELANG_X_PASS_CONFIGS=\'{"tlx.staged_epilogue": false}\'')
    opts["pass_configs"] = {**defaults, **(opts.get("pass_configs") or {})}
    return opts


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
    ``StageContext.options``, except two that the driver takes: ``options["dump"]`` (stage names
    as a list or a comma-separated string, ``True`` or ``"all"``; see ``dump_stage_names``) and
    ``options["dump_dir"]``, which override ``TILELANG_X_DUMP`` / ``TILELANG_X_DUMP_DIR``.
    """
    if not isinstance(func, PrimFunc):
        raise TypeError(f"compile_prim_func expects a PrimFunc, got {type(func).__name__}")
    try:
        tgt = registry.resolve_target(target)
    except TileLangError as err:
        raise err.with_loc(caller_loc()) from None
    opts = _with_default_pass_configs(with_body_options(func, dict(options or {})))
    check_pass_configs(opts.get("pass_configs") or {}, func.loc)
    outs = normalize_out_idx(func, out_idx)
    if outs != func.out_idx:
        func = dataclasses.replace(func, out_idx=outs)
    try:
        dump, dump_dir = _dump_request(opts)
    except TileLangError as err:
        raise err.with_loc(func.loc) from None
    opts.pop("dump", None)
    opts.pop("dump_dir", None)
    # the location too: a kernel's errors name its own lines, not those of another with the same text
    key = None if dump else (func.script(), func.loc, outs, tgt, _freeze(opts))
    if key is not None:
        with _cache_lock:
            cached = _cache.get(key)
        if cached is not None:
            return cached
    kernel = _compile_isolated(func, tgt, outs, opts, dump, dump_dir)
    if key is not None:
        with _cache_lock:
            kernel = _cache.setdefault(key, kernel)
    return kernel


def _compile_isolated(
    func: PrimFunc, tgt: Target, outs: tuple[int, ...], opts: dict[str, Any], dump: list[str], dump_dir: str
) -> JITKernel:
    """``_compile``, leaving out (and naming) any third-party plugin that crashes on the way."""
    left_out: list[str] = []
    while True:
        try:
            return _compile(func, tgt, outs, opts, dump, dump_dir)
        except TileLangError as err:
            if left_out:  # say why the plugin that could have answered is gone
                note = "left out after failing: " + "; ".join(left_out)
                err.hint = f"{err.hint}; {note}" if err.hint else note
                err.args = (str(err._render()),)
            raise
        except Exception as exc:
            culprit = _disable_culprit(exc)
            if culprit is None:
                raise
            left_out.append(culprit)


@dataclasses.dataclass
class Build:
    """What ``build`` produces: everything a launcher is made from."""

    lowered: PrimFunc
    source: str | None
    binary: Any
    ctx: StageContext


def build(
    func: PrimFunc, tgt: Target, opts: dict[str, Any], dump: Sequence[str] = (), dump_dir: str | None = None
) -> Build:
    """Every step of a compile short of ``tlx_load``: the stages, codegen and the device
    toolchain. Needs no device, so the autotuner runs it in worker processes."""
    hooks = registry.hook()
    ctx = StageContext(tgt, dict(opts))
    try:
        stages = _core_stages() + list(hooks.tlx_pipeline(target=tgt) or ())
        stages = [(INPUT_STAGE, lambda f, c: f), *stages]
        if dump:
            _check_dump(list(dump), [*(name for name, _ in stages), CODEGEN_STAGE], tgt, str(dump_dir))
        lowered = run_stages(func, stages, ctx, [n for n in dump if n != CODEGEN_STAGE], dump_dir if dump else None)
        ctx.timings.pop(INPUT_STAGE, None)
        times = ctx.timings
        source = _timed(times, "codegen", hooks.tlx_codegen, target=tgt, func=lowered, ctx=ctx)
        if source is not None:
            source = postprocess(tgt, source)
        if dump and ("all" in dump or CODEGEN_STAGE in dump):
            path = dump_path(str(dump_dir), len(stages), CODEGEN_STAGE, lowered.name)
            path = path[: -len(".txt")] + _SOURCE_SUFFIX.get(tgt.backend, ".txt")
            _write_dump(path, source if source is not None else lowered.script())
        if dump:
            logger.info("IR dumps of `%s` for %s written to %s", func.name, tgt, dump_dir)
        binary = _timed(times, "compile", hooks.tlx_compile, target=tgt, func=lowered, source=source, ctx=ctx)
    except TileLangError as err:
        raise err.with_loc(func.loc) from None
    return Build(lowered, source, binary, ctx)


def _load(func: PrimFunc, tgt: Target, built: Build) -> Any:
    try:
        launcher = _timed(built.ctx.timings, "load", registry.hook().tlx_load, target=tgt, func=built.lowered,
                          binary=built.binary, ctx=built.ctx)
    except TileLangError as err:
        raise err.with_loc(func.loc) from None
    if launcher is None:
        raise BackendNotImplementedError(
            f"no installed plugin can run kernels for target {tgt}",
            loc=func.loc,
            hint="see `python -m tilelang_x info` for the plugins and targets available here",
        )
    return launcher


def _compile(
    func: PrimFunc, tgt: Target, outs: tuple[int, ...], opts: dict[str, Any], dump: list[str], dump_dir: str
) -> JITKernel:
    builds = [build(part, tgt, opts, dump, dump_dir) for part in kernel_parts(func)]
    launchers = [_load(func, tgt, b) for b in builds]
    sources = [b.source if b.source is not None else b.lowered.script() for b in builds]
    if len(builds) == 1:
        lowered, launcher = builds[0].lowered, launchers[0]
    else:  # one function per T.Kernel block (core_ir/kernel_parts.py), launched in order
        lowered = dataclasses.replace(func, params=builds[0].lowered.params,
                                      body=Seq(tuple(b.lowered.body for b in builds), func.body.loc))
        launcher = _InOrder(launchers)
    times: dict[str, float] = {}
    for b in builds:
        for stage, seconds in b.ctx.timings.items():
            times[stage] = times.get(stage, 0.0) + seconds
    return JITKernel(func, tgt, "\n".join(sources), launcher, outs, lowered_func=lowered, stage_times=times)


class _InOrder:
    """One launcher that runs ``launchers`` one after the other with the same arguments. It offers
    the parts' fast entry (``dim_names``, ``launch_on``: see ``args_fast``) when they all do, with
    the same dims."""

    def __init__(self, launchers: list[Any]) -> None:
        self.launchers = launchers
        names = {getattr(launch, "dim_names", None) for launch in launchers}
        if len(names) == 1 and None not in names and all(callable(getattr(launch, "launch_on", None))
                                                         for launch in launchers):
            self.dim_names = names.pop()
            self.launch_on = self._launch_on

    def __call__(self, values: Any, dims: Any = ()) -> None:
        for launch in self.launchers:
            launch(values, dims)

    def _launch_on(self, device: int, args: Any, dims: tuple[int, ...]) -> None:
        for launch in self.launchers:
            launch.launch_on(device, args, dims)


# ---- isolating a crashing third-party plugin -------------------------------------------------
def _hook_functions() -> dict[types.CodeType, tuple[str, str]]:
    """The code object of every third-party hookimpl -> (plugin name, hook name)."""
    records = {r.name: r for r in registry.plugins()}
    pm = registry.plugin_manager()
    found: dict[types.CodeType, tuple[str, str]] = {}
    for name in pm.hook.__dict__:
        caller = getattr(pm.hook, name, None)
        if caller is None or not hasattr(caller, "get_hookimpls"):
            continue
        for impl in caller.get_hookimpls():
            record = records.get(impl.plugin_name)
            if record is None or record.builtin:
                continue
            code = getattr(impl.function, "__code__", None)
            if code is not None:
                found[code] = (impl.plugin_name, name)
    return found


def _disable_culprit(exc: BaseException) -> str | None:
    """If a third-party hookimpl is on ``exc``'s traceback, mark its plugin failed (a
    ``PluginWarning`` naming it) and return a description of what happened, so the caller can
    compile again without it; else ``None``."""
    functions = _hook_functions()
    if not functions:
        return None
    culprit = None
    tb = exc.__traceback__
    while tb is not None:
        hit = functions.get(tb.tb_frame.f_code)
        if hit is not None:
            culprit = hit  # keep the innermost one
        tb = tb.tb_next
    if culprit is None:
        return None
    plugin, hook_name = culprit
    record = {r.name: r for r in registry.plugins()}.get(plugin)
    if record is None or not record.ok:
        return None
    with warnings.catch_warnings():
        # the registry warns from its own frame: point the warning at the user's call instead
        warnings.simplefilter("ignore", registry.PluginWarning)
        registry.mark_failed(record, f"{hook_name} raised {registry.describe_exception(exc)} while compiling a kernel")
    origin = f" from {record.dist} {record.version}" if record.dist else ""
    warnings.warn(
        f"tilelang-x plugin {plugin!r} ({record.module}{origin}) failed: {hook_name} raised "
        f"{registry.describe_exception(exc)}; it is left out and the kernel is compiled without it "
        "(see `python -m tilelang_x info`)",
        registry.PluginWarning,
        stacklevel=4,
    )
    logger.debug("plugin %s failed while compiling", plugin, exc_info=exc)
    return f"plugin {plugin!r}{origin}: {hook_name} raised {registry.describe_exception(exc)}"


def clear_cache() -> None:
    """Forget every compiled kernel held in memory."""
    with _cache_lock:
        _cache.clear()


def cache_size() -> int:
    """How many kernels the in-memory cache holds."""
    return len(_cache)
