"""The plugin registry: finds backends through entry points and answers "which target?".

Every backend, built-in or third-party, is a module named by an entry point of group
``tilelang_x.backends``. The plugin manager is created on first use (never at ``import tilelang_x``)
and loads them all: the built-in ones first, third-party ones after, so that pluggy, which calls
the most recently registered implementation first, lets a third-party plugin answer a
*firstresult* hook (``tlx_lower_op``, ``tlx_codegen``...) before a built-in one.

A plugin whose import fails, whose hookimpls do not match the hookspecs, or whose discovery hooks
(``tlx_targets``, ``tlx_detect``, ``tlx_status``, ``tlx_resolve_target``) raise is recorded as
failed with the reason, warned about once, and unregistered: the others, the interpreter among
them, keep working. ``python -m tilelang_x info`` shows the records.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import logging
import threading
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pluggy

from . import hookspecs, knobs
from .core_ir.errors import TileLangError, UnknownTargetError
from .target import DetectedDevice, Target, TargetInfo

__all__ = [
    "PluginRecord", "PluginWarning", "InterpreterFallbackWarning", "hook", "plugin_manager",
    "plugins", "targets", "target_info", "statuses", "detected_devices", "resolve_target",
    "auto_choice", "reset",
]

logger = logging.getLogger(__name__)

#: The distribution that ships the built-in plugins.
BUILTIN_DIST = "tilelang-x"
#: Hooks whose failure makes a plugin unavailable instead of failing the caller.
DISCOVERY_HOOKS = ("tlx_targets", "tlx_detect", "tlx_status", "tlx_resolve_target")
INTERP = "interp"


class PluginWarning(UserWarning):
    """A backend plugin could not be loaded or misbehaved; it is left out."""


class InterpreterFallbackWarning(UserWarning):
    """``target="auto"`` found no usable accelerator and runs kernels in the interpreter."""


@dataclass
class PluginRecord:
    """What the registry knows about one entry point: where it came from and whether it works."""

    name: str
    module: str
    status: str = "loaded"  # "loaded" or "failed"
    error: str | None = None
    dist: str | None = None
    version: str | None = None
    builtin: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "loaded"


class _State:
    """Everything the registry caches; ``reset()`` replaces it."""

    def __init__(self) -> None:
        self.pm: pluggy.PluginManager | None = None
        self.records: dict[str, PluginRecord] = {}
        self.devices: list[DetectedDevice] | None = None
        self.warned: set[str] = set()
        self.fallback_noted = False


_lock = threading.RLock()
_state = _State()


# ---- loading ---------------------------------------------------------------------------------
def _entry_points() -> list[md.EntryPoint]:
    return list(md.entry_points(group=hookspecs.ENTRY_POINT_GROUP))


def _dist_of(ep: md.EntryPoint) -> tuple[str | None, str | None]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None, None
    try:
        return dist.metadata["Name"], dist.version
    except Exception:  # noqa: BLE001 - broken metadata must not stop discovery
        return None, None


def _is_builtin(ep: md.EntryPoint, dist: str | None) -> bool:
    if dist is not None:
        return _normalize(dist) == BUILTIN_DIST
    return ep.value.startswith("tilelang_x.plugins.")


def _normalize(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def describe_exception(exc: BaseException, limit: int = 400) -> str:
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _warn_once(key: str, message: str) -> None:
    if key in _state.warned:
        return
    _state.warned.add(key)
    logger.debug(message)
    warnings.warn(message, PluginWarning, stacklevel=3)


def mark_failed(record: PluginRecord, error: str, pm: pluggy.PluginManager | None = None) -> None:
    record.status = "failed"
    record.error = error
    pm = pm if pm is not None else _state.pm
    if pm is not None and pm.has_plugin(record.name):
        pm.unregister(name=record.name)
    _warn_once(
        f"plugin:{record.name}",
        f"tilelang-x plugin {record.name!r} ({record.module}) is unavailable: {error}",
    )


def _unknown_hooks(pm: pluggy.PluginManager, plugin: Any) -> list[str]:
    names = []
    for caller in pm.get_hookcallers(plugin) or ():
        if caller.has_spec():
            continue
        if any(impl.plugin is plugin and not impl.optionalhook for impl in caller.get_hookimpls()):
            names.append(caller.name)
    return sorted(names)


def _load(pm: pluggy.PluginManager, records: dict[str, PluginRecord], eps: Iterable[md.EntryPoint]) -> None:
    entries = []
    for ep in eps:
        dist, version = _dist_of(ep)
        entries.append((ep, dist, version, _is_builtin(ep, dist)))
    # Built-ins first (interp leading), then third-party plugins; pluggy calls the latest first.
    entries.sort(key=lambda e: (not e[3], e[0].name != INTERP, e[0].name))
    for ep, dist, version, builtin in entries:
        record = PluginRecord(ep.name, ep.value, dist=dist, version=version, builtin=builtin)
        if ep.name in records:
            other = records[ep.name]
            record.name = f"{ep.name}@{dist or ep.value}"
            record.status = "failed"
            record.error = f"entry point name {ep.name!r} is already used by {other.dist or other.module}"
            records[record.name] = record
            _warn_once(f"plugin:{record.name}", f"tilelang-x plugin {ep.value}: {record.error}")
            continue
        records[ep.name] = record
        try:
            plugin = ep.load()
        except Exception as exc:  # noqa: BLE001 - any import failure only disables this plugin
            mark_failed(record, f"import failed: {describe_exception(exc)}", pm)
            continue
        try:
            pm.register(plugin, name=ep.name)
        except Exception as exc:  # noqa: BLE001 - e.g. pluggy.PluginValidationError
            mark_failed(record, f"invalid hookimpls: {describe_exception(exc)}", pm)
            continue
        unknown = _unknown_hooks(pm, plugin)
        if unknown:
            mark_failed(record, f"implements unknown hook(s) {', '.join(unknown)} (misspelled?)", pm)


def plugin_manager() -> pluggy.PluginManager:
    """The plugin manager, created and loaded with every ``tilelang_x.backends`` entry point on
    first use."""
    pm = _state.pm
    if pm is not None:
        return pm
    with _lock:
        if _state.pm is None:
            pm = pluggy.PluginManager(hookspecs.PROJECT)
            pm.add_hookspecs(hookspecs)
            records: dict[str, PluginRecord] = {}
            _load(pm, records, _entry_points())
            _state.records = records
            _state.pm = pm
        return _state.pm


def hook() -> Any:
    """The hook relay: ``hook().tlx_lower_op(target=..., op=..., ctx=...)``."""
    return plugin_manager().hook


def plugins() -> list[PluginRecord]:
    """Every plugin entry point found, in registration order, with its status and error."""
    plugin_manager()
    return list(_state.records.values())


def reset() -> None:
    """Forget the plugin manager and every cached answer (for tests; the next use reloads)."""
    global _state
    with _lock:
        _state = _State()
        importlib.invalidate_caches()


# ---- calling discovery hooks one plugin at a time -------------------------------------------
def _call_each(hook_name: str, /, **kwargs: Any) -> Iterable[tuple[str, Any]]:
    """Yield ``(plugin name, result)`` for each implementation of hook ``hook_name``, in pluggy's call
    order, isolating failures: a plugin that raises (other than a ``TileLangError``, which is an
    answer meant for the user) is marked failed and skipped."""
    caller = getattr(hook(), hook_name)
    for impl in reversed(caller.get_hookimpls()):
        if impl.wrapper or impl.hookwrapper:
            continue
        record = _state.records.get(impl.plugin_name)
        if record is not None and not record.ok:
            continue
        try:
            result = impl.function(*(kwargs[arg] for arg in impl.argnames))
        except TileLangError:
            raise
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not stop the others
            if record is None:
                record = _state.records.setdefault(
                    impl.plugin_name, PluginRecord(impl.plugin_name, repr(impl.plugin))
                )
            with _lock:
                mark_failed(record, f"{hook_name} raised {describe_exception(exc)}")
                _state.devices = None
            continue
        yield impl.plugin_name, result


def _collect(hook_name: str, /, **kwargs: Any) -> list[tuple[str, Any]]:
    out = []
    for plugin, result in _call_each(hook_name, **kwargs):
        for item in result or ():
            out.append((plugin, item))
    order = {name: i for i, name in enumerate(_state.records)}
    out.sort(key=lambda pair: order.get(pair[0], len(order)))  # registration order (stable)
    return out


def targets() -> list[tuple[str, TargetInfo]]:
    """``(plugin name, TargetInfo)`` for every target kind an available plugin provides."""
    return _collect("tlx_targets")


def target_info(target: Target | str) -> TargetInfo | None:
    """The description of ``target``'s backend, or ``None`` when no plugin describes it."""
    backend = target.backend if isinstance(target, Target) else str(target).partition(":")[0]
    for _, info in targets():
        if info.backend == backend:
            return info
    return None


