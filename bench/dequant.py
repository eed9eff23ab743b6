"""Weight-only int4 GEMM (W4A16, fp16 activations) against cuBLAS on fp16 weights, same run.

Ours is ``tests/kernels/dequant.matmul_w4a16`` (TileLang, written as its dequantize-GEMM examples
are): ``C = A @ W^T`` with ``W[n, k] = (q - 8) * Scales[k // group_size, n]`` unpacked from
``B_packed[N, K // 2]`` (two unsigned 4-bit codes a byte, the even k in the low nibble) tile by
tile in the pipelined loop, also in the form that keeps the weights in registers as the MMA's first
operand (``registers``); for few rows also ``matmul_w4a16_split_k``, which splits the k-tiles
over more blocks and adds their fp32 parts in a second kernel of the same function. Shapes are an
8B-class layer (N, K) = (4096, 4096) (attention projections) and (14336, 4096) (MLP up / gate), at
M = 16 (decode: the time is reading the weights) and M = 4096 (prefill: tensor-core bound). A few
tile configurations are tried per shape and the fastest correct one is reported, with every
configuration's time (or error) alongside.

References, timed in turn with ours (``round_robin_ms``, L2 flushed before each call): ``cublas``:
``torch.matmul(A, W_fp16.T)`` on weights dequantized beforehand (reads 4x the weight bytes);
``torch_dequant``: dequantize in torch, then the same matmul, each call (what a user without a
kernel runs). ``ratio_cublas`` = cublas time / ours (>= 1: we are faster), ``ratio_torch_dequant``
likewise; ``*_weight_gb_s``: the weight bytes each reads (packed bytes and scales for ours, fp16
weights for cuBLAS) per second; TFLOP/s = 2*M*N*K / time.

Run: ``python bench/dequant.py --out $OUT/dequant.json`` (``--quick``: one shape per M, two configs).
"""

from __future__ import annotations

from typing import Any

from _common import attempt, checkpoint, device_info, emit, median_ms, parse_args, round_robin_ms, try_configs

# (M, N, K)
SHAPES = [(16, 4096, 4096), (16, 14336, 4096), (4096, 4096, 4096), (4096, 14336, 4096)]
CONFIG_KEYS = ("block_M", "block_N", "block_K", "num_stages", "threads", "split_k", "registers", "ws")
# M <= 64: one 16-row tile streaming the weights. One tile per block leaves few blocks (N = 4096,
# block_N = 32: 128 for 132 SMs), so the k-tiles are also split over split_k blocks each
# (matmul_w4a16_split_k: fp32 partial sums, then a second kernel adds them). With block_K <=
# group_size a tile's group index folds to one scale per row. registers = 1: the transposed tile
# W @ A^T with the dequantized weights as the MMA's register operand (wgmma with 64 weight rows and
# n = block_M; no shared-memory round trip of the weights)
SMALL_M_CONFIGS = [(16, 32, 128, 6, 128, 1, 0), (16, 32, 128, 4, 128, 4, 0), (16, 32, 128, 4, 128, 8, 0),
                   (16, 64, 128, 4, 128, 4, 0), (16, 64, 128, 4, 128, 1, 1), (16, 64, 128, 4, 128, 4, 1),
                   (16, 64, 128, 4, 128, 8, 1)]
# large M: wgmma tiles as in bench/gemm.py, in both forms; ws = 1: warp-specialized
# (``tlx.ws_compute_loops``), so that the two consumer warpgroups take turns (ping-pong): one
# unpacks its weights while the other's MMA runs
BIG_CONFIGS = [(128, 128, 64, 3, 256, 1, 0), (128, 128, 64, 4, 128, 1, 0), (128, 256, 64, 3, 256, 1, 0),
               (128, 128, 64, 3, 256, 1, 1), (256, 128, 64, 3, 256, 1, 1), (128, 128, 64, 4, 128, 1, 1),
               (256, 128, 64, 3, 256, 1, 1, 1), (256, 128, 64, 4, 256, 1, 1, 1), (128, 128, 64, 4, 256, 1, 1, 1),
               (128, 256, 64, 3, 256, 1, 0, 1)]


def configs_for(m: int, quick: bool, custom: str = "") -> list[dict[str, Any]]:
    if custom:  # "BMxBNxBKxSTAGESxTHREADS[xSPLIT_K[xREGISTERS]],..."
        configs = [dict(zip(CONFIG_KEYS, (int(x) for x in c.split("x")))) for c in custom.split(",") if c]
        return [{"split_k": 1, "registers": 0, "ws": 0, **c} for c in configs]
    cands = SMALL_M_CONFIGS if m <= 64 else BIG_CONFIGS
    return [{"ws": 0, **dict(zip(CONFIG_KEYS, c))} for c in (cands[:2] if quick else cands)]


