"""Decode attention (one query token, GQA and DeepSeek MLA, fp16 KV cache) against torch, same run.

Ours is ``tests/kernels/attention.gqa_decode`` (split-KV, written as TileLang's decode examples
are: two ``T.Kernel`` blocks in one function) over a few split counts, KV tile sizes and pipeline depths; the
fastest correct one is reported. The reference is ``F.scaled_dot_product_attention(...,
enable_gqa=True)`` on the same cache, restricted to each SDPA backend that takes it; the fastest is
``sdpa``. The work is reading the cache, so the figure is TB/s of K and V read (``2 * B * S * HK
* D * 2`` bytes); ``ratio`` = best SDPA time / our time (>= 1: we are faster), both from
``--rounds`` rounds timed in turn with the L2 flushed.

Paged rows (``kind: paged``): ``tests/kernels/attention.paged_gqa_decode``, the same cache in
64-token pages at random places through a block table (vLLM's layout), against SDPA on the
contiguous cache. MLA rows (``kind: mla``): ``tests/kernels/attention.mla_decode`` (TileLang's MLA example: 128 query
heads on one latent KV head, 512 + 64 dims) against SDPA and against the same attention in torch
matmuls (cuBLAS), in TB/s of the latent cache read (``B * S * 576 * 2`` bytes).

Run: ``python bench/decode.py --out $OUT/decode.json`` (``--quick``: one shape, fewer configs).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from _common import attempt, checkpoint, device_info, emit, median_ms, parse_args, round_robin_ms, try_configs

# (num_split, block_N, num_stages, block_H, threads): the plain TMA pipeline, one warpgroup on the
# 64-row head tile. The warp-specialized loop (256 threads on 128 head rows, one block per SM) ran
# 5-30 % slower on the H200 (2026-11-30, `…-session9-decode-ws.json`): twice the padded MMA rows and
# half the blocks per SM for a loop that waits on memory
CONFIG_KEYS = ("num_split", "block_N", "num_stages", "block_H", "threads")
CONFIGS = [(4, 64, 2, 64, 128), (8, 64, 2, 64, 128), (4, 64, 3, 64, 128), (2, 64, 3, 64, 128)]
# (batch, heads, kv_heads, seqlen_kv, dim): Llama-3-8B-like and 70B-like GQA
SHAPES = [(32, 32, 8, 8192, 128), (8, 64, 8, 16384, 128)]
BACKENDS = ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION")


def sdpa(q: Any, k: Any, v: Any, backend_name: str) -> Callable[[], Any]:
    """SDPA on ``q`` [B, H, 1, D] and the cache as [B, HK, S, D] views, one backend."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, backend_name)

    def run() -> Any:
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    return run


def _compare(row: dict[str, Any], refs: dict[str, Callable[[], Any]], configs: list[dict[str, Any]],
             keys: tuple[str, ...], build: Callable[[dict[str, Any]], Any], ref: Any, nbytes: float, args: Any,
             fastest_key: str) -> dict[str, Any]:
    """Our fastest correct configuration against the references ``refs``, timed in turns: ``row``
    gets every time in ms and TB/s, the fastest reference under ``fastest_key`` and the ratio."""
    tried, best, kernel = try_configs(configs, build, lambda run: run(), ref, nbytes, args)
    for entry in tried:  # try_configs counts "flops": here bytes, so its figure is TB/s
        if "tflops" in entry:
            entry["tb_s"] = entry.pop("tflops")
    final = round_robin_ms({**refs, **({"ours": kernel} if best else {})}, args.rounds, args.warmup, args.rep)
    for key, ms in final.items():
        row[f"{key.lower()}_ms"] = round(ms, 4)
        row[f"{key.lower()}_tb_s"] = round(nbytes / ms / 1e9, 2)
    fastest = min((k for k in final if k != "ours"), key=lambda k: final[k], default=None)
    if fastest is not None:
        row[fastest_key] = fastest
    if best is not None:
        row["best_config"] = {k: v for k, v in best.items() if k in keys}
        row["ratio"] = round(final[fastest] / final["ours"], 3) if fastest is not None else None
    row["configs"] = tried
    return row


