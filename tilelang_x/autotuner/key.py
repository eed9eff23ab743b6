"""The key of a tuning in the store: canonical, JSON-ready stand-ins for the kernel, its static
arguments, the target, the versions and toolchain that could change the answer, the profile
settings and the configs, hashed."""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import inspect
import json
import math
import platform
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import knobs
from .inputs import overridden_inputs

FORMAT = 1  # version of the JSON records in the store (and so part of their key)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a framework tensor (imports the frontend only when asked)."""
    from ..frontend.jit import is_tensor

    return is_tensor(value)


@dataclass(frozen=True)
class TensorSpec:
    """What a worker needs of a tensor argument: its shape and dtype (no data crosses)."""

    shape: tuple[int, ...]
    dtype: Any


def tensor_specs(value: Any) -> Any:
    """``value`` with every tensor in it (at the top, or in a dict, list or tuple) a ``TensorSpec``."""
    if is_tensor(value):
        return TensorSpec(tuple(int(d) for d in value.shape), value.dtype)
    if isinstance(value, dict):
        return {k: tensor_specs(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and any(is_tensor(v) for v in value):
        return type(value)(tensor_specs(v) for v in value)
    return value


def _fn_identity(fn: Any, depth: int = 0) -> dict[str, Any]:
    fn = getattr(fn, "__func__", fn)
    fn = inspect.unwrap(fn) if callable(fn) else fn
    code = getattr(fn, "__code__", None)
    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError):
        text = repr(code.co_code) + repr(code.co_consts) if code is not None else repr(fn)
    ident: dict[str, Any] = {
        "name": f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}",
        "source": hashlib.sha256(text.encode()).hexdigest(),
    }
    cells = getattr(fn, "__closure__", None) or ()
    names = getattr(code, "co_freevars", ()) if code is not None else ()
    if cells:
        closure = {}
        for var, cell in zip(names, cells):
            try:
                closure[var] = canon(cell.cell_contents, depth + 1)
            except ValueError:  # empty cell
                closure[var] = None
        ident["closure"] = closure
    return ident


def canon(value: Any, depth: int = 0) -> Any:
    """A JSON-ready stand-in for ``value``: equal for values that compile alike."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, Mapping):
        return {"dict": sorted([str(k), canon(v, depth)] for k, v in value.items())}
    if isinstance(value, (list, tuple)):
        return [canon(v, depth) for v in value]
    if isinstance(value, (set, frozenset)):
        return {"set": sorted(repr(v) for v in value)}
    if isinstance(value, TensorSpec):
        return {"tensor": list(value.shape), "dtype": str(value.dtype)}
    if is_tensor(value):
        stride = getattr(value, "stride", None)
        strides = list(stride()) if callable(stride) else list(getattr(value, "strides", ()) or ())
        device = getattr(value, "device", None)
        return {"tensor": [int(d) for d in value.shape], "dtype": str(value.dtype), "stride": strides,
                "device": str(getattr(device, "type", device))}
    if callable(value) and hasattr(getattr(value, "__func__", value), "__code__") and depth < 3:
        return {"fn": _fn_identity(value, depth)}
    return _ADDRESS.sub("", repr(value))


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def _versions(target: Any) -> dict[str, Any]:
    from .. import __version__, registry

    info: dict[str, Any] = {
        "python": platform.python_version(), "platform": f"{sys.platform}-{platform.machine()}",
        "tilelang_x": __version__,
    }
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch
        except ImportError:
            torch = None
    info["torch"] = getattr(torch, "__version__", None)
    cuda = getattr(getattr(torch, "version", None), "cuda", None)
    if cuda:
        info["torch_cuda"] = cuda
    try:
        info["plugins"] = sorted(f"{r.name}={r.dist}:{r.version}:{r.status}" for r in registry.plugins())
        backend = getattr(target, "backend", str(target))
        info["devices"] = sorted(d.name for d in registry.detected_devices() if d.target.backend == backend)
    except Exception as exc:  # noqa: BLE001 - a broken registry only weakens the key
        info["registry"] = repr(exc)
    # knobs that pick a toolchain or change what is compiled, and the toolchain they pick
    chosen = tuple((f"{ns}.{name}", str(getattr(obj, name)))
                   for ns, obj in (("compile", knobs.compile), ("runtime", knobs.runtime))
                   for name in obj.knobs() if not name.startswith("dump"))
    info["knobs"] = dict(chosen)
    info["toolchain"] = _toolchain(getattr(target, "backend", str(target)), chosen)
    return info


@functools.lru_cache(maxsize=16)
def _toolchain(backend: str, knob_values: tuple[tuple[str, str], ...]) -> list[str]:
    """Name and version of the device toolchains for ``backend`` (what ``tilelang_x info`` lists;
    asked once per process and knob setting)."""
    if backend == "interp":
        return []
    try:
        from ..__main__ import collect_toolchains

        return sorted(f"{t['name']} {t['version']} {t['path']}" for t in collect_toolchains()
                      if t.get("backend") == backend and t.get("found"))
    except Exception as exc:  # noqa: BLE001 - only weakens the key
        return [repr(exc)]



def tuning_key(jit: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any], *, do_not_specialize: Sequence[str],
               profile: Any, configs: list[dict[str, Any]], target: Any) -> str:
    """The store's key for tuning ``jit`` over ``configs`` with these static arguments (less those in
    ``do_not_specialize``) and ``profile`` settings, for ``target``."""
    try:
        bound = inspect.signature(jit.fn).bind_partial(
            *args, **{k: v for k, v in kwargs.items() if k in inspect.signature(jit.fn).parameters})
        static = dict(bound.arguments)
    except TypeError:
        static = {"args": args}
    static.update({k: v for k, v in kwargs.items() if k not in static})
    for name in do_not_specialize:
        static.pop(name, None)
    data = {
        "format": FORMAT,
        "kernel": _fn_identity(jit.fn),
        "style": jit.style,
        "static": canon(static),
        "jit": canon({"out_idx": jit.out_idx, "options": jit.options}),
        "target": str(target),
        "versions": _versions(target),
        "profile": canon({f.name: getattr(profile, f.name) for f in dataclasses.fields(profile)}),
        "inputs_override": overridden_inputs() is not None,
        "configs": canon(configs),
    }
    return _digest(data)
