"""2:4 structured-sparse GEMM C = A @ B (A sparse along K, fp16 / bf16, fp32 accumulation) against
torch.matmul on the dense A and, where this torch has them, torch's own 2:4 kernels, same run.

Our kernel is ``tests/kernels/gemm_sp.matmul_sp`` (TileLang's ``examples/gemm_sp``, as a user writes
it) on ``tilelang_x.utils.sparse.compress``'s (A_sparse, E) with the metadata dtype TileLang's
example picks for the device (uint8 on sm_90, int16 on sm_80); a few tile configurations are tried
and the fastest correct one is reported, every configuration's time (or error) alongside; on sm_90
each configuration runs twice, with ``wgmma_sp`` (the ``tlx.wgmma_sp`` lowering, the default) and
without (``mma.sp``); a wrong result is recorded as that configuration's error. The
references: ``torch`` (torch.matmul on the dense A: cuBLAS), ``cusparselt``
(``torch._cslt_sparse_mm`` on ``torch._cslt_compress(A)``) and ``semi_structured``
(``torch.sparse.to_sparse_semi_structured(A) @ B``, CUTLASS or cuSPARSELt); one torch cannot run is
recorded with its error. ``ratio`` = torch.matmul / ours (>= 1: faster than the dense product, the
ceiling is 2), ``ratio_<ref>`` the same against each sparse reference; all from ``--rounds`` rounds
timing ours and the references in turn, the L2 flushed before each call.

Run: ``python bench/gemm_sp.py --out $OUT/gemm_sp.json`` (``--quick``: 4096^3 fp16, two configs;
``--shapes MxNxK,...``, ``--configs BMxBNxBKxSTAGESxTHREADS,...``, ``--dtypes``, ``--target``).
"""

from __future__ import annotations

from typing import Any

from _common import (
    attempt,
    parse_args,
    parse_config,
    parse_shapes,
    record_ours,
    round_robin_ms,
    run_shapes,
    try_configs,
)

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 28672, 4096)]
# (block_M, block_N, block_K, num_stages, threads); TileLang's example configurations come last
# (all within the 227 KB of shared memory a block may take, C's shared tile included; 64x128x256
# rows of E are 32 bytes, which the sm_90a TMA pipeline takes)
CONFIGS: list[tuple[int, ...]] = [(128, 256, 64, 3, 256), (128, 128, 128, 3, 256), (128, 128, 64, 4, 256),
                                  (64, 128, 256, 2, 256), (256, 128, 64, 2, 128), (64, 64, 128, 2, 128)]
CONFIG_KEYS = ("block_M", "block_N", "block_K", "num_stages", "threads")


def _extra(p: Any) -> None:
    p.add_argument("--shapes", default="", help="MxNxK,... instead of the default shapes")
    p.add_argument("--configs", default="", help="BMxBNxBKxSTAGESxTHREADS,... instead of the default configs")
    p.add_argument("--dtypes", default="", help="float16,bfloat16 (default both; --quick: float16)")
    p.add_argument("--target", default="cuda", help="e.g. cuda:sm_90 for the sm_80-class path on a Hopper GPU")


def _sparse_references(a: Any, b: Any) -> dict[str, Any]:
    """torch's 2:4 products of ``a @ b`` that this build can run (name -> callable or error text)."""
    import torch

    def cusparselt() -> Any:
        compressed = torch._cslt_compress(a)
        return lambda: torch._cslt_sparse_mm(compressed, b)

    def semi_structured() -> Any:
        a_ss = torch.sparse.to_sparse_semi_structured(a)
        return lambda: torch.mm(a_ss, b)

    out: dict[str, Any] = {}
    for name, make in (("cusparselt", cusparselt), ("semi_structured", semi_structured)):
        fn, err = attempt(make)
        if err is None:
            _, err = attempt(fn)
        out[name] = fn if err is None else err
    return out


def bench_shape(m: int, n: int, k: int, dtype_name: str, args: Any) -> dict[str, Any]:
    import torch

    import tilelang_x
    from tests.kernels import gemm_sp
    from tilelang_x.utils.sparse import compress, randn_semi_sparse

    tdt = getattr(torch, dtype_name)
    major, minor = torch.cuda.get_device_capability()
    arch = "9.0" if major >= 9 else "8.0"
    a = randn_semi_sparse(m, k, tdt, "cuda")
    b = torch.randn(k, n, device="cuda").to(tdt)
    a_sparse, e = compress(a, arch=arch)
    flops = 2.0 * m * n * k  # of the dense product, as torch.matmul's figure

    def dense() -> Any:
        return torch.matmul(a, b)

    ref = dense()
    row: dict[str, Any] = {"dtype": dtype_name, "M": m, "N": n, "K": k, "meta_dtype": str(e.dtype), "arch": arch}
    refs = {"torch": dense}
    for name, fn in _sparse_references(a, b).items():
        if callable(fn):
            refs[name] = fn
        else:
            row[f"{name}_error"] = fn
    custom = [parse_config(c) for c in args.configs.split(",") if c]
    tiles = custom or (CONFIGS[:2] if args.quick else CONFIGS)
    # on sm_90 each tile config also with the opt-in wgmma.sp lowering (a wrong result is recorded
    # as the configuration's error and never reported as ours)
    configs = [{**dict(zip(CONFIG_KEYS, c)), "wgmma_sp": w} for c in tiles for w in ((False, True) if major >= 9
                                                                                    else (False,))]

    def build(cfg: dict[str, Any]) -> Any:
        tile = {key: cfg[key] for key in CONFIG_KEYS}
        func = gemm_sp.matmul_sp.get_ir(m, n, k, in_dtype=dtype_name, out_dtype=dtype_name, arch=arch, **tile)
        return tilelang_x.compile(func, out_idx=[-1], pass_configs={"tlx.wgmma_sp": cfg["wgmma_sp"]})

    tried, best, kernel = try_configs(configs, build, lambda kernel: kernel(a_sparse, e, b), ref, flops, args)
    fns = {**refs, **({"ours": lambda: kernel(a_sparse, e, b)} if best else {})}
    final = round_robin_ms(fns, args.rounds, args.warmup, args.rep)
    for name in refs:
        row[f"{name}_ms"] = round(final[name], 4)
        row[f"{name}_tflops"] = round(flops / final[name] / 1e9, 1)
    ours = record_ours(row, final, flops, best, (*CONFIG_KEYS, "wgmma_sp"))
    if ours is not None:
        row.update({f"ratio_{name}": round(final[name] / ours, 3) for name in refs if name != "torch"})
    row["configs"] = tried
    return row


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _extra)
    shapes = parse_shapes(args.shapes, SHAPES[:1] if args.quick else SHAPES)
    dtypes = args.dtypes.split(",") if args.dtypes else ["float16"] if args.quick else ["float16", "bfloat16"]
    run_shapes("gemm_sp", dtypes, shapes, lambda m, n, k, d: bench_shape(m, n, k, d, args), args.out)


if __name__ == "__main__":
    main()
