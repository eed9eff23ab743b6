"""Compiling candidates in worker processes, so that the slow device-compiler step runs in parallel
(step 2 of a tuning, in the package's docstring): the pool, the worker-side compile, and the
parent's side that hands the candidates out and collects what the workers found.
"""

from __future__ import annotations

import ast
import atexit
import concurrent.futures as cf
import contextlib
import importlib
import logging
import multiprocessing
import os
import pickle
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .. import knobs
from ..engine.callback import any_registered
from .errors import one_line_reason
from .key import tensor_specs
from .limits import Timeout, time_limit
from .progress import progress_bar
from .result import Candidate

logger = logging.getLogger(__name__)

_pool: cf.ProcessPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()
_worker_jits: dict[Any, Any] = {}


def _get_pool(workers: int) -> cf.ProcessPoolExecutor:
    global _pool, _pool_size
    with _pool_lock:
        if _pool is not None and _pool_size >= workers:
            return _pool
        if _pool is not None:
            _pool.shutdown(wait=False, cancel_futures=True)
        _pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
        _pool_size = workers
        return _pool


def shutdown_workers(kill: bool = False) -> None:
    """Stop the worker processes kept for tuning (``kill``: without waiting for running tasks)."""
    global _pool, _pool_size
    with _pool_lock:
        pool, _pool, _pool_size = _pool, None, 0
    if pool is None:
        return
    if kill:
        for proc in list(getattr(pool, "_processes", {}).values()):  # no public way to stop a stuck task
            with contextlib.suppress(Exception):
                proc.kill()
    pool.shutdown(wait=not kill, cancel_futures=True)


atexit.register(shutdown_workers)


def _apply_env(env: dict[str, str], path: list[str]) -> None:
    for k in [k for k in os.environ if k.startswith(knobs.PREFIX) and k not in env]:
        del os.environ[k]
    os.environ.update(env)
    for entry in reversed(path):
        if entry not in sys.path:
            sys.path.insert(0, entry)


