"""tilelang-x: a pluggable compiler for tile-level AI kernels, compatible with TileLang.

Use it as TileLang::

    import tilelang_x as tilelang
    import tilelang_x.language as T

Everything here is imported on first use, so ``import tilelang_x`` stays cheap and loads no
backend plugin and no vendor SDK.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> (module, attribute or None for the module itself)
_LAZY: dict[str, tuple[str, str | None]] = {
    "jit": ("tilelang_x.jit", "jit"),
    "language": ("tilelang_x.language", None),
    "layout": ("tilelang_x.layout", None),
    "compile": ("tilelang_x.jit", "compile"),
    "autotune": ("tilelang_x.autotuner", "autotune"),
    "autotuner": ("tilelang_x.autotuner", None),
    "compile_prim_func": ("tilelang_x.compiler", "compile_prim_func"),
    "JITKernel": ("tilelang_x.kernel", "JITKernel"),
    "Profiler": ("tilelang_x.profiler", "Profiler"),
    "TensorSupplyType": ("tilelang_x.profiler", "TensorSupplyType"),
    "Target": ("tilelang_x.target", "Target"),
    "TargetInfo": ("tilelang_x.target", "TargetInfo"),
    "DetectedDevice": ("tilelang_x.target", "DetectedDevice"),
    "resolve_target": ("tilelang_x.registry", "resolve_target"),
    "math": ("tilelang_x.math", None),
    "carver": ("tilelang_x.carver", None),
    "intrinsics": ("tilelang_x.intrinsics", None),
    "DataType": ("tilelang_x.core_ir.dtypes", "as_dtype"),
    "cdiv": ("tilelang_x.math", "cdiv"),
    "next_power_of_2": ("tilelang_x.math", "next_power_of_2"),
    "knobs": ("tilelang_x.knobs", None),
    "registry": ("tilelang_x.registry", None),
    "errors": ("tilelang_x.errors", None),
    "hookspecs": ("tilelang_x.hookspecs", None),
    "hookimpl": ("tilelang_x.hookspecs", "hookimpl"),
    "TileLangError": ("tilelang_x.core_ir.errors", "TileLangError"),
    "PassConfigKey": ("tilelang_x.pass_config", "PassConfigKey"),
    "disable_cache": ("tilelang_x.cache", "disable_cache"),
    "enable_cache": ("tilelang_x.cache", "enable_cache"),
    "engine": ("tilelang_x.engine", None),
    "register_cuda_postproc": ("tilelang_x.engine", "register_cuda_postproc"),
    "register_hip_postproc": ("tilelang_x.engine", "register_hip_postproc"),
    "testing": ("tilelang_x.testing", None),
    "tvm": ("tilelang_x.tvm", None),
    "utils": ("tilelang_x.utils", None),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> object:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'tilelang_x' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
