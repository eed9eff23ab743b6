"""A/B of compiler switches: the same kernel compiled with several ``pass_configs`` variants,
checked against torch and timed round-robin in one process (the order rotating between rounds),
so the ratios between variants (and against the vendor reference timed in the same rounds) are
free of run-to-run drift. Absolute figures run lower than bench/attention.py's: the GPU works
without pauses here and clocks down. Two identical kernels differed by up to 4 % on the H200
(2026-11-29): list one variant twice under two names to see this noise floor next to a result.

Run: ``python bench/variants.py attention --dims 128 --variants '{"plain": {"tlx.ws_compute_loops":
false}, "auto": {}}' --out $OUT/variants.json`` (``gemm`` takes ``--shapes MxNxK,...``;
``attention_bwd`` times the backward's main kernel; ``dequant`` the W4A16 GEMM of bench/dequant.py
against cuBLAS on its fp16 weights; ``gemm_persistent`` TileLang's persistent GEMM, one block per SM
walking the tiles with ``T.Persistent``).
``--back-to-back SECONDS`` adds ratios with each variant timed back to back for that long, in turns:
the regime of a busy GPU at its power limit (GEMM 4096³ on the H200, 2026-11-30: cuBLAS 5 % ahead
back to back while the L2-flushed rounds put ours level).
"""

from __future__ import annotations

import json
from typing import Any

from _common import (
    attempt,
    back_to_back_ms,
    checked_run,
    device_info,
    emit,
    in_turns,
    parse_args,
    parse_config,
    round_robin_ms,
)

Case = tuple[str, Any, Any, Any, float]  # name, build(pass_configs), run(kernel), reference(), flops


def _attention_case(d: int, causal: bool, args: Any) -> Case:
    import torch
    from attention import sdpa

    import tilelang_x
    from tests.kernels import attention

    bm, bn, st, th = (int(x) for x in args.config.split("x"))
    b, h, s = 4, 32, args.seq
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))

    def build(pc: dict[str, Any]) -> Any:
        func = attention.flash_attention.get_ir(b, h, s, d, causal, block_M=bm, block_N=bn, num_stages=st, threads=th)
        return tilelang_x.compile(func, out_idx=[3], pass_configs=pc)

    flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
    cudnn = sdpa(q, k, v, causal, "CUDNN_ATTENTION")
    return f"D{d}{'_causal' if causal else ''}", build, lambda kern: kern(q, k, v), cudnn, flops


def _attention_bwd_case(d: int, causal: bool, args: Any) -> Case:
    """FlashAttention backward's main kernel alone (dQ added into one float32 tensor, never zeroed:
    the timing is the same) against cuDNN's whole backward; checked on dK and dV."""
    import torch
    from attention_bwd import sdpa_backward

    import tilelang_x
    from tests.kernels import attention_bwd

    bm, bn, st, th = (int(x) for x in args.config.split("x"))
    b, h, s = 4, 32, args.seq
    q, k, v, do = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(4))
    o, lse = attention_bwd.flash_attention_lse(b, h, s, d, causal, block_M=128, block_N=128, num_stages=2,
                                               threads=256)(q, k, v)
    delta = attention_bwd.flash_bwd_preprocess(b, h, s, d)(o, do)
    dq = torch.zeros(q.shape, dtype=torch.float32, device="cuda")
    cudnn = sdpa_backward(q, k, v, do, causal, "CUDNN_ATTENTION")

    def build(pc: dict[str, Any]) -> Any:
        func = attention_bwd.flash_bwd.get_ir(b, h, s, d, causal, block_M=bm, block_N=bn, num_stages=st, threads=th)
        return tilelang_x.compile(func, out_idx=[7, 8], pass_configs=pc)

    def run(kern: Any) -> Any:
        dk, dv = kern(q, k, v, do, lse, delta, dq)
        return torch.cat([dk.flatten(), dv.flatten()])

    def reference() -> Any:
        grads = cudnn()
        return torch.cat([grads[1].flatten(), grads[2].flatten()])

    flops = 2.5 * 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
    return f"bwd_D{d}{'_causal' if causal else ''}", build, run, reference, flops


def _gemm_case(shape: str, args: Any) -> Case:
    import torch

    import tilelang_x
    from tests.kernels import gemm
    from tilelang_x.core_ir.dtypes import as_dtype

    bm, bn, bk, st, th, *cluster = parse_config(args.config)
    m, n, k = (int(x) for x in shape.split("x"))
    a = torch.randn(m, k, device="cuda").half()
    b = torch.randn(*((n, k) if args.trans_b else (k, n)), device="cuda").half()

    def build(pc: dict[str, Any]) -> Any:
        if args.kernel == "gemm_persistent":  # TileLang's persistent GEMM: one block per SM, T.Persistent
            blocks = torch.cuda.get_device_properties(0).multi_processor_count
            func = gemm.matmul_persistent.get_ir(m, n, k, blocks, block_M=bm, block_N=bn, block_K=bk, num_stages=st,
                                                 threads=th)
        else:
            func = gemm.matmul.get_ir(m, n, k, in_dtype=as_dtype("float16"), out_dtype=as_dtype("float16"),
                                      block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=th,
                                      cluster=cluster[0] if cluster else None, trans_B=args.trans_b)
        return tilelang_x.compile(func, out_idx=[-1], pass_configs=pc)

    def reference() -> Any:
        return torch.matmul(a, b.T if args.trans_b else b)

    return shape, build, lambda kern: kern(a, b), reference, 2.0 * m * n * k


