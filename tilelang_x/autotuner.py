"""Autotuning: compile a kernel for several configurations and keep the fastest, as TileLang's
``@tilelang.autotune`` does::

    @tilelang.autotune(configs=[{"block_M": 64, "block_N": 64}, ...], warmup=3, rep=10, ref_prog=ref)
    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, block_N=128): ...

    kernel = matmul(1024, 1024, 1024)     # tunes once per set of static arguments, returns the winner
    matmul.get_tuner_result()             # every candidate with its time or why it was skipped

``configs`` is a list of dicts, a dict of lists (their cartesian product), or a callable given the
static arguments that returns either. Keys are keyword parameters of the jitted function; passing
one of them at call time skips tuning. In the eager style ``best = tuned(a, b)`` tunes with ``a``
and ``b`` as the inputs and runs the winner.

How one tuning runs:

1. The on-disk store (``<cache dir>/autotune/<key>.json``) is asked first. The key hashes the
   kernel (qualified name, source, closure), the static arguments and tensor shapes/dtypes, the
   target, the detected devices, the python/torch/tilelang-x/plugin versions, the device toolchain
   (its knobs, name and version), the profile settings (reference program included) and the
   configs. A hit compiles only the remembered winner and benchmarks nothing
   (``result.from_cache``). An unreadable record is ignored and rewritten; an unwritable folder
   is warned about (``AutotuneCacheWarning``) and tuning goes on.
2. Compile phase. Compiled kernels cannot cross a process boundary (a launcher holds native
   handles), so worker processes ("spawn" pool, kept for later tunings) import the kernel by
   module and qualified name, trace it and run the compile stages up to ``tlx_compile`` -- no
   ``tlx_load``, so no device context in the workers. They report failures and compile times,
   and leave the binaries in the backends' on-disk caches (the CUDA plugin's cubin cache); the
   parent then compiles the survivors in-process, where the toolchain step is a cache hit, so
   the slow part (nvcc/NVRTC) runs in parallel. ``TILELANG_X_AUTOTUNE_WORKERS`` sets the number
   (default min(CPUs, 8)). The interpreter (millisecond compiles, unless workers are asked for
   explicitly), a disabled disk cache, one worker, kernels that cannot be imported by name
   (defined inside a function) and a main script that does not start the tuning under
   ``if __name__ == "__main__":`` (spawned workers re-import it) compile in-process; so does a
   candidate whose worker could not run.
3. Bench phase, in-process, one candidate at a time: inputs from the kernel's profiler (or the
   tensors passed in the eager style, ``supply_prog``, ``set_autotune_inputs``), the reference
   check (``profiler.assert_allclose``), then ``profiler.do_bench(warmup=, rep=)``, the target's
   timer.

``timeout`` bounds each candidate's compile and, separately, its check and benchmark. In-process
it is enforced with ``SIGALRM`` where that is possible (main thread, Unix, no other alarm), and
after the fact otherwise; a worker enforces it in its own process, and a worker stuck in native
code is killed a grace period later.
"""

from __future__ import annotations

import ast
import atexit
import concurrent.futures as cf
import contextlib
import dataclasses
import enum
import functools
import hashlib
import importlib
import inspect
import itertools
import json
import logging
import math
import multiprocessing
import os
import pickle
import platform
import re
import signal
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import knobs
from .core_ir.errors import ArgumentError, TileLangError
from .core_ir.source import SourceLoc, caller_loc

__all__ = [
    "AutoTuner", "AutoTuneImpl", "AutotuneResult", "Candidate", "AutotuneConfigError", "AutotuneError",
    "AutotuneCacheWarning", "autotune", "set_autotune_inputs", "normalize_configs",
]

logger = logging.getLogger(__name__)

_FORMAT = 1  # version of the JSON records in the store


class AutotuneConfigError(ArgumentError):
    """A malformed ``configs`` value, or a config key the kernel does not take."""


class AutotuneError(TileLangError):
    """No candidate compiled, ran and matched the reference."""


class AutotuneCacheWarning(UserWarning):
    """The autotune store could not be written; tuning results are not remembered."""


# ---- results ------------------------------------------------------------------------------------

