"""GEMM C = A @ B (fp16 and bf16, fp32 accumulation) against torch.matmul (cuBLAS), same run.

Shapes (M, N, K): 4096^3, 8192^3, 16 x 8192 x 8192 (decode, memory-bound), 8192 x 28672 x 4096.
Our kernel is ``tests/kernels/gemm.matmul`` (TileLang, as a user writes it); a few tile
configurations are tried per shape and the fastest correct one is reported, with every
configuration's time (or error) alongside; a configuration may launch thread-block clusters
(``cluster``, sm_90a: TMA multicast of the tile the cluster's blocks share). Times are medians of
CUDA-event timings with the L2 flushed before each call; TFLOP/s = 2*M*N*K / time; ``ratio`` = ours
/ torch (>= 1 is faster), both from ``--rounds`` rounds that time ours and torch in turn
(``torch_ms_alone``: torch timed alone first, as the configurations are in ``configs``).

Run: ``python bench/gemm.py --out $OUT/gemm.json`` (``--quick``: 4096^3 fp16 only; ``--trans-b``: B
stored N x K, as a ``torch.nn.Linear`` weight). ``--dtypes float8_e4m3fn``: fp16 output, against
``torch._scaled_mm`` (unit scales, fast accumulation; cuBLASLt has no e5m2 x e5m2), which reads B
stored N x K only: without ``--trans-b`` (ours reads B stored K x N) it gets an untimed N x K copy.
``--dtypes float32``: our default TF32 precision against cuBLAS's TF32 GEMM (``torch.matmul`` with
``torch.backends.cuda.matmul.allow_tf32``); B stored N x K with ``--trans-b``, else K x N (on sm_90a
both wgmma; K x N as C^T = B^T A^T, since wgmma reads TF32 operands K-major only). ``--dtypes
int8``: int32 output, against ``torch._int_mm`` (cuBLASLt); B stored N x K with ``--trans-b``.
"""

from __future__ import annotations

from typing import Any

from _common import (
    median_ms,
    parse_args,
    parse_config,
    parse_shapes,
    record_ours,
    round_robin_ms,
    run_shapes,
    try_configs,
)

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16, 8192, 8192), (8192, 28672, 4096)]

# (block_M, block_N, block_K, num_stages, threads[, cluster])
BIG_CONFIGS: list[tuple[Any, ...]] = [(128, 256, 64, 3, 256), (128, 128, 64, 4, 256), (128, 256, 64, 4, 256),
                                      (128, 128, 32, 3, 128)]
# the two best Hopper tiles in clusters of two blocks along N (sharing A) and along M (sharing B);
# other targets ignore the cluster; a clustered gemm runs persistent, walking cluster tiles in the
# rasterized order, which keeps its multicast
BIG_CONFIGS += [(*c, cl) for c in BIG_CONFIGS[:2] for cl in ((2, 1, 1), (1, 2, 1))]
# cuBLAS's own choice at 4096³ (nvjet_sm90_hsh_256x128_64x4_1x2, in its transposed view): 4 stages,
# the 256-wide operand multicast to a pair of blocks
BIG_CONFIGS.append((128, 256, 64, 4, 256, (1, 2, 1)))
# M <= 64 (decode, memory-bound on B): a 16-row tile (mma.sync on a TMA pipeline: no 48 rows of
# padding in shared memory, so BK=256 and 4 stages fit) streams B fastest; measured on the H200
# (2026-11-29, M=16, N=K=8192): 16x64x256x4 49.8 TFLOP/s, 64x64x128x6 41.9, cuBLAS 45-50.
# BN=64 gives N/64 = 128 CTAs for N=8192 (one per SM of 132; BN=128 leaves half the SMs idle).
# float8 and int8: 128 one-byte columns fill a 128-byte swizzle row, as 64 two-byte ones do
FP8_CONFIGS: list[tuple[Any, ...]] = [(128, 256, 128, 3, 256), (128, 256, 128, 4, 256), (128, 128, 128, 4, 256)]
# float32 (TF32): 32 four-byte columns fill a 128-byte swizzle row
FP32_CONFIGS: list[tuple[Any, ...]] = [(128, 256, 32, 3, 256), (128, 256, 32, 4, 256), (128, 128, 32, 4, 256),
                                       (128, 128, 32, 3, 128)]
SMALL_M_CONFIGS = [(16, 64, 256, 4, 128), (16, 32, 256, 4, 128), (64, 64, 128, 6, 128), (64, 64, 128, 4, 128),
                   (64, 128, 64, 4, 128)]


CONFIG_KEYS = ("block_M", "block_N", "block_K", "num_stages", "threads", "cluster")


def _config_dict(cfg: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(CONFIG_KEYS, cfg))


def configs_for(m: int, quick: bool, custom: str = "", fp8: bool = False, fp32: bool = False) -> list[tuple[Any, ...]]:
    if custom:  # "BMxBNxBKxSTAGESxTHREADS[@CXxCYxCZ],..."
        return [parse_config(c) for c in custom.split(",") if c]
    cands = FP8_CONFIGS if fp8 else FP32_CONFIGS if fp32 else SMALL_M_CONFIGS if m <= 64 else BIG_CONFIGS
    return cands[:2] if quick else cands


