"""CPU-side speed of the frontend and the interpreter; prints JSON.

- ``fa_ir_ms``: frontend + IR construction of the FlashAttention forward kernel (median of fresh
  traces; the source parse is cached per function, as it is for every call after the first).
- ``fa_ir_first_ms``: the very first trace, including reading and rewriting the source.
- ``interp_gemm_256_s``: the 256x256x256 fp16 GEMM (128x128x32 tiles, 3 stages) in the interpreter,
  median of a few runs after one warm-up (compilation excluded).

Run: ``python bench/frontend_speed.py [--out result.json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _fa_ir_times(repeats: int) -> tuple[float, float]:
    from tests.kernels.attention import flash_attention

    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        # A different seq_len per trace defeats every cache above the parsed source.
        flash_attention.get_ir(4, 32, 4096 + 64 * i, 128, True, block_M=128, block_N=128)
        times.append((time.perf_counter() - start) * 1e3)
    return times[0], statistics.median(times[1:])


def _interp_gemm_seconds(repeats: int) -> float:
    import torch

    from tests.kernels.gemm import matmul
    from tilelang_x import knobs

    with knobs.scope(target_default="interp"):
        kernel = matmul(256, 256, 256)
        a = torch.randn(256, 256, dtype=torch.float16)
        b = torch.randn(256, 256, dtype=torch.float16)
        kernel(a, b)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            kernel(a, b)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the JSON here")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    first, fa = _fa_ir_times(args.repeats)
    result = {
        "fa_ir_first_ms": round(first, 2),
        "fa_ir_ms": round(fa, 2),
        "fa_ir_target_ms": 50,
        "interp_gemm_256_s": round(_interp_gemm_seconds(args.repeats), 4),
        "interp_gemm_target_s": 1.0,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
