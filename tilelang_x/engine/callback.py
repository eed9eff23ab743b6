"""Post-processing of the generated device source, as TileLang's ``tilelang.engine.callback``:
a function ``(code, target) -> code`` registered for a backend rewrites every source that backend
generates before its compiler sees it (the compile driver calls ``postprocess``)::

    @tilelang.engine.callback.register_cuda_postproc_callback
    def patch(code, target):
        return code.replace(...)

One function per backend; registering another replaces it (``override=False`` refuses instead).
Registering clears the in-memory kernel cache, so no kernel compiled from the old source is
handed out again; the on-disk cache is keyed by the source, which the function changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core_ir.errors import ArgumentError
from ..core_ir.source import caller_loc

PostProc = Callable[[str, Any], str]

_registered: dict[str, PostProc] = {}


def _register(backend: str, func: PostProc, override: bool = True) -> None:
    """Rewrite every source ``backend`` generates with ``func(code, target)`` from now on."""
    if not callable(func):
        raise ArgumentError(f"a {backend} post-processing callback must be callable, got {type(func).__name__}",
                            loc=caller_loc(), hint="pass a function (code: str, target) -> str")
    if not override and backend in _registered:
        raise ArgumentError(f"a {backend} post-processing callback is already registered",
                            loc=caller_loc(), hint="pass override=True to replace it")
    _registered[backend] = func
    from ..compiler import clear_cache

    clear_cache()


def any_registered() -> bool:
    """Whether some backend's source is post-processed (the autotuner then compiles in-process:
    a spawned worker would not have the callback)."""
    return bool(_registered)


def postprocess(target: Any, source: str) -> str:
    """``source`` as the callback registered for ``target``'s backend returns it (unchanged without one)."""
    func = _registered.get(target.backend)
    if func is None:
        return source
    code = func(source, target)
    if not isinstance(code, str):
        raise ArgumentError(f"the {target.backend} post-processing callback {getattr(func, '__name__', func)!r} "
                            f"returned {type(code).__name__}, not the source text",
                            hint="return the (changed) code string")
    return code


def register_cuda_postproc(func: PostProc, override: bool = True) -> None:
    """Rewrite the CUDA C++ of every kernel compiled from now on with ``func(code, target)``."""
    _register("cuda", func, override)


def register_hip_postproc(func: PostProc, override: bool = True) -> None:
    """Rewrite the HIP C++ of every kernel compiled from now on with ``func(code, target)``."""
    _register("hip", func, override)


def _decorator(backend: str, func: PostProc | bool | None, override: bool) -> Any:
    """``@register_<backend>_postproc_callback``, with or without parentheses (a bool first
    argument is ``override``)."""
    if callable(func):
        _register(backend, func, override)
        return func
    if func is None or isinstance(func, bool):
        flag = func if isinstance(func, bool) else override

        def register(fn: PostProc) -> PostProc:
            _register(backend, fn, flag)
            return fn

        return register
    raise ArgumentError(f"register_{backend}_postproc_callback decorates a function, got {type(func).__name__}",
                        loc=caller_loc(), hint=f"write @register_{backend}_postproc_callback above a def")


def register_cuda_postproc_callback(func: PostProc | bool | None = None, override: bool = True) -> Any:
    """Decorator form of ``register_cuda_postproc``: ``@register_cuda_postproc_callback``,
    ``@register_cuda_postproc_callback()`` or ``@register_cuda_postproc_callback(override=False)``."""
    return _decorator("cuda", func, override)


def register_hip_postproc_callback(func: PostProc | bool | None = None, override: bool = True) -> Any:
    """Decorator form of ``register_hip_postproc`` (see ``register_cuda_postproc_callback``)."""
    return _decorator("hip", func, override)