def _resolve(module: str, qualname: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _raw_fn(obj: Any) -> Any:
    """The Python function behind an autotuned / jitted object."""
    from ..frontend.jit import JITFunc
    from .decorator import AutoTuneImpl

    if isinstance(obj, AutoTuneImpl):
        obj = obj.jit_func
    if isinstance(obj, JITFunc):
        return obj.fn
    return obj


def _worker_compile(task: dict[str, Any]) -> tuple[str, float, str | None]:
    """Runs in a worker: trace and compile one candidate. ``("ok" | "error" | "timeout" | "setup",
    seconds, reason)``; ``setup`` means the worker could not get at the kernel at all."""
    _apply_env(task["env"], task["sys_path"])
    from .. import compiler
    from ..body_options import with_body_options
    from ..core_ir.kernel_parts import kernel_parts
    from ..frontend.jit import JITFunc

    try:
        key = (task["module"], task["qualname"], repr(task["jit_kwargs"]))
        jit = _worker_jits.get(key)
        if jit is None:
            jit = _worker_jits[key] = JITFunc(_raw_fn(_resolve(task["module"], task["qualname"])),
                                              **task["jit_kwargs"])
    except Exception as exc:  # noqa: BLE001 - reported, and the parent compiles it instead
        return "setup", 0.0, one_line_reason(exc)
    start = time.perf_counter()
    timeout = task["timeout"]
    try:
        with time_limit(timeout):
            func = jit.get_ir(*task["args"], **{**task["kwargs"], **task["config"]})
            for part in kernel_parts(func):
                compiler.build(part, task["target"], with_body_options(part, jit.options))
    except Timeout:
        return "timeout", time.perf_counter() - start, f"compile took longer than the {timeout} s timeout"
    except Exception as exc:  # noqa: BLE001 - a failing candidate is an answer
        return "error", time.perf_counter() - start, one_line_reason(exc)
    return "ok", time.perf_counter() - start, None


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _can_spawn() -> bool:
    """Whether starting worker processes is safe: not inside a worker, and a spawned worker, which
    re-imports the main script, will not run the script's tuning again -- the script has no file
    (``python -c``, a REPL), or this tuning runs inside its ``if __name__ == "__main__":`` block."""
    if multiprocessing.parent_process() is not None:
        return False
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path:
        return True
    frame = sys._getframe(1)
    line = None
    while frame is not None:
        if frame.f_globals is vars(main) and frame.f_code.co_name == "<module>":
            line = frame.f_lineno
        frame = frame.f_back
    if line is None:
        return False
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        if (isinstance(node, ast.If) and "__name__" in ast.unparse(node.test) and "__main__" in ast.unparse(node.test)
                and node.body and node.body[0].lineno <= line <= (node.end_lineno or 0)):
            return True
    return False


def _import_ref(fn: Any) -> tuple[str, str] | None:
    """``(module, qualname)`` under which a worker finds ``fn``, or None."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or "<locals>" in qualname or "<lambda>" in qualname:
        return None
    if module == "__main__" and not getattr(sys.modules.get("__main__"), "__file__", None):
        return None
    try:
        found = _resolve(module, qualname)
    except Exception:  # noqa: BLE001
        return None
    return (module, qualname) if _raw_fn(found) is fn else None


def worker_count(requested: int | None, target: Any, n: int) -> int:
    """How many workers to compile ``n`` candidates for ``target`` with (1: compile in-process);
    ``requested`` overrides ``TILELANG_X_AUTOTUNE_WORKERS``, and either at 0 or below means auto."""
    wanted = requested if requested is not None else knobs.autotune.workers
    if wanted <= 0:  # auto
        if getattr(target, "backend", "") == "interp":
            return 1
        wanted = min(_cpu_count(), 8)
    if knobs.cache.disable:  # the workers hand their binaries over through the disk caches
        return 1
    return max(1, min(wanted, n))


def compile_in_workers(jit: Any, cands: list[Candidate], target: Any, workers: int, args: tuple[Any, ...],
                       kwargs: dict[str, Any], timeout: float | None) -> list[Candidate]:
    """Compile ``cands`` (``jit`` called with ``args``, ``kwargs`` and each config) in worker
    processes, each compile bounded by ``timeout`` seconds; returns those the workers could not handle."""
    if not _can_spawn():
        logger.info("autotune: compiling in-process: worker processes would re-run the main script (start "
                    "the tuning under `if __name__ == \"__main__\":` to compile in parallel)")
        return cands
    if any_registered():
        logger.info("autotune: compiling in-process: a source post-processing callback is registered here")
        return cands
    ref = _import_ref(jit.fn)
    if ref is None:
        logger.info("autotune: compiling in-process: workers cannot import `%s` by name", jit.fn.__qualname__)
        return cands
    base = {
        "module": ref[0], "qualname": ref[1], "target": target, "timeout": timeout,
        "jit_kwargs": {"out_idx": jit.out_idx, "verbose": jit.options.get("verbose", False),
                       "pass_configs": jit.options.get("pass_configs"),
                       "compile_flags": jit.options.get("compile_flags")},
        "args": tensor_specs(args), "kwargs": tensor_specs(kwargs),
        "env": {k: v for k, v in os.environ.items() if k.startswith(knobs.PREFIX)}, "sys_path": list(sys.path),
    }
    tasks = {}
    retry = []
    for cand in cands:
        task = {**base, "config": cand.config}
        try:
            pickle.dumps(task)
        except Exception:  # noqa: BLE001 - e.g. a lambda in the static arguments
            retry.append(cand)
            continue
        tasks[id(cand)] = task
    if not tasks:
        return cands
    futures: dict[Any, Candidate] = {}
    for attempt in range(2):
        try:
            pool = _get_pool(workers)
            futures = {pool.submit(_worker_compile, tasks[id(c)]): c for c in cands if id(c) in tasks}
            break
        except Exception as exc:  # noqa: BLE001 - e.g. a pool broken earlier: try a fresh one once
            shutdown_workers(kill=True)
            if attempt:
                logger.warning("autotune: cannot start worker processes (%s); compiling in-process",
                               one_line_reason(exc))
                return cands
    bar = progress_bar(len(futures), f"compile {jit.fn.__name__}")
    # a worker enforces the timeout itself; the parent kills it only when that failed (stuck in
    # native code). "running" includes the one task queued ahead, hence twice the timeout.
    grace = None if timeout is None else 2 * timeout + 5.0
    started: dict[Any, float] = {}
    pending = set(futures)
    broken = False
    try:
        while pending:
            done, pending = cf.wait(pending, timeout=0.25 if grace else None, return_when=cf.FIRST_COMPLETED)
            for fut in done:
                cand = futures[fut]
                bar.update()
                try:
                    status, seconds, reason = fut.result()
                except Exception as exc:  # noqa: BLE001 - a dead worker: retry in-process
                    logger.debug("autotune: worker failed on config #%d: %s", cand.index, one_line_reason(exc))
                    broken = broken or isinstance(exc, cf.BrokenExecutor)
                    retry.append(cand)
                    continue
                if status == "setup":
                    logger.debug("autotune: worker cannot load the kernel (%s)", reason)
                    retry.append(cand)
                    continue
                cand.compile_time, cand.in_worker = seconds, True
                if status == "error":
                    cand.status, cand.reason = "compile_error", reason
                elif status == "timeout":
                    cand.status, cand.reason = "timeout", reason
                else:
                    cand.status = "compiled"
            if grace is None or not pending:
                continue
            now = time.monotonic()
            stuck = []
            for fut in pending:
                if fut.running():
                    started.setdefault(fut, now)
                    if now - started[fut] > grace:
                        stuck.append(fut)
            if stuck:
                for fut in stuck:
                    cand = futures[fut]
                    cand.status, cand.compile_time = "timeout", now - started[fut]
                    cand.reason = f"compile took longer than the {timeout} s timeout (worker killed)"
                    pending.discard(fut)
                shutdown_workers(kill=True)
                retry.extend(futures[f] for f in pending)
                pending = set()
    finally:
        bar.close()
    if broken:
        shutdown_workers(kill=True)
    return retry