def _dequant_case(shape: str, args: Any) -> Case:
    """W4A16 (bench/dequant.py's kernel and weights) against cuBLAS on the fp16 weights; ``--config``
    BMxBNxBKxSTAGESxTHREADS[xREGISTERS[xWS]]."""
    import torch
    from dequant import quantized_weights

    import tilelang_x
    from tests.kernels import dequant

    bm, bn, bk, st, th, *rest = (int(x) for x in args.config.split("x"))
    registers, ws = (rest + [1, 1])[:2]
    m, n, k = (int(x) for x in shape.split("x"))
    a = torch.randn(m, k, device="cuda").half()
    packed, scales, w16 = quantized_weights(n, k, 128)

    def build(pc: dict[str, Any]) -> Any:
        func = dequant.matmul_w4a16.get_ir(m, n, k, 128, block_M=bm, block_N=bn, block_K=bk, num_stages=st,
                                           threads=th, registers=bool(registers))
        return tilelang_x.compile(func, out_idx=[-1], pass_configs={"tlx.ws_compute_loops": bool(ws), **pc})

    return f"w4a16_{shape}", build, lambda kern: kern(a, packed, scales), lambda: torch.matmul(a, w16.T), \
        2.0 * m * n * k


def _measure(case: Case, variants: dict[str, dict[str, Any]], args: Any) -> dict[str, Any]:
    name, build, run, reference, flops = case
    ref = reference()
    kernels: dict[str, Any] = {}
    row: dict[str, Any] = {"case": name, "errors": {}}
    from tilelang_x import knobs

    for vname, pc in variants.items():
        with knobs.scope(target_default=args.target):
            kern, err = attempt(lambda: build(pc))  # noqa: B023 - called at once
        if err is None:
            _, err = checked_run(kern, run, ref)
        if err is None:
            kernels[vname] = kern
        else:
            row["errors"][vname] = err
    timed = {"reference": reference, **{v: (lambda kern=kern: run(kern)) for v, kern in kernels.items()}}
    ms = round_robin_ms(timed, args.rounds, args.warmup, args.rep)
    row["tflops"] = {v: round(flops / t / 1e9, 1) for v, t in ms.items()}
    row["ratio_vs_reference"] = {v: round(ms["reference"] / t, 3) for v, t in ms.items() if v != "reference"}
    if args.back_to_back > 0:
        b2b = in_turns(timed, args.rounds, lambda fn: back_to_back_ms(fn, args.back_to_back))
        row["tflops_back_to_back"] = {v: round(flops / t / 1e9, 1) for v, t in b2b.items()}
        row["ratio_back_to_back"] = {v: round(b2b["reference"] / t, 3) for v, t in b2b.items() if v != "reference"}
    return row


def main() -> None:
    def extra(p: Any) -> None:
        p.add_argument("kernel", choices=["attention", "attention_bwd", "gemm", "gemm_persistent", "dequant"])
        p.add_argument("--variants", required=True, help="JSON object: variant name -> pass_configs")
        p.add_argument("--dims", default="128")
        p.add_argument("--seq", type=int, default=4096)
        p.add_argument("--shapes", default="8192x8192x8192")
        p.add_argument("--trans-b", action="store_true", help="gemm: B stored N x K (a torch.nn.Linear weight)")
        p.add_argument("--target", default="cuda", help="e.g. cuda:sm_90 for the sm_80-class path on a Hopper GPU")
        p.add_argument("--config", default="",
                       help="attention BMxBNxSTAGESxTHREADS, gemm BMxBNxBKxSTAGESxTHREADS[@CXxCYxCZ]")
        p.add_argument("--back-to-back", type=float, default=0.0, metavar="SECONDS",
                       help="also time each variant for about SECONDS of calls back to back, in turns "
                       "(the power-limited regime: ratio_back_to_back)")

    args = parse_args(__doc__ or "", extra)
    args.config = args.config or {"attention": "128x128x2x256", "attention_bwd": "128x64x2x256",
                                  "dequant": "256x128x64x4x256x1x1"}.get(args.kernel, "128x256x64x3x256")
    variants: dict[str, dict[str, Any]] = json.loads(args.variants)
    if args.kernel in ("attention", "attention_bwd"):
        case = _attention_case if args.kernel == "attention" else _attention_bwd_case
        cases = [case(int(d), causal, args) for d in args.dims.split(",") for causal in (False, True)]
    else:
        case = _dequant_case if args.kernel == "dequant" else _gemm_case
        cases = [case(shape, args) for shape in args.shapes.split(",")]
    rows = []
    for case in cases:
        rows.append(_measure(case, variants, args))
        print(json.dumps(rows[-1]), flush=True)
    emit({"bench": "variants", "kernel": args.kernel, "info": device_info(), "variants": variants, "rows": rows},
         args.out)


if __name__ == "__main__":
    main()
