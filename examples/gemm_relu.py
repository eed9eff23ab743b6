"""The quick-start demo (``./scripts/demo``): a GEMM + ReLU kernel in the TileLang language.

It runs on the GPU when tilelang-x finds one (``target="auto"``), else in the interpreter, and
prints the largest difference from ``torch.relu(a @ b)``. Exits 1 if that is too large.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from typing import Any

import torch

import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit
def matmul_relu(A, B, block_M: int = 64, block_N: int = 64, block_K: int = 32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((K, N), T.float16)
    C = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), T.float16)
        B_s = T.alloc_shared((block_K, block_N), T.float16)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f)
        for i, j in T.Parallel(block_M, block_N):
            C_f[i, j] = T.max(C_f[i, j], 0)
        T.copy(C_f, C[by * block_M, bx * block_N])
    return C


def run(size: int | None = None, target: str = "auto") -> dict[str, Any]:
    """Compile and run the demo; returns the target, the size, the seconds the first call took
    (compile + run), the max error against torch and the error fp16 rounding allows."""
    from tilelang_x import registry
    from tilelang_x.kernel import device_type_of

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback note: we print the target ourselves
        resolved = registry.resolve_target(target)
    device = device_type_of(resolved)
    if size is None:
        size = 1024 if device != "cpu" else 256
    torch.manual_seed(0)
    a = torch.randn(size, size, dtype=torch.float16, device=device)
    b = torch.randn(size, size, dtype=torch.float16, device=device)
    with tilelang.knobs.scope(target_default=str(resolved)):
        start = time.perf_counter()
        c = matmul_relu(a, b)
        if device == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    ref = torch.relu(a.float() @ b.float())
    error = (c.float() - ref).abs().max().item()
    allowed = 1e-2 + 2e-3 * ref.abs().max().item()
    return {"target": str(resolved), "size": size, "seconds": seconds, "error": error, "allowed": allowed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=None, help="M = N = K (default 1024 on a GPU, 256 on the CPU)")
    parser.add_argument("--target", default="auto", help="target (default auto)")
    args = parser.parse_args(argv)
    r = run(args.size, args.target)
    where = "the interpreter (no GPU found)" if r["target"] == "interp" else r["target"]
    n = r["size"]
    print(f"matmul_relu {n}x{n}x{n} fp16 on {where}: first call (compile + run) {r['seconds']:.2f} s")
    print(f"max abs error vs torch: {r['error']:.4g} (allowed {r['allowed']:.3g})")
    if not r["error"] <= r["allowed"]:
        print("FAILED: the error is larger than fp16 rounding explains")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
