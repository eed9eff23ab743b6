"""FlashAttention backward (fp16, B4 H32 S4096, D64/D128, causal and not) against SDPA's backward, same run.

Times the backward alone: ours is ``tests/kernels/attention_bwd.attention_backward`` (TileLang's
example_mha_bwd_bhsd as a user writes it: the Delta preprocess, the main kernel with dQ added
atomically in float32, the fp16 postprocess, and zeroing dQ), given O and the log-sum-exp from our
forward ``flash_attention_lse``; the references are ``torch.autograd.grad`` through
``F.scaled_dot_product_attention`` restricted to the cuDNN backend and to the FlashAttention-2
backend (``torch.nn.attention.sdpa_kernel``), the forward's graph kept. Our gradients are checked
against the FlashAttention-2 backend's (relative error of dQ, dK, dV together < 1e-2). TFLOP/s
counts 2.5 times the forward's 4*B*H*S*S*D (halved when causal), as FlashAttention reports;
``ratio_cudnn`` / ``ratio_flash`` = reference time / our time (>= 1: we are faster), from
``--rounds`` rounds that time ours and the references in turn (``*_ms_alone``: each reference
timed alone first, as the configurations are in ``configs``).

Run: ``python bench/attention_bwd.py --out $OUT/attention_bwd.json`` (``--quick``: S=1024).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from _common import (
    attempt,
    attention_main,
    chosen_configs,
    final_figures,
    median_ms,
    try_configs,
)

# the backward's (block_M, block_N, num_stages, threads)
CONFIG_KEYS = ("block_M", "block_N", "num_stages", "threads")
CONFIGS = [(64, 64, 2, 128), (128, 64, 2, 256), (64, 32, 2, 128), (128, 128, 2, 256)]
# the forward that gives O and lse: tried in order, the first that runs is kept
FORWARD_CONFIGS = [dict(block_M=128, block_N=128, num_stages=2, threads=256), {}]


def sdpa_backward(q: Any, k: Any, v: Any, do: Any, causal: bool, backend_name: str) -> Callable[[], Any]:
    """dQ, dK, dV by ``torch.autograd.grad`` through SDPA restricted to one backend (its forward
    run once here, its graph kept for every call)."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    leaves = [x.detach().requires_grad_() for x in (q, k, v)]
    with sdpa_kernel(getattr(SDPBackend, backend_name)):
        out = F.scaled_dot_product_attention(*leaves, is_causal=causal)

    def run() -> Any:
        with sdpa_kernel(getattr(SDPBackend, backend_name)):
            return torch.autograd.grad(out, leaves, do, retain_graph=True)

    return run


def _flat(grads: Any) -> Any:
    import torch

    return torch.cat([g.flatten() for g in grads])


def bench_case(b: int, h: int, s: int, d: int, causal: bool, args: Any) -> dict[str, Any]:
    import torch

    from tests.kernels import attention_bwd
    from tilelang_x import knobs

    q, k, v, do = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(4))
    flops = 2.5 * 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
    row: dict[str, Any] = {"B": b, "H": h, "S": s, "D": d, "causal": causal, "timed": "backward"}
    refs: dict[str, Callable[[], Any]] = {}
    ref = None
    for name, key in (("FLASH_ATTENTION", "flash"), ("CUDNN_ATTENTION", "cudnn")):
        run, err = attempt(lambda name=name: sdpa_backward(q, k, v, do, causal, name))
        grads, err = (None, err) if err else attempt(run)
        if err:
            row[f"{key}_error"] = err
            continue
        refs[key] = run
        row[f"{key}_ms_alone"] = round(median_ms(run, args.warmup, args.rep), 4)
        ref = _flat(grads) if ref is None else ref
    if ref is None:
        raise RuntimeError("no SDPA backend gave gradients to check ours against")
    forward, fwd = None, attention_bwd.flash_attention_lse
    for cfg in FORWARD_CONFIGS:
        with knobs.scope(target_default=args.target):
            forward, err = attempt(lambda cfg=cfg: fwd(b, h, s, d, causal, **cfg)(q, k, v))
        if err is None:
            row["forward_config"] = cfg
            break
        row.setdefault("forward_errors", []).append(err)
    if forward is None:
        raise RuntimeError("our forward failed: " + "; ".join(row["forward_errors"]))
    o, lse = forward
    configs = chosen_configs(CONFIGS, CONFIG_KEYS, args)

    def build(cfg: dict[str, Any]) -> Callable[[], Any]:
        def run() -> Any:  # the three kernels are compiled on the first call, for --target
            with knobs.scope(target_default=args.target):
                return attention_bwd.attention_backward(q, k, v, o, lse, do, causal, **cfg)

        run()
        return run

    tried, best, ours = try_configs(configs, build, lambda run: run(), ref, flops, args, compared=_flat)
    final_figures(row, refs, ours, best, tried, flops, ("cudnn", "flash"), CONFIG_KEYS, args)
    return row


def main() -> None:
    attention_main("attention_bwd", __doc__.splitlines()[0], bench_case,
                   "BMxBNxSTAGESxTHREADS,... of the backward instead of the defaults",
                   "64,128")


if __name__ == "__main__":
    main()
