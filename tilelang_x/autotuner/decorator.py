"""``@tilelang.autotune``: the decorator, and the tuned function it returns, which tunes once per
set of static arguments and hands out the winner."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import knobs
from ..core_ir.source import SourceLoc, caller_loc
from .configs import normalize_configs
from .errors import AutotuneConfigError
from .inputs import overridden_inputs
from .key import canon
from .result import AutotuneResult
from .tuner import AutoTuner, ProfileArgs

logger = logging.getLogger(__name__)


class AutoTuneImpl:
    """What ``@tilelang.autotune(...)`` over ``@tilelang.jit`` returns.

    Calling it with the static arguments (classic style) tunes once per distinct set of them and
    returns the best ``JITKernel``; in the eager style it tunes with the given tensors and runs the
    winner. Passing any tunable parameter explicitly skips tuning.
    """

    def __init__(self, jit_func: Any, configs: Any, *, loc: SourceLoc | None = None,
                 do_not_specialize: Sequence[str] | None = None, workers: int | None = None,
                 **profile: Any) -> None:
        self.jit_func = jit_func
        self.configs = configs
        self.profile = profile
        self.do_not_specialize = tuple(do_not_specialize or ())
        self.workers = workers
        self.loc = loc
        self._results: dict[Any, AutotuneResult] = {}
        self._last: AutotuneResult | None = None
        self._lock = threading.Lock()
        functools.update_wrapper(self, jit_func.fn, updated=())
        if not callable(configs) or isinstance(configs, (Mapping, list, tuple)):
            normalize_configs(configs, jit_func.fn, loc=loc)  # fail early, at the decorator

    def __getattr__(self, name: str) -> Any:
        if name == "jit_func":
            raise AttributeError(name)
        return getattr(self.jit_func, name)

    def __repr__(self) -> str:
        return f"<tilelang_x.autotune {self.jit_func.fn.__qualname__}>"

    def get_tuner_result(self) -> AutotuneResult | None:
        """The result of the most recent tuning (or recall) of this function."""
        return self._last

    @property
    def results(self) -> dict[Any, AutotuneResult]:
        """Every tuning so far, by static-argument key."""
        return dict(self._results)

    def _tunable(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> AutoTuner:
        tuner = AutoTuner(self.jit_func, self.configs)
        tuner.loc = caller_loc() or self.loc
        fields = {f.name for f in dataclasses.fields(ProfileArgs)}
        tuner.profile_args = ProfileArgs(**{k: v for k, v in self.profile.items() if k in fields})
        tuner.do_not_specialize = self.do_not_specialize
        tuner.workers = self.workers
        return tuner.set_kernel_parameters(args, kwargs)

    def _explicit(self, tuner: AutoTuner, configs: list[dict[str, Any]]) -> list[str]:
        keys = {k for c in configs for k in c}
        sig = inspect.signature(self.jit_func.fn)
        try:
            bound = sig.bind_partial(*tuner.args, **{k: v for k, v in tuner.kwargs.items() if k in sig.parameters})
        except TypeError:
            return []
        return sorted(keys & set(bound.arguments))

    def tune(self, *args: Any, **kwargs: Any) -> AutotuneResult:
        """Tune for these static arguments (or recall the answer) and return the result."""
        jit = self.jit_func
        target = jit.target or knobs.target.default
        skip = set(self.do_not_specialize)
        try:
            sig = inspect.signature(jit.fn)
            names = list(sig.parameters)
        except (TypeError, ValueError):
            names = []
        memo_key = json.dumps([
            canon([a for i, a in enumerate(args) if i >= len(names) or names[i] not in skip]),
            canon({k: v for k, v in kwargs.items() if k not in skip}), str(target),
            overridden_inputs() is not None,
        ], sort_keys=True, default=str)
        with self._lock:
            found = self._results.get(memo_key)
        if found is not None:
            self._last = found
            return found
        tuner = self._tunable(args, kwargs)
        configs = tuner.normalized_configs()
        explicit = self._explicit(tuner, configs)
        if explicit:
            logger.info("autotune %s: %s passed explicitly; not tuning", jit.fn.__name__, ", ".join(explicit))
            kernel = jit.compile(*args, **kwargs)
            result = AutotuneResult(kernel=kernel, func=kernel.func, tuned=False, target=str(kernel.target),
                                    kernel_name=jit.fn.__name__)
            self._last = result
            return result
        tuner.configs = configs
        result = tuner.run()
        with self._lock:
            self._results[memo_key] = result
        self._last = result
        return result

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self.tune(*args, **kwargs)
        if self.jit_func.style == "classic":
            return result.kernel
        return self.jit_func(*args, **{**kwargs, **(result.config or {})})

    def compile(self, *args: Any, **kwargs: Any) -> Any:
        """The best ``JITKernel`` for these arguments (tuning if needed), without running it."""
        return self.tune(*args, **kwargs).kernel


def autotune(
    func: Callable[..., Any] | None = None,
    *,
    configs: Any,
    warmup: float = 25,
    rep: float = 100,
    timeout: float | None = 100,
    supply_type: Any = None,
    ref_prog: Callable[..., Any] | None = None,
    supply_prog: Callable[..., Any] | None = None,
    rtol: float = 1e-2,
    atol: float = 1e-2,
    max_mismatched_ratio: float = 0.01,
    skip_check: bool = False,
    manual_check_prog: Callable[..., Any] | None = None,
    cache_input_tensors: bool = False,
    do_not_specialize: Sequence[str] | None = None,
    workers: int | None = None,
) -> Any:
    """``@tilelang.autotune(configs=..., warmup=25, rep=100, timeout=100, ref_prog=None, ...)`` over
    ``@tilelang.jit``, or ``tilelang.autotune(fn, configs=...)``: returns an ``AutoTuneImpl``.

    ``warmup``/``rep`` are the profiler's budgets in ms; ``timeout`` (seconds) bounds each
    candidate's compile and its check + benchmark; ``ref_prog(*inputs)`` enables the reference
    check (``rtol``, ``atol``, ``max_mismatched_ratio``; ``skip_check`` turns it off);
    ``supply_type`` picks the random inputs; ``do_not_specialize`` names arguments that do not
    start a new tuning; ``workers`` overrides ``TILELANG_X_AUTOTUNE_WORKERS``. A plain function
    is jitted first (``@tilelang.jit`` defaults).
    """
    from ..core_ir.stmt import PrimFunc
    from ..frontend.jit import JITFunc

    loc = caller_loc()
    profile = dict(warmup=warmup, rep=rep, timeout=timeout, supply_type=supply_type, ref_prog=ref_prog,
                   supply_prog=supply_prog, rtol=rtol, atol=atol, max_mismatched_ratio=max_mismatched_ratio,
                   skip_check=skip_check, manual_check_prog=manual_check_prog,
                   cache_input_tensors=cache_input_tensors)

    def wrap(fn: Any) -> AutoTuneImpl:
        if isinstance(fn, PrimFunc):
            raise AutotuneConfigError(
                "tilelang.autotune tunes a @tilelang.jit function, not a T.prim_func", loc=loc,
                hint="write a factory that takes the tunable values as keyword arguments and returns the prim_func",
            )
        if isinstance(fn, AutoTuneImpl):
            fn = fn.jit_func
        if not isinstance(fn, JITFunc):
            if not callable(fn) or not hasattr(fn, "__code__"):
                raise AutotuneConfigError(f"tilelang.autotune decorates a function, got {fn!r}", loc=loc)
            fn = JITFunc(fn)
        return AutoTuneImpl(fn, configs, loc=loc, do_not_specialize=do_not_specialize, workers=workers, **profile)

    return wrap if func is None else wrap(func)
