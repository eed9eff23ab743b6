"""The tuner: compile every candidate (in worker processes where that pays off), then check and
time each in-process, and keep the fastest; or recall a remembered winner from the store."""

from __future__ import annotations

import contextlib
import inspect
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import knobs
from ..core_ir.source import SourceLoc, caller_loc
from .configs import normalize_configs
from .errors import AutotuneError, one_line_reason
from .inputs import overridden_inputs
from .key import is_tensor, tuning_key
from .limits import Timeout, time_limit
from .progress import progress_bar
from .result import AutotuneResult, Candidate
from .store import make_record, open_store, recorded_winner, restore
from .workers import compile_in_workers, worker_count

logger = logging.getLogger(__name__)


@dataclass
class ProfileArgs:
    """How candidates are checked and timed (``AutoTuner.set_profile_args``)."""

    warmup: float = 25
    rep: float = 100
    timeout: float | None = 30
    supply_type: Any = None
    ref_prog: Callable[..., Any] | None = None
    supply_prog: Callable[..., Any] | None = None
    rtol: float = 1e-2
    atol: float = 1e-2
    max_mismatched_ratio: float = 0.01
    skip_check: bool = False
    manual_check_prog: Callable[..., Any] | None = None
    cache_input_tensors: bool = False


class AutoTuner:
    """Tunes one kernel for one set of static arguments (TileLang's ``AutoTuner``)::

        result = (AutoTuner.from_kernel(matmul, configs)     # a factory, or a @tilelang.jit function
                  .set_compile_args(out_idx=[-1], target="cuda")
                  .set_profile_args(ref_prog=ref)
                  .set_kernel_parameters((1024, 1024, 1024))
                  .run(warmup=25, rep=100, timeout=30))
    """

    def __init__(self, fn: Callable[..., Any], configs: Any) -> None:
        self.fn = fn
        self.configs = configs
        self.compile_args: dict[str, Any] = {}
        self.profile_args = ProfileArgs()
        self.args: tuple[Any, ...] = ()
        self.kwargs: dict[str, Any] = {}
        self.do_not_specialize: tuple[str, ...] = ()
        self.workers: int | None = None
        self.loc: SourceLoc | None = caller_loc()
        self._jit: Any = None

    @classmethod
    def from_kernel(cls, kernel: Callable[..., Any], configs: Any) -> AutoTuner:
        return cls(kernel, configs)

    def set_compile_args(
        self,
        out_idx: Any = None,
        target: Any = None,
        execution_backend: Any = None,
        target_host: Any = None,
        verbose: bool | None = None,
        pass_configs: dict[str, Any] | None = None,
        compile_flags: Any = None,
    ) -> AutoTuner:
        """How candidates are compiled (as ``@tilelang.jit``'s arguments); ``None`` keeps the jitted
        function's own setting."""
        given = dict(out_idx=out_idx, target=target, execution_backend=execution_backend, target_host=target_host,
                     verbose=verbose, pass_configs=pass_configs, compile_flags=compile_flags)
        self.compile_args = {k: v for k, v in given.items() if v is not None}
        self._jit = None
        return self

    def set_profile_args(
        self,
        warmup: float = 25,
        rep: float = 100,
        timeout: float | None = 30,
        supply_type: Any = None,
        ref_prog: Callable[..., Any] | None = None,
        supply_prog: Callable[..., Any] | None = None,
        rtol: float = 1e-2,
        atol: float = 1e-2,
        max_mismatched_ratio: float = 0.01,
        skip_check: bool = False,
        manual_check_prog: Callable[..., Any] | None = None,
        cache_input_tensors: bool = False,
        backend: Any = None,
    ) -> AutoTuner:
        """How candidates are checked and timed. ``supply_prog(params)`` gets the kernel's input
        buffers and returns the inputs; ``manual_check_prog(outputs, reference_outputs)`` replaces
        the allclose check; ``backend`` (TileLang's timer choice) is ignored: the target's timer is used."""
        self.profile_args = ProfileArgs(warmup, rep, timeout, supply_type, ref_prog, supply_prog, rtol, atol,
                                         max_mismatched_ratio, skip_check, manual_check_prog, cache_input_tensors)
        return self

    def set_kernel_parameters(self, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> AutoTuner:
        """The static arguments every candidate is called with (besides its config)."""
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        return self

    # ---- internals ----------------------------------------------------------------------------
    def jit_func(self) -> Any:
        """The ``JITFunc`` candidates are compiled through."""
        if self._jit is not None:
            return self._jit
        from ..frontend.jit import JITFunc
        from .decorator import AutoTuneImpl

        fn = self.fn.jit_func if isinstance(self.fn, AutoTuneImpl) else self.fn
        if isinstance(fn, JITFunc) and not self.compile_args:
            self._jit = fn
        elif isinstance(fn, JITFunc):
            base = dict(out_idx=fn.out_idx, target=fn.target, execution_backend=fn.execution_backend,
                        verbose=fn.options.get("verbose", False), pass_configs=fn.options.get("pass_configs"),
                        compile_flags=fn.options.get("compile_flags"))
            self._jit = JITFunc(fn.fn, **{**base, **self.compile_args})
        else:
            self._jit = JITFunc(fn, **self.compile_args)
        return self._jit

    def normalized_configs(self) -> list[dict[str, Any]]:
        """The configs to try, for the static arguments set (a callable ``configs`` is called with them)."""
        jit = self.jit_func()
        configs = self.configs
        if callable(configs):
            configs = configs(*self.args, **self.kwargs)
        return normalize_configs(configs, jit.fn, name=jit.fn.__name__, loc=self.loc)

    def _compile(self, jit: Any, config: dict[str, Any]) -> Any:
        return jit.compile(*self.args, **{**self.kwargs, **config})

    def _inputs(self, jit: Any, kernel: Any, profiler: Any, memo: dict[Any, Any]) -> list[Any]:
        p = self.profile_args
        given = overridden_inputs()
        if given is not None:
            return given
        ins = [prm for i, prm in enumerate(kernel.params[:kernel.func.n_visible]) if i not in kernel.out_idx]
        if p.supply_prog is not None:
            return list(p.supply_prog(ins))
        if jit.style == "eager":  # the tensors the caller passed
            try:
                sig = inspect.signature(jit.fn)
                bound = sig.bind_partial(*self.args, **{k: v for k, v in self.kwargs.items() if k in sig.parameters})
                given = [bound.arguments.get(prm.name) for prm in ins]
                if all(is_tensor(t) for t in given):
                    return given
            except TypeError:
                pass
        if not p.cache_input_tensors:
            return profiler.get_inputs()
        sig_key = tuple((str(getattr(b, "shape", "")), str(getattr(b, "dtype", ""))) for b in ins)
        if sig_key not in memo:
            memo[sig_key] = profiler.get_inputs()
        return memo[sig_key]

    def _bench(self, jit: Any, kernel: Any, memo: dict[Any, Any]) -> tuple[float, list[Any], Any]:
        p = self.profile_args
        profiler = kernel.get_profiler(p.supply_type)
        inputs = self._inputs(jit, kernel, profiler, memo)
        if p.ref_prog is not None and not p.skip_check:
            try:
                if p.manual_check_prog is not None:
                    p.manual_check_prog(kernel(*inputs), p.ref_prog(*inputs))
                else:
                    profiler.assert_allclose(p.ref_prog, input_tensors=inputs, atol=p.atol, rtol=p.rtol,
                                             max_mismatched_ratio=p.max_mismatched_ratio)
            except AssertionError as exc:
                raise _Mismatch(one_line_reason(exc)) from None
        latency = float(profiler.do_bench(warmup=p.warmup, rep=p.rep, input_tensors=inputs))
        return latency, inputs, profiler

    def run(self, warmup: float | None = None, rep: float | None = None, timeout: float | None = None
            ) -> AutotuneResult:
        """Tune (or recall a remembered tuning) and return the result; the best kernel is
        ``result.kernel``. Raises ``AutotuneError`` when every candidate fails."""
        p = self.profile_args
        if warmup is not None:
            p.warmup = warmup
        if rep is not None:
            p.rep = rep
        if timeout is not None:
            p.timeout = timeout
        from .. import registry

        start = time.perf_counter()
        jit = self.jit_func()
        configs = self.normalized_configs()
        target = registry.resolve_target(jit.target)
        name = jit.fn.__name__
        key = tuning_key(jit, self.args, self.kwargs, do_not_specialize=self.do_not_specialize, profile=p,
                         configs=configs, target=target)
        store = open_store()
        result = AutotuneResult(key=key, target=str(target), kernel_name=name)
        if store is not None:
            result.cache_path = str(store.path(key))
            record = store.load(key)
            if record is not None and self._recall(jit, configs, record, result):
                result.elapsed = time.perf_counter() - start
                self._report(result)
                return result
        cands = [Candidate(i, c) for i, c in enumerate(configs)]
        timeout_s = p.timeout or None

        # compile phase: workers when they pay off, in-process for the rest
        workers = worker_count(self.workers, target, len(cands))
        todo = cands
        if workers > 1:
            todo = compile_in_workers(jit, cands, target, workers, self.args, self.kwargs, timeout_s)
        for cand in todo:
            cand.status = "pending"

        # in-process: compile (a cache hit after the workers), check, time
        memo: dict[Any, Any] = {}
        kernels: dict[int, Any] = {}
        live = [c for c in cands if c.status in ("pending", "compiled")]
        bar = progress_bar(len(live), f"tune {name}")
        ref_inputs = None
        try:
            for cand in live:
                bar.update()
                t0 = time.perf_counter()
                try:
                    with time_limit(timeout_s):
                        kernel = self._compile(jit, cand.config)
                    elapsed = time.perf_counter() - t0
                    if cand.compile_time is None:
                        cand.compile_time = elapsed
                    if timeout_s is not None and elapsed > timeout_s:
                        raise Timeout()
                except Timeout:
                    cand.status = "timeout"
                    cand.compile_time = time.perf_counter() - t0
                    cand.reason = f"compile took longer than the {timeout_s} s timeout"
                    continue
                except Exception as exc:  # noqa: BLE001 - a failing candidate is skipped
                    cand.status, cand.reason = "compile_error", one_line_reason(exc)
                    if cand.compile_time is None:
                        cand.compile_time = time.perf_counter() - t0
                    continue
                t0 = time.perf_counter()
                try:
                    with time_limit(timeout_s):
                        latency, inputs, profiler = self._bench(jit, kernel, memo)
                    if timeout_s is not None and time.perf_counter() - t0 > timeout_s:
                        raise Timeout()
                except Timeout:
                    cand.status = "timeout"
                    cand.reason = f"check and benchmark took longer than the {timeout_s} s timeout"
                    continue
                except _Mismatch as exc:
                    cand.status, cand.reason = "mismatch", str(exc)
                    continue
                except Exception as exc:  # noqa: BLE001
                    cand.status, cand.reason = "run_error", one_line_reason(exc)
                    continue
                cand.status, cand.latency = "ok", latency
                result.benchmarked += 1
                kernels[cand.index] = kernel
                if ref_inputs is None and p.ref_prog is not None:
                    ref_inputs = inputs
                    result.ref_latency = self._ref_latency(profiler, inputs)
                bar.set_postfix_str(f"best {min(c.latency for c in cands if c.ok):.4g} ms")
                logger.debug("autotune %s: config #%d %s: %.4g ms", name, cand.index, cand.config, latency)
        finally:
            bar.close()
        result.candidates = cands
        ok = [c for c in cands if c.ok]
        if not ok:
            lines = "\n".join(f"  #{c.index} {c.config}: {c.status}: {c.reason}" for c in cands)
            raise AutotuneError(f"autotuning `{name}` for {target}: no config worked\n{lines}", loc=self.loc,
                                hint="fix the configs, or the reference program / tolerances if every check fails")
        best = min(ok, key=lambda c: (c.latency, c.index))
        self._fill(result, best, kernels[best.index])
        result.elapsed = time.perf_counter() - start
        if store is not None:
            store.save(key, make_record(key, result, f"{jit.fn.__module__}.{jit.fn.__qualname__}"))
        self._report(result)
        return result

    def _ref_latency(self, profiler: Any, inputs: list[Any]) -> float | None:
        p = self.profile_args
        try:
            return float(profiler.do_bench(p.ref_prog, warmup=p.warmup, rep=p.rep, input_tensors=inputs))
        except Exception as exc:  # noqa: BLE001 - the reference's time is only informative
            logger.debug("autotune: timing the reference failed: %s", one_line_reason(exc))
            return None

    @staticmethod
    def _fill(result: AutotuneResult, best: Candidate, kernel: Any) -> None:
        result.latency, result.config, result.kernel = best.latency, best.config, kernel
        result.best_index = best.index
        result.func = getattr(kernel, "func", None)
        with contextlib.suppress(Exception):
            result.libcode = kernel.get_kernel_source()
        _annotate(kernel, result)

    def _recall(self, jit: Any, configs: list[dict[str, Any]], record: dict[str, Any], result: AutotuneResult
                ) -> bool:
        """Use a stored record: compile its winner only. False (tune again) when it does not fit."""
        best = recorded_winner(record, configs)
        if best is None:
            logger.warning("ignoring corrupt autotune record %s; tuning again", result.cache_path)
            return False
        try:
            kernel = self._compile(jit, configs[best])
        except Exception as exc:  # noqa: BLE001 - the world changed under the record
            logger.warning("autotune: the remembered config #%d of `%s` no longer compiles (%s); tuning again",
                           best, jit.fn.__name__, one_line_reason(exc))
            return False
        restore(record, configs, best, result)
        self._fill(result, result.candidates[best], kernel)
        return True

    def _report(self, result: AutotuneResult) -> None:
        logger.info("autotune %s: best config %s (%s ms)%s", result.kernel_name, result.config, result.latency,
                    " from cache" if result.from_cache else "")
        if knobs.autotune.print:
            print(result.table(), file=sys.stderr)

    def __call__(self) -> AutotuneResult:
        return self.run()


class _Mismatch(Exception):
    """The candidate's outputs differ from the reference's."""


def _annotate(kernel: Any, result: AutotuneResult) -> None:
    """TileLang's tuned-kernel attributes: ``latency``, ``config``, ``ref_latency``,
    ``get_tuner_result()``; plus ``tune_result`` (the whole summary)."""
    try:
        kernel.tune_result = result
        kernel.latency = result.latency
        kernel.config = result.config
        kernel.ref_latency = result.ref_latency
        kernel.get_tuner_result = lambda: {"latency": result.latency, "config": result.config,
                                           "ref_latency": result.ref_latency}
    except AttributeError:  # a kernel type with __slots__
        pass