def _gqa_reference(q: Any, k4: Any, v4: Any) -> Any:
    """Decode attention in fp32 torch: ``q`` [B, H, D] against the cache views [B, HK, S, D]."""
    import torch

    group = q.shape[1] // k4.shape[1]
    keys, values = (x.float().repeat_interleave(group, 1) for x in (k4, v4))
    scores = q.float()[:, :, None, :] @ keys.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return (torch.softmax(scores, -1) @ values)[:, :, 0].half()


def _sdpa_backends(q4: Any, k4: Any, v4: Any, row: dict[str, Any], args: Any) -> dict[str, Callable[[], Any]]:
    """A runner per SDPA backend that takes these tensors (timed alone into ``row``); the others'
    errors go into ``row``."""
    refs: dict[str, Callable[[], Any]] = {}
    for name in BACKENDS:
        run = sdpa(q4, k4, v4, name)
        _, err = attempt(run)
        if err is None:
            refs[name] = run
            row[f"{name.lower()}_ms_alone"] = round(median_ms(run, args.warmup, args.rep), 4)
        else:
            row[f"{name.lower()}_error"] = err
    return refs


def bench_case(b: int, h: int, hk: int, s: int, d: int, args: Any) -> dict[str, Any]:
    import torch

    from tests.kernels import attention

    q = torch.randn(b, h, d, device="cuda", dtype=torch.float16)
    k, v = (torch.randn(b, s, hk, d, device="cuda", dtype=torch.float16) for _ in range(2))
    q4, k4, v4 = q[:, :, None, :], k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)
    nbytes = 2.0 * b * s * hk * d * 2
    row: dict[str, Any] = {"B": b, "H": h, "HK": hk, "S": s, "D": d}
    refs = _sdpa_backends(q4, k4, v4, row, args)
    ref = _gqa_reference(q, k4, v4)
    configs = [dict(zip(CONFIG_KEYS, c)) for c in (CONFIGS[:2] if args.quick else CONFIGS)]

    def build(cfg: dict[str, Any]) -> Any:
        kernel = attention.gqa_decode(b, h, hk, s, d, **cfg)
        lse = torch.empty(b, h, cfg["num_split"], device="cuda", dtype=torch.float32)
        partial = torch.empty(b, h, cfg["num_split"], d, device="cuda", dtype=torch.float32)
        return lambda: kernel(q, k, v, lse, partial)

    return _compare(row, refs, configs, CONFIG_KEYS, build, ref, nbytes, args, "sdpa")


# DeepSeek MLA decode: (batch, query heads, seqlen_kv); one latent KV head of 512 + 64 rotary dims
MLA_SHAPES = [(64, 128, 8192), (128, 128, 4096)]
MLA_KEYS = ("num_split", "block_N", "num_stages")
# (num_split, block_N, num_stages); on the H200 (2026-11-30) 64-key tiles in two stages lead: B64
# S8192 0.310 / 0.323 / 0.336 ms with 1 / 2 / 3 splits (128 blocks of 64 heads fill one wave)
MLA_CONFIGS = [(1, 64, 2), (2, 64, 2), (4, 64, 2), (2, 32, 2), (4, 64, 1)]


def bench_mla_case(b: int, h: int, s: int, args: Any) -> dict[str, Any]:
    """``attention.mla_decode`` against SDPA (each backend that takes a 576-wide key and a 512-wide
    value) and against the same attention as torch matmuls and softmax (cuBLAS)."""
    import torch

    from tests.kernels import attention

    d, pe = 512, 64
    q, q_pe = torch.randn(b, h, d, device="cuda", dtype=torch.float16), torch.randn(b, h, pe, device="cuda",
                                                                                       dtype=torch.float16)
    kv, k_pe = torch.randn(b, s, 1, d, device="cuda", dtype=torch.float16), torch.randn(b, s, 1, pe, device="cuda",
                                                                                           dtype=torch.float16)
    nbytes = 1.0 * b * s * (d + pe) * 2
    row: dict[str, Any] = {"kind": "mla", "B": b, "H": h, "S": s, "D": d + pe}
    q4 = torch.cat([q, q_pe], -1)[:, :, None, :]
    k4 = torch.cat([kv, k_pe], -1).permute(0, 2, 1, 3)
    v4 = kv.permute(0, 2, 1, 3)
    refs = _sdpa_backends(q4, k4, v4, row, args)
    scale = 1.0 / math.sqrt(d + pe)
    keys_t, values = k4[:, 0].transpose(-1, -2), v4[:, 0]
    refs["torch_matmul"] = lambda: torch.softmax((q4[:, :, 0] @ keys_t) * scale, -1) @ values
    ref = (torch.softmax((q4[:, :, 0].float() @ keys_t.float()) * scale, -1) @ values.float()).half()
    configs = [dict(zip(MLA_KEYS, c)) for c in (MLA_CONFIGS[:2] if args.quick else MLA_CONFIGS)]

    def build(cfg: dict[str, Any]) -> Any:
        kernel = attention.mla_decode(b, h, s, **cfg)
        lse = torch.empty(b, h, cfg["num_split"], device="cuda", dtype=torch.float32)
        partial = torch.empty(b, h, cfg["num_split"], d, device="cuda", dtype=torch.float32)
        return lambda: kernel(q, q_pe, kv, k_pe, lse, partial)

    return _compare(row, refs, configs, MLA_KEYS, build, ref, nbytes, args, "reference")