def statuses() -> list[tuple[str, str, bool, str]]:
    """``(plugin name, target name, available, reason)`` from every plugin's ``tlx_status``."""
    return [(plugin, *item) for plugin, item in _collect("tlx_status")]


def detected_devices() -> list[DetectedDevice]:
    """Devices present on this machine, highest priority first (cached until ``reset()``)."""
    devices = _state.devices
    if devices is None:
        found = [device for _, device in _collect("tlx_detect")]
        devices = sorted(found, key=lambda d: -d.priority)
        _state.devices = devices
    return list(devices)


# ---- resolving target strings ----------------------------------------------------------------
def _available(target: Target, table: list[tuple[str, str, bool, str]]) -> tuple[bool, str]:
    names = {str(target), target.backend}
    for _, name, ok, reason in table:
        if name in names:
            return ok, reason
    return True, ""


def auto_choice() -> tuple[Target, str]:
    """What ``target="auto"`` means here, and why: the highest-priority detected device whose
    backend can build kernels, else the interpreter."""
    devices = [d for d in detected_devices() if d.target.backend != INTERP]
    table = statuses() if devices else []
    skipped = []
    for device in devices:
        ok, reason = _available(device.target, table)
        if ok:
            return device.target, f"detected {device.name}"
        skipped.append(f"{device.name} ({device.target}): {reason}")
    try:
        interp = _resolve_named(INTERP, None)
    except UnknownTargetError:
        interp = None
    interp = interp or Target(INTERP)
    if skipped:
        return interp, "no usable accelerator: " + "; ".join(skipped)
    return interp, "no accelerator found"