@dataclass
class Candidate:
    """One configuration tried. ``status``: ``ok``, ``compile_error``, ``run_error``, ``mismatch``,
    ``timeout`` (``pending`` before it is tried). ``latency`` in ms, ``compile_time`` in s;
    ``in_worker``: the compile time was measured in a worker process."""

    index: int
    config: dict[str, Any]
    status: str = "pending"
    latency: float | None = None
    compile_time: float | None = None
    reason: str | None = None
    in_worker: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class AutotuneResult:
    """What a tuning found (TileLang's ``AutotuneResult`` fields first).

    ``candidates`` lists every configuration with its time or the reason it was skipped;
    ``from_cache`` says the answer came from the disk store (nothing was benchmarked: the times
    are the remembered ones); ``tuned`` is False when the caller passed the tunable parameters.
    """

    latency: float | None = None
    config: dict[str, Any] | None = None
    ref_latency: float | None = None
    libcode: str | None = None
    func: Any = None
    kernel: Any = None
    candidates: list[Candidate] = field(default_factory=list)
    from_cache: bool = False
    tuned: bool = True
    key: str | None = None
    cache_path: str | None = None
    target: str | None = None
    kernel_name: str = ""
    best_index: int | None = None
    elapsed: float = 0.0
    benchmarked: int = 0

    @property
    def failed(self) -> list[Candidate]:
        """The candidates that were skipped, with their reasons."""
        return [c for c in self.candidates if c.status not in ("ok", "pending")]

    def table(self) -> str:
        """A readable summary: one line per candidate, the winner marked ``*``."""
        n_ok = sum(c.ok for c in self.candidates)
        head = f"autotune {self.kernel_name or '?'} ({self.target}): {len(self.candidates)} candidates, {n_ok} ok"
        if self.latency is not None:
            head += f"; best {self.latency:.4g} ms {self.config}"
        if self.ref_latency is not None:
            head += f"; reference {self.ref_latency:.4g} ms"
        if self.from_cache:
            head += f" [from cache {self.cache_path}]"
        lines = [head, f"  {'#':>3}  {'status':<13} {'ms':>10} {'compile s':>10}  config / reason"]
        best = self.best_index
        for c in self.candidates:
            ms = f"{c.latency:.4g}" if c.latency is not None else "-"
            cs = f"{c.compile_time:.3f}" if c.compile_time is not None else "-"
            mark = "*" if c.index == best else " "
            text = f"{c.config}" + (f": {c.reason}" if c.reason else "")
            lines.append(f" {mark}{c.index:>3}  {c.status:<13} {ms:>10} {cs:>10}  {text}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


# ---- configs ------------------------------------------------------------------------------------

def _expand(configs: Any, name: str, loc: SourceLoc | None) -> list[Any]:
    if isinstance(configs, Mapping):
        if not configs:
            raise AutotuneConfigError(f"autotune configs for `{name}` is an empty dict", loc=loc,
                                      hint="give a list of dicts, or a dict of lists of values")
        choices = []
        for key, values in configs.items():
            if not isinstance(values, (list, tuple, range)) or len(values) == 0:
                raise AutotuneConfigError(
                    f"autotune configs for `{name}`: key {key!r} maps to {values!r}, not a non-empty list of "
                    "values", loc=loc, hint=f"write {key!r}: [v1, v2, ...] (a dict of lists means every combination)",
                )
            choices.append(list(values))
        return [dict(zip(configs, combo)) for combo in itertools.product(*choices)]
    if isinstance(configs, (list, tuple)):
        return list(configs)
    raise AutotuneConfigError(
        f"autotune configs for `{name}` must be a list of dicts, a dict of lists or a callable returning one, "
        f"not {type(configs).__name__}", loc=loc,
    )


def normalize_configs(
    configs: Any,
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    loc: SourceLoc | None = None,
) -> list[dict[str, Any]]:
    """The list of configs ``configs`` stands for, checked against ``fn``'s parameters: every item a
    dict with string keys that ``fn`` accepts. Raises ``AutotuneConfigError`` naming the culprit."""
    name = name or getattr(fn, "__name__", "kernel")
    items = _expand(configs, name, loc)
    if not items:
        raise AutotuneConfigError(f"autotune configs for `{name}` is empty", loc=loc,
                                  hint="give at least one config, e.g. [{'block_M': 64}, {'block_M': 128}]")
    params: Mapping[str, inspect.Parameter] | None = None
    if fn is not None:
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            params = None
    accepts_any = params is None or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    usable = [] if params is None else [
        n for n, p in params.items()
        if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD,
                          inspect.Parameter.POSITIONAL_ONLY)
    ]
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise AutotuneConfigError(
                f"autotune config #{i} for `{name}` is {type(item).__name__} {item!r}, not a dict",
                loc=loc, hint="each config is a dict of keyword arguments, e.g. {'block_M': 64}",
            )
        for key in item:
            if not isinstance(key, str):
                raise AutotuneConfigError(f"autotune config #{i} for `{name}` has key {key!r}, not a parameter name",
                                          loc=loc)
            if not accepts_any and key not in usable:
                raise AutotuneConfigError(
                    f"autotune config #{i} {dict(item)!r}: `{key}` is not a parameter of `{name}`",
                    loc=loc, hint=f"`{name}` takes: {', '.join(usable) or 'no keyword parameters'}",
                )
        out.append(dict(item))
    return out


