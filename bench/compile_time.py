"""Cold compile time per kernel (disk cache disabled, in-memory cache cleared), split by phase.

For each kernel: ``frontend_s`` is tracing the ``@tilelang.jit`` factory into IR (``get_ir``);
``total_s`` = frontend + the compile driver (``compile_prim_func``);
``lowering_s`` = the core and CUDA stages (specialize, simplify, verify, layout inference,
lowering...); ``codegen_s``; ``compile_s`` (NVRTC or nvcc; both are measured when both are
installed); ``load_s`` (building the launcher); ``first_call_ms`` = the first launch, which loads
the module onto the GPU, minus a steady-state call. Target for the GEMM: total <= 0.5 s
(TileLang: 2-5 s). One warm-up kernel is compiled first so one-time imports are not counted.
Each kernel is compiled ``--repeats`` times from scratch: its row is the first, cold compile, and
``total_s_repeats`` has the totals of the others. On the H200 (2026-12-01) NVRTC compiled the same
GEMM source in 0.42 s the first time in a process and in 0.04 s after that, with no cache of ours
enabled: the repeats show what such a cache outside tilelang-x saves, and the row does not.

Run: ``python bench/compile_time.py --out $OUT/compile_time.json``
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from _common import attempt, device_info, emit, parse_args


def kernels() -> list[tuple[str, Any, tuple[Any, ...], dict[str, Any], Callable[[], tuple[Any, ...]]]]:
    """``(name, jitted factory, its args, its kwargs, make the kernel's inputs)``."""
    import torch

    from tests.kernels import attention, elementwise, gemm, reductions

    def gemm_inputs() -> tuple[Any, ...]:
        return (torch.randn(4096, 4096, device="cuda", dtype=torch.float16),
                torch.randn(4096, 4096, device="cuda", dtype=torch.float16))

    def attn_inputs() -> tuple[Any, ...]:
        return tuple(torch.randn(4, 32, 4096, 128, device="cuda", dtype=torch.float16) for _ in range(3))

    attn_cfg = {"block_M": 128, "block_N": 64, "num_stages": 2, "threads": 256}
    return [
        ("gemm_fp16_4096_128x256x64", gemm.matmul, (4096, 4096, 4096),
         {"block_M": 128, "block_N": 256, "block_K": 64, "num_stages": 3, "threads": 256}, gemm_inputs),
        ("gemm_fp16_4096_128x128x32", gemm.matmul, (4096, 4096, 4096), {}, gemm_inputs),
        ("flash_attention_fwd", attention.flash_attention, (4, 32, 4096, 128, False), attn_cfg, attn_inputs),
        ("flash_attention_fwd_causal", attention.flash_attention, (4, 32, 4096, 128, True), attn_cfg, attn_inputs),
        ("softmax_rows", reductions.softmax, (64, 256), {},
         lambda: (torch.randn(64, 256, device="cuda", dtype=torch.float16),)),
        ("rms_norm", reductions.rms_norm, (64, 512), {},
         lambda: (torch.randn(64, 512, device="cuda"), torch.randn(512, device="cuda"))),
        ("vector_add", elementwise.vector_add, (), {},
         lambda: (torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda"))),
    ]


def measure(jitted: Any, args: tuple[Any, ...], kwargs: dict[str, Any], inputs: Callable[[], tuple[Any, ...]],
            configs: dict[str, Any]) -> dict[str, Any]:
    """Trace (``get_ir``) then compile (``compile_prim_func``, in-memory cache cleared, with the
    pass ``configs`` added), timing both."""
    import torch

    from tilelang_x import compiler

    t0 = time.perf_counter()
    func = jitted.get_ir(*args, **kwargs)
    t1 = time.perf_counter()
    compiler.clear_cache()
    options = dict(getattr(jitted, "options", {}) or {})
    if configs:
        options["pass_configs"] = {**(options.get("pass_configs") or {}), **configs}
    kernel = compiler.compile_prim_func(func, options=options)
    t2 = time.perf_counter()
    times = dict(getattr(kernel, "stage_times", {}) or {})
    phases = {k: times.pop(k, 0.0) for k in ("codegen", "compile", "load")}
    row: dict[str, Any] = {
        "total_s": round(t2 - t0, 4),
        "frontend_s": round(t1 - t0, 4),
        "lowering_s": round(sum(times.values()), 4),
        "codegen_s": round(phases["codegen"], 4),
        "compile_s": round(phases["compile"], 4),
        "load_s": round(phases["load"], 4),
        "driver_other_s": round(max(0.0, (t2 - t1) - sum(times.values()) - sum(phases.values())), 4),
        "stages_s": {k: round(v, 4) for k, v in times.items()},
    }
    data = inputs()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    kernel(*data)
    torch.cuda.synchronize()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    kernel(*data)
    torch.cuda.synchronize()
    steady = time.perf_counter() - t0
    row["first_call_ms"] = round((first - steady) * 1e3, 3)
    return row


def cold_and_repeats(jitted: Any, args: tuple[Any, ...], kwargs: dict[str, Any], inputs: Callable[[], tuple[Any, ...]],
                     configs: dict[str, Any], repeats: int) -> dict[str, Any]:
    """``measure`` ``repeats`` times: the first run, with the other runs' totals."""
    runs = [measure(jitted, args, kwargs, inputs, configs) for _ in range(max(1, repeats))]
    return {**runs[0], "total_s_repeats": [r["total_s"] for r in runs[1:]]}


def _extra(p: Any) -> None:
    p.add_argument("--repeats", type=int, default=3, help="compiles per kernel (the first is reported)")
    p.add_argument("--pass-configs", default="", help="JSON object of pass configs for every kernel")


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _extra)
    configs: dict[str, Any] = json.loads(args.pass_configs) if args.pass_configs else {}
    from tilelang_x import knobs
    from tilelang_x.plugins.cuda import compile as cc

    compilers = []
    if cc.find_nvrtc() is not None:
        compilers.append("nvrtc")
    if cc.find_nvcc() is not None:
        compilers.append("nvcc")
    results: dict[str, Any] = {}
    table = kernels()
    if args.quick:
        table = table[:1]
    with knobs.scope(cache_disable=True, target_default="cuda"):
        for comp in compilers:
            with knobs.scope(compile_use_nvrtc=(comp == "nvrtc")):
                warm, err = attempt(lambda: measure(*table[-1][1:], configs))
                per: dict[str, Any] = {"process_warmup": warm if err is None else {"error": err}}
                for name, *rest in table:
                    row, err = attempt(lambda rest=rest: cold_and_repeats(*rest, configs, args.repeats))
                    per[name] = row if err is None else {"error": err}
            results[comp] = per
    emit({"bench": "compile_time", "info": device_info(), "target_total_s": 0.5, "pass_configs": configs,
          "results": results}, args.out)


if __name__ == "__main__":
    main()