def build(m: int, n: int, k: int, group_size: int, cfg: dict[str, Any], a: Any, packed: Any, scales: Any) -> Any:
    """A call of the kernel ``cfg`` picks (its split-K workspace allocated once)."""
    import torch

    import tilelang_x
    from tests.kernels import dequant

    tiles = {key: cfg[key] for key in CONFIG_KEYS if key not in ("split_k", "registers", "ws")}
    tiles["registers"] = bool(cfg["registers"])
    if cfg["split_k"] == 1:
        if cfg["ws"]:
            kernel = tilelang_x.compile(dequant.matmul_w4a16.get_ir(m, n, k, group_size, **tiles), out_idx=[-1],
                                        pass_configs={"tlx.ws_compute_loops": True})
        else:
            kernel = dequant.matmul_w4a16(m, n, k, group_size, **tiles)
        return lambda: kernel(a, packed, scales)
    kernel = dequant.matmul_w4a16_split_k(m, n, k, cfg["split_k"], group_size, **tiles)
    partial = torch.empty(cfg["split_k"], m, n, device="cuda", dtype=torch.float32)
    return lambda: kernel(a, packed, scales, partial)


def quantized_weights(n: int, k: int, group_size: int) -> tuple[Any, Any, Any]:
    """(packed uint8 [N, K/2], fp16 scales [K/group_size, N], the fp16 weights they stand for)."""
    import torch

    from tests.kernels.dequant import dequant_w4, pack_w4

    q = torch.randint(0, 16, (n, k), device="cuda", dtype=torch.uint8)
    packed = pack_w4(q)
    # scales as a symmetric int4 quantizer of N(0, 1/K)-sized weights would pick
    scales = (torch.rand(k // group_size, n, device="cuda") * 0.01 + 0.01).half()
    return packed, scales, dequant_w4(packed, scales).half()


def torch_dequant_matmul(a: Any, packed: Any, scales: Any, group_size: int) -> Any:
    """Dequantize in torch (fp16), then ``torch.matmul``: the kernel-less path."""
    import torch

    n = packed.shape[0]
    q = torch.stack([packed & 0xF, packed >> 4], dim=-1).view(n, -1, group_size).half()
    w = ((q - 8) * scales.T[:, :, None]).view(n, -1)
    return torch.matmul(a, w.T)


def bench_shape(m: int, n: int, k: int, args: Any) -> dict[str, Any]:
    import torch

    gs = args.group_size
    a = torch.randn(m, k, device="cuda").half()
    packed, scales, w16 = quantized_weights(n, k, gs)
    flops = 2.0 * m * n * k
    refs = {"cublas": lambda: torch.matmul(a, w16.T),
            "torch_dequant": lambda: torch_dequant_matmul(a, packed, scales, gs)}
    ref = refs["cublas"]()
    row: dict[str, Any] = {"M": m, "N": n, "K": k, "group_size": gs,
                           "cublas_ms_alone": round(median_ms(refs["cublas"], args.warmup, args.rep), 4)}
    configs = configs_for(m, args.quick, args.configs)
    tried, best, call = try_configs(configs, lambda cfg: build(m, n, k, gs, cfg, a, packed, scales),
                                    lambda run: run(), ref, flops, args)
    final = round_robin_ms({**refs, **({"ours": call} if best else {})}, args.rounds, args.warmup, args.rep)
    weight_bytes = {"cublas": n * k * 2, "torch_dequant": n * k // 2 + scales.numel() * 2}
    weight_bytes["ours"] = weight_bytes["torch_dequant"]
    for name, ms in final.items():
        row.update({f"{name}_ms": round(ms, 4), f"{name}_tflops": round(flops / ms / 1e9, 1),
                    f"{name}_weight_gb_s": round(weight_bytes[name] / ms / 1e6, 1)})
    if best is not None:
        row.update(ratio_cublas=round(final["cublas"] / final["ours"], 3),
                   ratio_torch_dequant=round(final["torch_dequant"] / final["ours"], 3),
                   best_config={key: best[key] for key in CONFIG_KEYS})
    else:
        row.update(ours_ms=None, ratio_cublas=None)
    row["configs"] = tried
    return row


def _extra(p: Any) -> None:
    p.add_argument("--shapes", default="", help="MxNxK,... instead of the default shapes")
    p.add_argument("--configs", default="",
                   help="BMxBNxBKxSTAGESxTHREADS[xSPLIT_K[xREGISTERS]],... instead of the default configs")
    p.add_argument("--group-size", type=int, default=128, help="k values sharing one scale")
    p.add_argument("--target", default="cuda", help="e.g. cuda:sm_90 for the sm_80-class path on a Hopper GPU")
    p.set_defaults(timeout=300)


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _extra)
    shapes = [SHAPES[0], SHAPES[2]] if args.quick else SHAPES
    if args.shapes:
        shapes = [tuple(int(x) for x in sh.split("x")) for sh in args.shapes.split(",") if sh]  # type: ignore[misc]
    results: list[dict[str, Any]] = []
    doc = {"bench": "dequant", "info": device_info(), "results": results}
    for m, n, k in shapes:
        row, err = attempt(lambda m=m, n=n, k=k: bench_shape(m, n, k, args))
        results.append(row if err is None else {"M": m, "N": n, "K": k, "error": err})
        checkpoint(doc, args.out)
    emit(doc, args.out)


if __name__ == "__main__":
    main()