# ---- canonical values and keys -----------------------------------------------------------------

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _is_tensor(value: Any) -> bool:
    from .frontend.jit import is_tensor

    return is_tensor(value)


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
                closure[var] = _canon(cell.cell_contents, depth + 1)
            except ValueError:  # empty cell
                closure[var] = None
        ident["closure"] = closure
    return ident


def _canon(value: Any, depth: int = 0) -> Any:
    """A JSON-ready stand-in for ``value``: equal for values that compile alike."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, Mapping):
        return {"dict": sorted([str(k), _canon(v, depth)] for k, v in value.items())}
    if isinstance(value, (list, tuple)):
        return [_canon(v, depth) for v in value]
    if isinstance(value, (set, frozenset)):
        return {"set": sorted(repr(v) for v in value)}
    if isinstance(value, _TensorSpec):
        return {"tensor": list(value.shape), "dtype": str(value.dtype)}
    if _is_tensor(value):
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
    from . import __version__, registry

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
        from .__main__ import collect_toolchains

        return sorted(f"{t['name']} {t['version']} {t['path']}" for t in collect_toolchains()
                      if t.get("backend") == backend and t.get("found"))
    except Exception as exc:  # noqa: BLE001 - only weakens the key
        return [repr(exc)]


# ---- the on-disk store ---------------------------------------------------------------------------

class _Store:
    """One JSON file per tuning under ``<cache dir>/autotune``; atomic writes, bad files ignored."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def load(self, key: str) -> dict[str, Any] | None:
        path = self.path(key)
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:  # an unusable folder; save() warns about it
            logger.debug("cannot read autotune record %s: %s", path, exc)
            return None
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if not isinstance(data, dict) or data.get("format") != _FORMAT or data.get("key") != key:
            logger.warning("ignoring corrupt autotune record %s; tuning again", path)
            return None
        return data

    def save(self, key: str, data: dict[str, Any]) -> bool:
        path = self.path(key)
        tmp = None
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=self.root)
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh, indent=1, default=str)
            os.replace(tmp, path)
            return True
        except OSError as exc:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            warnings.warn(
                f"cannot write the autotune cache under {self.root}: {exc}; the tuning result is not remembered "
                "(set TILELANG_X_CACHE_DIR to a writable folder, or TILELANG_X_AUTOTUNE_DISABLE_CACHE=1)",
                AutotuneCacheWarning, stacklevel=_user_stacklevel(),
            )
            return False


def _user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning point at the user's line, for the caller of this."""
    from .core_ir.source import _is_internal

    level, frame = 1, sys._getframe(1)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        level += 1
        frame = frame.f_back
    return level


def _store() -> _Store | None:
    if knobs.cache.disable or knobs.autotune.disable_cache:
        return None
    return _Store(Path(knobs.cache.dir) / "autotune")


# ---- time limits and progress ------------------------------------------------------------------

