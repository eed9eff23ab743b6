"""Helpers shared by the CUDA benchmarks: arguments, device facts, timing, JSON output."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)  # so that `tests.kernels` imports when run as `python bench/x.py`


def parse_args(description: str, extra: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", default="", help="write the JSON result here too (it is always printed)")
    p.add_argument("--warmup", type=int, default=10, help="untimed calls before timing")
    p.add_argument("--rep", type=int, default=50, help="timed calls (the median is reported)")
    p.add_argument("--quick", action="store_true", help="fewer shapes and configs (a smoke run)")
    p.add_argument("--rounds", type=int, default=5,
                   help="rounds of the final comparison: ours and the references timed in turn (round_robin_ms)")
    p.add_argument("--timeout", type=float, default=0, help="seconds after which to dump stacks and exit "
                   "(a hung kernel); the results so far are already in --out")
    if extra is not None:
        extra(p)
    args = p.parse_args()
    if args.timeout > 0:
        import faulthandler

        faulthandler.dump_traceback_later(args.timeout, exit=True)
    return args


def device_info() -> dict[str, Any]:
    """What the numbers were measured on."""
    import torch

    info: dict[str, Any] = {
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(device=props.name, sm_count=props.multi_processor_count,
                    capability=f"{props.major}.{props.minor}",
                    l2_bytes=getattr(props, "L2_cache_size", None), memory_gb=round(props.total_memory / 2**30, 1))
    try:
        from tilelang_x.plugins.cuda import compile as cc
        from tilelang_x.plugins.cuda import driver, runtime

        info["cuda_driver"] = "{}.{}".format(*driver.driver_version())
        info["compiler"] = cc.toolchain_status()[1]
        info["launcher"] = runtime.launcher_kind()
    except Exception as e:  # noqa: BLE001 - facts only
        info["toolchain_error"] = str(e)
    return info


def median_ms(fn: Callable[[], Any], warmup: int, rep: int, flush_l2: bool = True) -> float:
    from tilelang_x.plugins.cuda.profiler import timer

    return statistics.median(timer(fn, warmup, rep, flush_l2=flush_l2))


def in_turns(fns: dict[str, Callable[[], Any]], rounds: int, time_one: Callable[[Callable[[], Any]], float]
             ) -> dict[str, float]:
    """Each function's median of ``time_one(fn)`` over ``rounds`` rounds that time every function
    once, each round starting one place later. ``rounds`` is rounded up to a multiple of the
    functions' count, so that each runs first equally often and an effect of the order cannot
    favour one of them (two functions in five rounds: one led three)."""
    names = list(fns)
    rounds = -(-rounds // len(names)) * len(names)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            times[n].append(time_one(fns[n]))
    return {n: statistics.median(t) for n, t in times.items()}


def round_robin_ms(fns: dict[str, Callable[[], Any]], rounds: int, warmup: int, rep: int) -> dict[str, float]:
    """Each function's median time (``median_ms``) over ``rounds`` rounds timed in turn
    (``in_turns``). The GPU's clock follows its temperature and power: a kernel timed alone right
    after a pause runs faster than the same kernel in turn with others (H200, 2026-11-30: cuDNN
    attention 652 TFLOP/s timed first and alone, 573 in turns with ours, whose figure moved 6 %), so
    ratios come from the same rounds."""
    return in_turns(fns, rounds, lambda fn: median_ms(fn, warmup, rep))


def back_to_back_ms(fn: Callable[[], Any], seconds: float) -> float:
    """Mean time of ``fn()`` in milliseconds over about ``seconds`` of calls issued back to back (no L2
    flush, no pause: the GPU works at the clock its power limit allows; H200, 2026-11-30: GEMM 4096³
    at 700 W and ~1400 MHz, where the L2-flushed timings of ``median_ms`` leave it cooler)."""
    import torch

    per_call = median_ms(fn, 3, 10, flush_l2=False)
    n = max(10, int(seconds * 1000 / max(per_call, 1e-3)))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / n


def attempt(fn: Callable[[], Any]) -> tuple[Any, str | None]:
    """``(fn(), None)``, or ``(None, the error's last lines)`` when it raises."""
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001 - a benchmark reports failures and goes on
        text = f"{type(e).__name__}: {e}"
        if os.environ.get("BENCH_TRACEBACK"):
            text += "\n" + traceback.format_exc()
        return None, text[:2000]


def try_configs(
    configs: list[dict[str, Any]], build: Callable[[dict[str, Any]], Any], run: Callable[[Any], Any],
    ref: Any, flops: float, args: argparse.Namespace, compared: Callable[[Any], Any] = lambda out: out,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None, Any]:
    """Build each configuration for ``args.target``, check it against ``ref`` (relative error
    < 1e-2 of ``compared(run(kernel))``, e.g. several outputs flattened into one, outside the
    timing) and time it; returns every configuration's entry (its time or its error), the
    fastest correct one and its kernel."""
    from tilelang_x import knobs

    tried: list[dict[str, Any]] = []
    best: dict[str, Any] | None = None
    best_kernel: Any = None
    for cfg in configs:
        with knobs.scope(target_default=args.target):
            kernel, err = attempt(lambda cfg=cfg: build(cfg))
        if err is None:
            e, err = checked_run(kernel, lambda kernel: compared(run(kernel)), ref)
        if err is not None:
            tried.append({**cfg, "error": err})
            continue
        ms = median_ms(lambda kernel=kernel: run(kernel), args.warmup, args.rep)
        entry = {**cfg, "ms": round(ms, 4), "tflops": round(flops / ms / 1e9, 1), "rel_err": float(f"{e:.3g}")}
        tried.append(entry)
        if best is None or ms < best["ms"]:
            best, best_kernel = entry, kernel
    return tried, best, best_kernel


def final_figures(row: dict[str, Any], refs: dict[str, Callable[[], Any]], ours: Callable[[], Any] | None,
                  best: dict[str, Any] | None, tried: list[dict[str, Any]], flops: float, names: tuple[str, ...],
                  config_keys: tuple[str, ...], args: argparse.Namespace) -> dict[str, Any]:
    """Into ``row``: ours (``ours``, the fastest correct configuration ``best``) and the references
    ``refs`` (those of ``names`` that ran) timed in turn (``round_robin_ms``): ``<name>_ms`` and
    ``<name>_tflops`` for each and ours, ``best_config``, ``ratio_<name>`` = the reference's time /
    ours (>= 1: we are faster), and every configuration ``tried``."""
    final = round_robin_ms({**refs, **({"ours": ours} if best else {})}, args.rounds, args.warmup, args.rep)
    for key in (*names, "ours"):
        row[f"{key}_ms"] = round(final[key], 4) if key in final else None
        row[f"{key}_tflops"] = round(flops / final[key] / 1e9, 1) if key in final else None
    if best is not None:
        row["best_config"] = {k: v for k, v in best.items() if k in config_keys}
    for key in names:
        both = key in final and "ours" in final
        row[f"ratio_{key}"] = round(final[key] / final["ours"], 3) if both else None
    row["configs"] = tried
    return row


def attention_main(bench: str, description: str, case: Callable[..., dict[str, Any]], configs_help: str,
                   dims: str) -> None:
    """An attention benchmark's command line (``--seq``, ``--configs``, ``--target``, ``--dims``,
    default ``dims``), then ``case(4, 32, S, D, causal, args)`` for each head dim, causal or not
    (S: ``--seq``, else 4096, 1024 with ``--quick``), each row checkpointed to ``--out`` (a failed
    one as its error), then the document emitted."""

    def extra(p: argparse.ArgumentParser) -> None:
        p.add_argument("--seq", type=int, default=0, help="sequence length (default 4096, 1024 with --quick)")
        p.add_argument("--configs", default="", help=configs_help)
        p.add_argument("--target", default="cuda", help="e.g. cuda:sm_90 for the sm_80-class path on a Hopper GPU")
        p.add_argument("--dims", default=dims, help="head dims to measure, e.g. 64,128")

    args = parse_args(description, extra)
    s = args.seq or (1024 if args.quick else 4096)
    results: list[dict[str, Any]] = []
    doc = {"bench": bench, "info": device_info(), "results": results}
    for d in (int(x) for x in args.dims.split(",") if x):
        for causal in (False, True):
            row, err = attempt(lambda causal=causal, d=d: case(4, 32, s, d, causal, args))
            results.append(row if err is None else {"D": d, "causal": causal, "error": err})
            checkpoint(doc, args.out)
    emit(doc, args.out)


def chosen_configs(defaults: list[tuple[Any, ...]], keys: tuple[str, ...], args: argparse.Namespace
                   ) -> list[dict[str, Any]]:
    """The configurations to try, as dicts of ``keys``: ``--configs`` (``AxBx..[@CXxCYxCZ],..``)
    when given, else ``defaults`` (the first two with ``--quick``)."""
    configs = defaults[:2] if args.quick else defaults
    if args.configs:
        configs = [parse_config(c) for c in args.configs.split(",") if c]
    return [dict(zip(keys, c)) for c in configs]


def checked_run(kernel: Any, run: Callable[[Any], Any], ref: Any) -> tuple[float, str | None]:
    """Run ``kernel`` once against ``ref``: (relative error, None), or (nan, why it failed or is
    wrong: relative error >= 1e-2)."""
    out, err = attempt(lambda: run(kernel))
    if err is not None:
        return float("nan"), err
    e = rel_err(out, ref)
    return e, (None if e < 1e-2 else f"wrong result: relative error {e:.3g}")


def rel_err(actual: Any, expected: Any) -> float:
    a, e = actual.double(), expected.double()
    return float((a - e).norm() / e.norm().clamp_min(1e-30))


def checkpoint(result: dict[str, Any], out: str) -> None:
    """Write the partial result to ``out`` (quietly), so a run that is killed keeps what it measured."""
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as f:
            json.dump({**result, "partial": True}, f, indent=2)


def emit(result: dict[str, Any], out: str) -> None:
    text = json.dumps(result, indent=2, sort_keys=False)
    print(text)
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as f:
            f.write(text + "\n")


def run_shapes(bench: str, dtypes: list[str], shapes: list[tuple[int, ...]],
               one: Callable[[int, int, int, str], dict[str, Any]], out: str) -> None:
    """``one(m, n, k, dtype)`` for every dtype and shape, each row (or its error) checkpointed to
    ``out`` as it comes, then the document ``{"bench": bench, "info": ..., "results": rows}``."""
    results: list[dict[str, Any]] = []
    doc = {"bench": bench, "info": device_info(), "results": results}
    for dtype_name in dtypes:
        for m, n, k in shapes:
            row, err = attempt(lambda m=m, n=n, k=k, d=dtype_name: one(m, n, k, d))
            results.append(row if err is None else {"dtype": dtype_name, "M": m, "N": n, "K": k, "error": err})
            checkpoint(doc, out)
    emit(doc, out)


def record_ours(row: dict[str, Any], final: dict[str, float], flops: float, best: dict[str, Any] | None,
                keys: tuple[str, ...]) -> float | None:
    """Our time in ``row`` (``ours_ms``, ``ours_tflops``, ``ratio`` against ``final["torch"]``, the
    ``best`` configuration's ``keys``); all None when no configuration ran. Returns our ms."""
    if best is None:
        row.update(ours_ms=None, ours_tflops=None, ratio=None)
        return None
    ours = final["ours"]
    row.update(ours_ms=round(ours, 4), ours_tflops=round(flops / ours / 1e9, 1), ratio=round(final["torch"] / ours, 3),
               best_config={k: v for k, v in best.items() if k in keys})
    return ours


def parse_shapes(text: str, default: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """``MxNxK,...`` as tuples, or ``default`` when ``text`` is empty."""
    return [tuple(int(x) for x in sh.split("x")) for sh in text.split(",") if sh] if text else default


def parse_config(text: str) -> tuple[Any, ...]:
    """``AxBx...`` tile sizes with an optional thread-block cluster ``@CXxCYxCZ`` (a last tuple item)."""
    tile, _, cluster = text.partition("@")
    cfg = tuple(int(x) for x in tile.split("x"))
    return (*cfg, tuple(int(x) for x in cluster.split("x"))) if cluster else cfg
