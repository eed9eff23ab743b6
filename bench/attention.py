"""FlashAttention forward (fp16, B4 H32 S4096 D128, causal and not) against torch SDPA, same run.

References: ``F.scaled_dot_product_attention`` restricted to the cuDNN backend and to the
FlashAttention-2 backend (``torch.nn.attention.sdpa_kernel``). Ours is
``tests/kernels/attention.flash_attention`` (TileLang, as a user writes it) over a few tile
configurations; the fastest correct one is reported. TFLOP/s counts 4*B*H*S*S*D (halved when
causal); ``ratio_cudnn`` / ``ratio_flash`` = reference time / our time (>= 1: we are faster), the
times from ``--rounds`` rounds that time ours and the references in turn (``*_ms_alone``: each
reference timed alone first, as the configurations are in ``configs``).

Run: ``python bench/attention.py --out $OUT/attention.json`` (``--quick``: S=1024).
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

# (block_M, block_N, num_stages, threads[, cluster])
CONFIG_KEYS = ("block_M", "block_N", "num_stages", "threads", "cluster")
CONFIGS = [(128, 128, 2, 256), (128, 64, 2, 256), (128, 64, 2, 128), (64, 64, 1, 128)]


def sdpa(q: Any, k: Any, v: Any, causal: bool, backend_name: str) -> Callable[[], Any]:
    """``F.scaled_dot_product_attention`` restricted to one SDPA backend (e.g. ``CUDNN_ATTENTION``)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, backend_name)

    def run() -> Any:
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return run


def sdpa_ms(q: Any, k: Any, v: Any, causal: bool, backend_name: str, args: Any) -> tuple[float | None, str | None]:
    run = sdpa(q, k, v, causal, backend_name)
    _, err = attempt(run)
    if err is not None:
        return None, err
    return median_ms(run, args.warmup, args.rep), None


def bench_case(b: int, h: int, s: int, d: int, causal: bool, args: Any) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    from tests.kernels import attention

    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
    flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
    row: dict[str, Any] = {"B": b, "H": h, "S": s, "D": d, "causal": causal}
    refs: dict[str, Callable[[], Any]] = {}
    for name, key in (("CUDNN_ATTENTION", "cudnn"), ("FLASH_ATTENTION", "flash")):
        ms, err = sdpa_ms(q, k, v, causal, name, args)
        row[f"{key}_ms_alone"] = None if ms is None else round(ms, 4)
        if err:
            row[f"{key}_error"] = err
        else:
            refs[key] = sdpa(q, k, v, causal, name)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    configs = chosen_configs(CONFIGS, CONFIG_KEYS, args)
    tried, best, kernel = try_configs(configs, lambda cfg: attention.flash_attention(b, h, s, d, causal, **cfg),
                                      lambda kernel: kernel(q, k, v), ref, flops, args)
    # the final figures: ours and the references timed in turn (round_robin_ms)
    ours = (lambda: kernel(q, k, v)) if best else None
    final_figures(row, refs, ours, best, tried, flops, ("cudnn", "flash"), CONFIG_KEYS, args)
    return row


def main() -> None:
    attention_main("attention", __doc__.splitlines()[0], bench_case,
                   "BMxBNxSTAGESxTHREADS[@CXxCYxCZ],... instead of the default configs (@: cluster shape)",
                   "128")


if __name__ == "__main__":
    main()