class _Timeout(BaseException):
    """Raised by the alarm; a BaseException so that no ``except Exception`` on the way swallows it."""


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Interrupt the block after ``seconds`` with ``_Timeout`` where SIGALRM can do it."""
    usable = (
        seconds is not None and seconds > 0 and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    )
    if not usable:
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))  # type: ignore[arg-type]
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old if old is not None else signal.SIG_DFL)


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


def _bar(total: int, desc: str) -> Any:
    if not knobs.autotune.progress or total <= 1:
        return _NoBar()
    stream = sys.stderr
    try:
        tty = stream is not None and stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not tty:
        return _NoBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, leave=False, file=stream)


def _reason(exc: BaseException, limit: int = 300) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0].strip() if text else ""
    if not isinstance(exc, (TileLangError, AssertionError)):
        first = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    elif not first:
        first = type(exc).__name__
    return first if len(first) <= limit else first[: limit - 3] + "..."


# ---- inputs ------------------------------------------------------------------------------------

_inputs_override: list[list[Any]] = []


@contextlib.contextmanager
def set_autotune_inputs(*tensors: Any) -> Iterator[None]:
    """Tune with these inputs (the kernel's non-output arguments, in order) instead of random ones:
    ``with set_autotune_inputs(a, b): kernel = matmul(M, N, K)`` (a single list works too)."""
    values = list(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else list(tensors)
    _inputs_override.append(values)
    try:
        yield
    finally:
        _inputs_override.pop()


@dataclass(frozen=True)
class _TensorSpec:
    """What a worker needs of a tensor argument: its shape and dtype (no data crosses)."""

    shape: tuple[int, ...]
    dtype: Any


def _specs(value: Any) -> Any:
    if _is_tensor(value):
        return _TensorSpec(tuple(int(d) for d in value.shape), value.dtype)
    if isinstance(value, dict):
        return {k: _specs(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and any(_is_tensor(v) for v in value):
        return type(value)(_specs(v) for v in value)
    return value


# ---- worker processes ---------------------------------------------------------------------------

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
    from .frontend.jit import JITFunc

    if isinstance(obj, AutoTuneImpl):
        obj = obj.jit_func
    if isinstance(obj, JITFunc):
        return obj.fn
    return obj


def _worker_compile(task: dict[str, Any]) -> tuple[str, float, str | None]:
    """Runs in a worker: trace and compile one candidate. ``("ok" | "error" | "timeout" | "setup",
    seconds, reason)``; ``setup`` means the worker could not get at the kernel at all."""
    _apply_env(task["env"], task["sys_path"])
    from . import compiler
    from .frontend.jit import JITFunc

    try:
        key = (task["module"], task["qualname"], repr(task["jit_kwargs"]))
        jit = _worker_jits.get(key)
        if jit is None:
            jit = _worker_jits[key] = JITFunc(_raw_fn(_resolve(task["module"], task["qualname"])),
                                              **task["jit_kwargs"])
    except Exception as exc:  # noqa: BLE001 - reported, and the parent compiles it instead
        return "setup", 0.0, _reason(exc)
    start = time.perf_counter()
    timeout = task["timeout"]
    try:
        with _time_limit(timeout):
            func = jit.get_ir(*task["args"], **{**task["kwargs"], **task["config"]})
            compiler.build(func, task["target"], jit.options)
    except _Timeout:
        return "timeout", time.perf_counter() - start, f"compile took longer than the {timeout} s timeout"
    except Exception as exc:  # noqa: BLE001 - a failing candidate is an answer
        return "error", time.perf_counter() - start, _reason(exc)
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


# ---- the tuner ----------------------------------------------------------------------------------

@dataclass
class _ProfileArgs:
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
        self.profile_args = _ProfileArgs()
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
        self.profile_args = _ProfileArgs(warmup, rep, timeout, supply_type, ref_prog, supply_prog, rtol, atol,
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
        from .frontend.jit import JITFunc

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

    def _configs(self) -> list[dict[str, Any]]:
        jit = self.jit_func()
        configs = self.configs
        if callable(configs):
            configs = configs(*self.args, **self.kwargs)
        return normalize_configs(configs, jit.fn, name=jit.fn.__name__, loc=self.loc)

    def _key(self, jit: Any, configs: list[dict[str, Any]], target: Any) -> str:
        p = self.profile_args
        try:
            bound = inspect.signature(jit.fn).bind_partial(
                *self.args, **{k: v for k, v in self.kwargs.items() if k in inspect.signature(jit.fn).parameters})
            static = dict(bound.arguments)
        except TypeError:
            static = {"args": self.args}
        static.update({k: v for k, v in self.kwargs.items() if k not in static})
        for name in self.do_not_specialize:
            static.pop(name, None)
        data = {
            "format": _FORMAT,
            "kernel": _fn_identity(jit.fn),
            "style": jit.style,
            "static": _canon(static),
            "jit": _canon({"out_idx": jit.out_idx, "options": jit.options}),
            "target": str(target),
            "versions": _versions(target),
            "profile": _canon({f.name: getattr(p, f.name) for f in dataclasses.fields(p)}),
            "inputs_override": bool(_inputs_override),
            "configs": _canon(configs),
        }
        return _digest(data)

    def _compile(self, jit: Any, config: dict[str, Any]) -> Any:
        return jit.compile(*self.args, **{**self.kwargs, **config})

    def _inputs(self, jit: Any, kernel: Any, profiler: Any, memo: dict[Any, Any]) -> list[Any]:
        p = self.profile_args
        if _inputs_override:
            return list(_inputs_override[-1])
        ins = [prm for i, prm in enumerate(kernel.params) if i not in kernel.out_idx]
        if p.supply_prog is not None:
            return list(p.supply_prog(ins))
        if jit.style == "eager":  # the tensors the caller passed
            try:
                sig = inspect.signature(jit.fn)
                bound = sig.bind_partial(*self.args, **{k: v for k, v in self.kwargs.items() if k in sig.parameters})
                given = [bound.arguments.get(prm.name) for prm in ins]
                if all(_is_tensor(t) for t in given):
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
                raise _Mismatch(_reason(exc)) from None
        latency = float(profiler.do_bench(warmup=p.warmup, rep=p.rep, input_tensors=inputs))
        return latency, inputs, profiler

    def _workers(self, target: Any, n: int) -> int:
        wanted = self.workers if self.workers is not None else knobs.autotune.workers
        if wanted <= 0:  # auto
            if getattr(target, "backend", "") == "interp":
                return 1
            wanted = min(_cpu_count(), 8)
        if knobs.cache.disable:  # the workers hand their binaries over through the disk caches
            return 1
        return max(1, min(wanted, n))

    def _compile_in_workers(self, jit: Any, cands: list[Candidate], target: Any, workers: int) -> list[Candidate]:
        """Compile ``cands`` in worker processes; returns those the workers could not handle."""
        if not _can_spawn():
            logger.info("autotune: compiling in-process: worker processes would re-run the main script (start "
                        "the tuning under `if __name__ == \"__main__\":` to compile in parallel)")
            return cands
        ref = _import_ref(jit.fn)
        if ref is None:
            logger.info("autotune: compiling in-process: workers cannot import `%s` by name", jit.fn.__qualname__)
            return cands
        timeout = self.profile_args.timeout or None
        base = {
            "module": ref[0], "qualname": ref[1], "target": target, "timeout": timeout,
            "jit_kwargs": {"out_idx": jit.out_idx, "verbose": jit.options.get("verbose", False),
                           "pass_configs": jit.options.get("pass_configs"),
                           "compile_flags": jit.options.get("compile_flags")},
            "args": _specs(self.args), "kwargs": _specs(self.kwargs),
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
                                   _reason(exc))
                    return cands
        bar = _bar(len(futures), f"compile {jit.fn.__name__}")
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
                        logger.debug("autotune: worker failed on config #%d: %s", cand.index, _reason(exc))
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
        from . import registry

        start = time.perf_counter()
        jit = self.jit_func()
        configs = self._configs()
        target = registry.resolve_target(jit.target)
        name = jit.fn.__name__
        key = self._key(jit, configs, target)
        store = _store()
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
        workers = self._workers(target, len(cands))
        todo = cands
        if workers > 1:
            todo = self._compile_in_workers(jit, cands, target, workers)
        for cand in todo:
            cand.status = "pending"

        # in-process: compile (a cache hit after the workers), check, time
        memo: dict[Any, Any] = {}
        kernels: dict[int, Any] = {}
        live = [c for c in cands if c.status in ("pending", "compiled")]
        bar = _bar(len(live), f"tune {name}")
        ref_inputs = None
        try:
            for cand in live:
                bar.update()
                t0 = time.perf_counter()
                try:
                    with _time_limit(timeout_s):
                        kernel = self._compile(jit, cand.config)
                    elapsed = time.perf_counter() - t0
                    if cand.compile_time is None:
                        cand.compile_time = elapsed
                    if timeout_s is not None and elapsed > timeout_s:
                        raise _Timeout()
                except _Timeout:
                    cand.status = "timeout"
                    cand.compile_time = time.perf_counter() - t0
                    cand.reason = f"compile took longer than the {timeout_s} s timeout"
                    continue
                except Exception as exc:  # noqa: BLE001 - a failing candidate is skipped
                    cand.status, cand.reason = "compile_error", _reason(exc)
                    if cand.compile_time is None:
                        cand.compile_time = time.perf_counter() - t0
                    continue
                t0 = time.perf_counter()
                try:
                    with _time_limit(timeout_s):
                        latency, inputs, profiler = self._bench(jit, kernel, memo)
                    if timeout_s is not None and time.perf_counter() - t0 > timeout_s:
                        raise _Timeout()
                except _Timeout:
                    cand.status = "timeout"
                    cand.reason = f"check and benchmark took longer than the {timeout_s} s timeout"
                    continue
                except _Mismatch as exc:
                    cand.status, cand.reason = "mismatch", str(exc)
                    continue
                except Exception as exc:  # noqa: BLE001
                    cand.status, cand.reason = "run_error", _reason(exc)
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
            store.save(key, self._record(key, result, jit))
        self._report(result)
        return result

    def _ref_latency(self, profiler: Any, inputs: list[Any]) -> float | None:
        p = self.profile_args
        try:
            return float(profiler.do_bench(p.ref_prog, warmup=p.warmup, rep=p.rep, input_tensors=inputs))
        except Exception as exc:  # noqa: BLE001 - the reference's time is only informative
            logger.debug("autotune: timing the reference failed: %s", _reason(exc))
            return None

    @staticmethod
    def _fill(result: AutotuneResult, best: Candidate, kernel: Any) -> None:
        result.latency, result.config, result.kernel = best.latency, best.config, kernel
        result.best_index = best.index
        result.func = getattr(kernel, "func", None)
        with contextlib.suppress(Exception):
            result.libcode = kernel.get_kernel_source()
        _annotate(kernel, result)

    @staticmethod
    def _record(key: str, result: AutotuneResult, jit: Any) -> dict[str, Any]:
        best = result.best_index
        return {
            "format": _FORMAT, "key": key, "kernel": f"{jit.fn.__module__}.{jit.fn.__qualname__}",
            "target": result.target, "created": time.time(), "best_index": best,
            "best_config": _canon(result.config), "latency": result.latency, "ref_latency": result.ref_latency,
            "candidates": [
                {"index": c.index, "config": repr(c.config), "status": c.status, "latency": c.latency,
                 "compile_time": c.compile_time, "reason": c.reason}
                for c in result.candidates
            ],
        }

    def _recall(self, jit: Any, configs: list[dict[str, Any]], record: dict[str, Any], result: AutotuneResult
                ) -> bool:
        """Use a stored record: compile its winner only. False (tune again) when it does not fit."""
        best = record.get("best_index")
        if not isinstance(best, int) or not 0 <= best < len(configs) or \
                json.loads(json.dumps(_canon(configs[best]))) != record.get("best_config"):
            logger.warning("ignoring corrupt autotune record %s; tuning again", result.cache_path)
            return False
        try:
            kernel = self._compile(jit, configs[best])
        except Exception as exc:  # noqa: BLE001 - the world changed under the record
            logger.warning("autotune: the remembered config #%d of `%s` no longer compiles (%s); tuning again",
                           best, jit.fn.__name__, _reason(exc))
            return False
        cands = [Candidate(i, c) for i, c in enumerate(configs)]
        stored = record.get("candidates")
        for row in stored if isinstance(stored, list) else ():
            if not isinstance(row, dict) or not isinstance(row.get("index"), int) or \
                    not 0 <= row["index"] < len(cands):
                continue
            cand = cands[row["index"]]
            cand.status = str(row.get("status", "pending"))
            for attr in ("latency", "compile_time"):
                value = row.get(attr)
                setattr(cand, attr, float(value) if isinstance(value, (int, float)) else None)
            cand.reason = row.get("reason") if isinstance(row.get("reason"), str) else None
        cands[best].status = "ok"
        result.candidates = cands
        result.from_cache = True
        ref = record.get("ref_latency")
        result.ref_latency = float(ref) if isinstance(ref, (int, float)) else None
        lat = record.get("latency")
        cands[best].latency = float(lat) if isinstance(lat, (int, float)) else cands[best].latency
        self._fill(result, cands[best], kernel)
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


# ---- the decorator ------------------------------------------------------------------------------

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
        fields = {f.name for f in dataclasses.fields(_ProfileArgs)}
        tuner.profile_args = _ProfileArgs(**{k: v for k, v in self.profile.items() if k in fields})
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
            _canon([a for i, a in enumerate(args) if i >= len(names) or names[i] not in skip]),
            _canon({k: v for k, v in kwargs.items() if k not in skip}), str(target),
            bool(_inputs_override),
        ], sort_keys=True, default=str)
        with self._lock:
            found = self._results.get(memo_key)
        if found is not None:
            self._last = found
            return found
        tuner = self._tunable(args, kwargs)
        configs = tuner._configs()
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
    from .core_ir.stmt import PrimFunc
    from .frontend.jit import JITFunc

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