PAGE = 64
PAGED_KEYS = ("num_split", "num_stages")
PAGED_CONFIGS = [(4, 2), (8, 2), (4, 3)]


def bench_paged_case(b: int, h: int, hk: int, s: int, d: int, args: Any) -> dict[str, Any]:
    """``attention.paged_gqa_decode``: the same cache as ``bench_case`` in 64-token pages at random
    places (a block table); references: SDPA on the contiguous cache (no paging to do)."""
    import torch

    from tests.kernels import attention

    pages = s // PAGE
    q = torch.randn(b, h, d, device="cuda", dtype=torch.float16)
    k_cache, v_cache = (torch.randn(b * pages, PAGE, hk, d, device="cuda", dtype=torch.float16) for _ in range(2))
    table = torch.randperm(b * pages, device="cuda").view(b, pages).int()
    k, v = (c[table.long()].reshape(b, s, hk, d) for c in (k_cache, v_cache))
    q4, k4, v4 = q[:, :, None, :], k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)
    nbytes = 2.0 * b * s * hk * d * 2
    row: dict[str, Any] = {"kind": "paged", "B": b, "H": h, "HK": hk, "S": s, "D": d, "page": PAGE}
    refs = _sdpa_backends(q4, k4, v4, row, args)
    ref = _gqa_reference(q, k4, v4)
    configs = [dict(zip(PAGED_KEYS, c)) for c in (PAGED_CONFIGS[:1] if args.quick else PAGED_CONFIGS)]

    def build(cfg: dict[str, Any]) -> Any:
        kernel = attention.paged_gqa_decode(b, h, hk, pages, PAGE, d, **cfg)
        lse = torch.empty(b, h, cfg["num_split"], device="cuda", dtype=torch.float32)
        partial = torch.empty(b, h, cfg["num_split"], d, device="cuda", dtype=torch.float32)
        return lambda: kernel(q, k_cache, v_cache, table, lse, partial)

    return _compare(row, refs, configs, PAGED_KEYS, build, ref, nbytes, args, "sdpa")


def _extra(p: Any) -> None:
    p.add_argument("--kinds", default="gqa,paged,mla", help="which decode attentions: gqa, paged, mla")
    p.add_argument("--target", default="cuda", help="e.g. cuda:sm_90 for the sm_80-class path on a Hopper GPU")


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _extra)
    results: list[dict[str, Any]] = []
    doc = {"bench": "decode", "info": device_info(), "results": results}
    kinds = args.kinds.split(",")
    for shape in (SHAPES[:1] if args.quick else SHAPES) if "gqa" in kinds else ():
        row, err = attempt(lambda shape=shape: bench_case(*shape, args))
        results.append(row if err is None else {"shape": list(shape), "error": err})
        checkpoint(doc, args.out)
    for shape in (SHAPES[:1] if args.quick else SHAPES) if "paged" in kinds else ():
        row, err = attempt(lambda shape=shape: bench_paged_case(*shape, args))
        results.append(row if err is None else {"kind": "paged", "shape": list(shape), "error": err})
        checkpoint(doc, args.out)
    for shape in (MLA_SHAPES[:1] if args.quick else MLA_SHAPES) if "mla" in kinds else ():
        row, err = attempt(lambda shape=shape: bench_mla_case(*shape, args))
        results.append(row if err is None else {"kind": "mla", "shape": list(shape), "error": err})
        checkpoint(doc, args.out)
    emit(doc, args.out)


if __name__ == "__main__":
    main()