def _note_fallback(reason: str) -> None:
    if _state.fallback_noted:
        return
    _state.fallback_noted = True
    message = f"{reason}; using the interpreter (set target= or TILELANG_X_TARGET to choose)"
    logger.info(message)
    warnings.warn(message, InterpreterFallbackWarning, stacklevel=3)


def _available_targets() -> str:
    parts = []
    for _, info in targets():
        parts.append(f"{info.backend} ({', '.join(info.archs)})" if info.archs else info.backend)
    return ", ".join(parts) or "none (no plugin could be loaded: see `python -m tilelang_x info`)"


def _resolve_named(name: str, arch: str | None) -> Target | None:
    for _, result in _call_each("tlx_resolve_target", name=name, arch=arch):
        if result is not None:
            return result
    return None


def _complete(target: Target) -> Target:
    """A detected device's target may leave the architecture open (finding it can be costly):
    the plugin's ``tlx_resolve_target`` fills it in, as it does for a target named without one."""
    if target.arch is not None:
        return target
    return _resolve_named(target.backend, None) or target


def resolve_target(spec: str | Target | None = None) -> Target:
    """Turn a target spec into a ``Target``.

    ``None`` reads ``knobs.target.default`` (``TILELANG_X_TARGET``, default ``"auto"``);
    ``"auto"`` picks the highest-priority usable device, else the interpreter (said once);
    ``"cuda:sm_90a"`` asks the plugins' ``tlx_resolve_target("cuda", "sm_90a")``. Raises
    ``UnknownTargetError`` listing the available targets when no plugin knows the name.
    """
    if isinstance(spec, Target):
        return _complete(spec)
    if spec is None:
        spec = knobs.target.default
    if not isinstance(spec, str):
        raise UnknownTargetError(
            f"target must be a string or a Target, not {type(spec).__name__}",
            hint='e.g. target="auto", "interp", "cuda" or "cuda:sm_90a"',
        )
    text = spec.strip()
    if text.lower() in ("", "auto"):
        target, reason = auto_choice()
        if target.backend == INTERP:
            _note_fallback(reason)
        return _complete(target)
    name, _, arch = text.partition(":")
    target = _resolve_named(name.strip().lower(), arch.strip() or None)
    if target is None:
        raise UnknownTargetError(
            f"unknown target {spec!r}",
            hint=f"available targets: auto, {_available_targets()}",
        )
    return target


def describe() -> dict[str, Any]:
    """A summary of the registry for ``python -m tilelang_x info`` (plain data, JSON-ready)."""
    target_rows = targets()
    status_rows = statuses()
    devices = detected_devices()
    auto, why = auto_choice()
    return {
        "plugins": [
            {"name": r.name, "module": r.module, "status": r.status, "error": r.error,
             "dist": r.dist, "version": r.version, "builtin": r.builtin}
            for r in plugins()
        ],
        "targets": [
            {"plugin": plugin, "backend": info.backend, "archs": list(info.archs),
             "description": info.description}
            for plugin, info in target_rows
        ],
        "status": [
            {"plugin": plugin, "target": name, "available": ok, "reason": reason}
            for plugin, name, ok, reason in status_rows
        ],
        "devices": [
            {"target": str(d.target), "name": d.name, "priority": d.priority, "count": d.count}
            for d in devices
        ],
        "auto": {"target": str(auto), "reason": why},
    }