def _extra(p: Any) -> None:
    p.add_argument("--shapes", default="", help="MxNxK,... instead of the default shapes")
    p.add_argument("--configs", default="",
                   help="BMxBNxBKxSTAGESxTHREADS[@CXxCYxCZ],... instead of the default configs (@: cluster shape)")
    p.add_argument("--target", default="cuda", help="e.g. cuda:sm_90 for the sm_80-class path on a Hopper GPU")
    p.add_argument("--dtypes", default="", help="float16,bfloat16,... instead of the default dtypes")
    p.add_argument("--pass-configs", default="",
                   help='JSON pass_configs for our kernel, e.g. \'{"tlx.auto_rasterize": false}\'')
    p.add_argument("--relu", action="store_true",
                   help="fuse a ReLU epilogue into our kernel; the reference is torch.relu(torch.matmul(a, b))")
    p.add_argument("--trans-b", action="store_true",
                   help="B stored N x K (a torch.nn.Linear weight); the reference is torch.matmul(a, b.T)")


def _build(matmul: Any, m: int, n: int, k: int, args: Any, kw: dict[str, Any]) -> Any:
    """The user's kernel (arguments ``kw``) as the jit builds it, or, with ``--pass-configs``,
    compiled with those."""
    if not args.pass_configs:
        return matmul(m, n, k, **kw)
    import json

    import tilelang_x

    return tilelang_x.compile(matmul.get_ir(m, n, k, **kw), out_idx=[-1], pass_configs=json.loads(args.pass_configs))


def bench_shape(m: int, n: int, k: int, dtype_name: str, args: Any) -> dict[str, Any]:
    import torch

    from tests.kernels import gemm
    from tilelang_x.core_ir.dtypes import as_dtype

    tdt = getattr(torch, dtype_name)
    int8 = tdt == torch.int8
    fp8 = tdt.itemsize == 1 and not int8
    fp32 = tdt == torch.float32
    torch.backends.cuda.matmul.allow_tf32 = fp32  # cuBLAS's TF32 GEMM against ours
    trans_b = args.trans_b
    if int8:
        a = torch.randint(-128, 128, (m, k), device="cuda", dtype=tdt)
        b = torch.randint(-128, 128, (n, k) if trans_b else (k, n), device="cuda", dtype=tdt)
    else:
        a = torch.randn(m, k, device="cuda").to(tdt)
        b = torch.randn(n, k, device="cuda").to(tdt) if trans_b else torch.randn(k, n, device="cuda").to(tdt)
    flops = 2.0 * m * n * k
    one = torch.ones((), device="cuda")
    # cuBLASLt's float8 GEMM reads B only stored N x K: with ours reading B stored K x N, it gets a
    # copy stored N x K, made once and not timed
    b_nk = b if trans_b else b.T.contiguous()

    def product() -> Any:
        if fp8:  # cuBLASLt; fast accumulation is the plain fp32 wgmma accumulation our kernel does
            return torch._scaled_mm(a, b_nk.T, scale_a=one, scale_b=one, out_dtype=torch.float16, use_fast_accum=True)
        if int8:
            return torch._int_mm(a, b.T if trans_b else b)
        return torch.matmul(a, b.T if trans_b else b)

    reference = (lambda: torch.relu(product())) if args.relu else product
    ref = reference()
    torch_alone = median_ms(reference, args.warmup, args.rep)
    row: dict[str, Any] = {"dtype": dtype_name, "M": m, "N": n, "K": k, "relu_epilogue": args.relu,
                           "trans_b": trans_b, "pass_configs": args.pass_configs or None,
                           "torch_ms_alone": round(torch_alone, 4)}
    configs = [_config_dict(c) for c in configs_for(m, args.quick, args.configs, fp8 or int8, fp32)]
    kw = dict(in_dtype=as_dtype(tdt), out_dtype=as_dtype(ref.dtype), relu=args.relu, trans_B=trans_b)
    if int8:
        kw["accum_dtype"] = as_dtype(torch.int32)
    tried, best, kernel = try_configs(configs, lambda cfg: _build(gemm.matmul, m, n, k, args, {**kw, **cfg}),
                                      lambda kernel: kernel(a, b), ref, flops, args)
    # the final figures: ours and torch timed in turn (round_robin_ms)
    final = round_robin_ms({"torch": reference, **({"ours": lambda: kernel(a, b)} if best else {})}, args.rounds,
                           args.warmup, args.rep)
    row.update(torch_ms=round(final["torch"], 4), torch_tflops=round(flops / final["torch"] / 1e9, 1))
    ours = record_ours(row, final, flops, best, CONFIG_KEYS)
    if ours is not None:
        bytes_moved = (m * k + k * n) * a.element_size() + m * n * ref.element_size()
        row["ours_hbm_tb_s"] = round(bytes_moved / ours / 1e9, 2)
    row["configs"] = tried
    return row


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _extra)
    shapes = parse_shapes(args.shapes, SHAPES[:1] if args.quick else SHAPES)
    dtypes = ["float16"] if args.quick else ["float16", "bfloat16"]
    if args.dtypes:
        dtypes = args.dtypes.split(",")
    run_shapes("gemm", dtypes, shapes, lambda m, n, k, d: bench_shape(m, n, k, d, args), args.out)


if __name__ == "__main__":
    main()
