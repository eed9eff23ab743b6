"""Hopper path check on one H200 call: every variant of the suite GEMM and FlashAttention kernels
(warp-specialized TMA+wgmma, plain TMA pipeline, wgmma with cp.async, the sm_80 path) against
torch, then times at the benchmark shapes. Prints a short table; ``--out`` gets the JSON.

Run: ``python bench/hopper_check.py --out $OUT/hopper.json`` (``--quick``: fewer timed shapes).
"""

from __future__ import annotations

from typing import Any

from _common import attempt, checkpoint, device_info, emit, median_ms, parse_args, rel_err

VARIANTS: dict[str, tuple[str, dict[str, bool]]] = {
    "ws": ("cuda:sm_90a", {}),  # the defaults
    "persist": ("cuda:sm_90a", {"tlx.persistent": True}),
    "nooverlap": ("cuda:sm_90a", {"tlx.wgmma_overlap": False}),
    "tma": ("cuda:sm_90a", {"tl.disable_warp_specialized": True}),
    "ws_fa": ("cuda:sm_90a", {"tlx.ws_compute_loops": True}),  # FA warp-specialized too
}
#: the variants tried per kernel kind (the others change nothing there)
KIND_VARIANTS = {"gemm": ("ws", "persist", "nooverlap", "tma"), "fa": ("ws", "ws_fa")}


def _compile(builder: Any, out_idx: list[int], variant: str, *args: Any, **kw: Any) -> Any:
    from tilelang_x.compiler import compile_prim_func

    target, configs = VARIANTS[variant]
    func = builder.get_ir(*args, **kw)
    return compile_prim_func(func, target=target, out_idx=out_idx, options={"pass_configs": configs})


def gemm_case(variant: str, m: int, n: int, k: int, dtype: str, trans_b: bool, cfg: dict[str, int],
              time_it: bool, args: Any) -> dict[str, Any]:
    import torch

    from tests.kernels import gemm
    from tilelang_x.core_ir.dtypes import as_dtype

    tdt = getattr(torch, dtype)
    a = torch.randn(m, k, device="cuda").to(tdt)
    b = torch.randn(*((n, k) if trans_b else (k, n)), device="cuda").to(tdt)
    kern = _compile(gemm.matmul, [-1], variant, m, n, k, in_dtype=as_dtype(tdt), out_dtype=as_dtype(tdt),
                    trans_B=trans_b, **cfg)
    ref = a.float() @ (b.float().T if trans_b else b.float())
    out = kern(a, b)
    torch.cuda.synchronize()
    row: dict[str, Any] = {"err": float(f"{rel_err(out, ref):.3g}")}
    if time_it:
        ms = median_ms(lambda: kern(a, b), args.warmup, args.rep)
        tms = median_ms(lambda: torch.matmul(a, b.T if trans_b else b), args.warmup, args.rep)
        row.update(ms=round(ms, 4), tflops=round(2 * m * n * k / ms / 1e9, 1), ratio=round(tms / ms, 3))
    return row


def fa_case(variant: str, b: int, h: int, s: int, d: int, causal: bool, cfg: dict[str, int], time_it: bool,
            args: Any) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from tests.kernels import attention

    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
    kern = _compile(attention.flash_attention, [3], variant, b, h, s, d, causal, **cfg)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    out = kern(q, k, v)
    torch.cuda.synchronize()
    row: dict[str, Any] = {"err": float(f"{rel_err(out, ref):.3g}")}
    if time_it:
        flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
        ms = median_ms(lambda: kern(q, k, v), args.warmup, args.rep)

        def cudnn() -> Any:
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        rms = median_ms(cudnn, args.warmup, args.rep)
        row.update(ms=round(ms, 4), tflops=round(flops / ms / 1e9, 1), ratio_cudnn=round(rms / ms, 3))
    return row


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    rows: list[dict[str, Any]] = []
    doc = {"bench": "hopper_check", "info": device_info(), "results": rows}
    small = dict(block_M=64, block_N=64, block_K=32, num_stages=2, threads=128)
    checks = [
        ("gemm", (256, 256, 256, "float16", False, small)),
        ("gemm", (200, 136, 96, "float16", False, small)),
        ("gemm", (256, 128, 128, "float16", True, small)),
        ("gemm", (128, 256, 128, "bfloat16", False, small)),
        ("gemm", (512, 512, 512, "float16", False, dict(block_M=128, block_N=256, block_K=64, num_stages=3,
                                                         threads=256))),
        ("fa", (1, 2, 256, 64, False, dict(block_M=64, block_N=64, num_stages=1, threads=128))),
        ("fa", (1, 2, 256, 64, True, dict(block_M=64, block_N=64, num_stages=2, threads=128))),
        ("fa", (1, 2, 512, 128, True, dict(block_M=128, block_N=128, num_stages=2, threads=256))),
    ]
    big = dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)
    checks.append(("gemm", (2048, 2048, 1024, "float16", False, big)))  # 128 tiles: no persistent grid
    checks.append(("gemm", (4096, 2048, 512, "float16", True, big)))  # 256 tiles over 132 blocks
    timed = [
        ("gemm", (4096, 4096, 4096, "float16", False, big)),
        ("gemm", (4096, 4096, 4096, "float16", False, dict(big, num_stages=4))),
        ("gemm", (4096, 4096, 4096, "bfloat16", False, big)),
        ("fa", (4, 32, 4096, 128, False, dict(block_M=128, block_N=128, num_stages=2, threads=256))),
        ("fa", (4, 32, 4096, 128, True, dict(block_M=128, block_N=128, num_stages=2, threads=256))),
    ]
    if not args.quick:
        timed.append(("gemm", (8192, 8192, 8192, "float16", False, big)))
        timed.append(("fa", (4, 32, 4096, 64, False, dict(block_M=128, block_N=128, num_stages=2, threads=256))))
    for time_it, cases in ((False, checks), (True, timed)):
        for kind, params in cases:
            for variant in KIND_VARIANTS[kind]:
                fn = gemm_case if kind == "gemm" else fa_case
                got, err = attempt(lambda fn=fn, v=variant, p=params, t=time_it: fn(v, *p, t, args))
                row = {"kind": kind, "params": repr(params[:-1]), "cfg": params[-1], "variant": variant,
                       **(got or {}), **({"error": err} if err else {})}
                rows.append(row)
                checkpoint(doc, args.out)
    emit(doc, args.out)
    for r in rows:
        figs = " ".join(f"{k}={r[k]}" for k in ("err", "tflops", "ratio", "ratio_cudnn", "error") if k in r)
        print(f"{r['kind']:4} {r['variant']:5} {r['params']:42} {figs}"[:200])


if __name__ == "__main__":
    main()
