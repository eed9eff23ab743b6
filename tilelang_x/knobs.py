"""Every environment variable tilelang-x reads, in one place (prefix ``TILELANG_X_``).

Each knob is a typed descriptor on a namespace object: reading it reads the environment (so a
variable set after import still counts); setting it from Python writes the environment back, so
worker processes inherit it; ``del`` restores the default. ``scope()`` sets knobs temporarily::

    from tilelang_x import knobs
    knobs.compile.dump = "all"
    with knobs.scope(cache_disable=True): ...
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

PREFIX = "TILELANG_X_"


class _Knob:
    def __init__(self, env: str, default: Any, kind: type, doc: str) -> None:
        self.env = PREFIX + env
        self.default = default
        self.kind = kind
        self.__doc__ = doc

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        raw = os.environ.get(self.env)
        if raw is None or raw == "":
            return self.default
        if self.kind is bool:
            return raw.strip().lower() in ("1", "true", "yes", "on")
        if self.kind is int:
            return int(raw)
        if self.kind is float:
            return float(raw)
        return raw

    def __set__(self, obj: Any, value: Any) -> None:
        if value is None:
            os.environ.pop(self.env, None)
        elif self.kind is bool:
            os.environ[self.env] = "1" if value else "0"
        else:
            os.environ[self.env] = str(value)

    def __delete__(self, obj: Any) -> None:
        os.environ.pop(self.env, None)


class _Namespace:
    def knobs(self) -> dict[str, _Knob]:
        return {k: v for k, v in type(self).__dict__.items() if isinstance(v, _Knob)}

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.knobs())
        return f"{type(self).__name__}({items})"


class _Target(_Namespace):
    default = _Knob("TARGET", "auto", str, "Target used when a kernel names none (auto, interp, cuda, cuda:sm_90a...).")


class _Compile(_Namespace):
    dump = _Knob("DUMP", "", str, "Comma-separated stage names (or 'all') whose IR is written out.")
    dump_dir = _Knob("DUMP_DIR", "tilelang_x_dump", str, "Folder the stage dumps go to.")
    nvcc = _Knob("NVCC", "", str, "Path of nvcc; found on PATH or under CUDA_HOME when empty.")
    use_nvrtc = _Knob("USE_NVRTC", True, bool, "Compile CUDA in-process with NVRTC when it is installed.")
    pass_configs = _Knob("PASS_CONFIGS", "", str,
                         "JSON object of pass_configs applied to every kernel (a kernel's own pass_configs win), "
                         'e.g. {"tlx.staged_epilogue": false}: switches compiler features for A/B runs.')
    nvrtc = _Knob("NVRTC", "", str, "Path of libnvrtc.so; found in the nvidia-cuda-nvrtc wheel or toolkit when empty.")
    cuda_home = _Knob("CUDA_HOME", os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "", str,
                      "CUDA toolkit folder (headers, nvcc); defaults to $CUDA_HOME / $CUDA_PATH.")


class _Cache(_Namespace):
    dir = _Knob("CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "tilelang_x"), str,
                "Folder of the on-disk kernel cache.")
    disable = _Knob("DISABLE_CACHE", False, bool, "Do not read or write the on-disk cache.")


class _Runtime(_Namespace):
    libcuda = _Knob("LIBCUDA", "", str, "Path of the CUDA driver library libcuda.so.1; searched for when empty.")
    launcher = _Knob("LAUNCHER", "auto", str, "CUDA launcher: auto (compiled extension if built), cython, ctypes.")


class _Autotune(_Namespace):
    workers = _Knob("AUTOTUNE_WORKERS", 0, int,
                    "Processes that compile autotuning candidates; 0: min(CPUs, 8), but in-process for the "
                    "interpreter; 1: always in-process.")
    disable_cache = _Knob("AUTOTUNE_DISABLE_CACHE", False, bool,
                          "Do not read or write remembered autotuning results (<cache dir>/autotune).")
    progress = _Knob("AUTOTUNE_PROGRESS", True, bool, "Show a progress bar (tqdm) while tuning, on a terminal.")
    print = _Knob("PRINT_AUTOTUNING", False, bool, "Print each tuning's candidates, times and winner to stderr.")


class _Interp(_Namespace):
    race_check = _Knob("INTERP_RACE_CHECK", True, bool,
                       "The interpreter raises RaceError when two blocks of a launch access one element of a global "
                       "tensor, one of them storing it, with no T.sync_grid() between (pass config "
                       "tlx.interp_race_check overrides it per kernel).")


class _Testing(_Namespace):
    accept = _Knob("ACCEPT", False, bool, "Rewrite golden files instead of comparing against them.")


target = _Target()
compile = _Compile()
cache = _Cache()
runtime = _Runtime()
autotune = _Autotune()
interp = _Interp()
testing = _Testing()

_NAMESPACES = {"target": target, "compile": compile, "cache": cache, "runtime": runtime, "autotune": autotune,
               "interp": interp, "testing": testing}


def all_knobs() -> dict[str, _Knob]:
    """Every knob by its dotted name (``cache.dir``...)."""
    return {f"{ns}.{k}": v for ns, obj in _NAMESPACES.items() for k, v in obj.knobs().items()}


@contextlib.contextmanager
def scope(**values: Any) -> Iterator[None]:
    """Set knobs for the duration of a ``with`` block; keys are ``namespace_name``
    (``cache_disable=True``, ``compile_dump="all"``)."""
    saved: dict[str, str | None] = {}
    try:
        for key, value in values.items():
            ns, _, name = key.partition("_")
            obj = _NAMESPACES[ns]
            knob = obj.knobs()[name]
            saved[knob.env] = os.environ.get(knob.env)
            setattr(obj, name, value)
        yield
    finally:
        for env, old in saved.items():
            if old is None:
                os.environ.pop(env, None)
            else:
                os.environ[env] = old
