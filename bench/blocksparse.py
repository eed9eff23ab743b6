"""Block-sparse attention (fp16, 128 x 128 blocks kept by a boolean block mask) against torch
FlexAttention on the same block mask, same run.

Ours is ``tests/kernels/attention.blocksparse_attention``, written as TileLang's block-sparse
example is (the whole ``T.Pipelined`` body under ``if block_mask[k]``): on sm_90a that body is
warp-specialized, producer and consumers counting the blocks they take (plugins/cuda/hopper/
guard.py) when the block owns its SM (D128), else (D64) the block lists the kept blocks first and
runs the cp.async pipeline over that list (pipelining.py ``compact_guarded``, also the sm_80
path's form). ``ours_warp_specialized`` / ``ours_listed`` force either form
(``tlx.ws_compute_loops``); session 10's first run measured the synchronous copies every guarded
body had before at 1.4× the warp-specialized time. References: ``flex`` is
``torch.compile(flex_attention)`` with a ``BlockMask`` of the same blocks (Triton), ``dense`` is
SDPA (cuDNN) on every block, for scale. TFLOP/s count the kept blocks only (``4 * 128 * 128 * D``
each); ``ratio`` = flex time / our time (>= 1: we are faster), both from ``--rounds`` rounds timed
in turn with the L2 flushed.

Run: ``python bench/blocksparse.py --out $OUT/blocksparse.json`` (``--quick``: one shape).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from _common import attempt, checkpoint, device_info, emit, median_ms, parse_args, rel_err, round_robin_ms

BLOCK = 128
# (batch, heads, seq_len, dim, density)
SHAPES = [(4, 32, 4096, 128, 0.5), (4, 32, 8192, 128, 0.25), (4, 32, 4096, 64, 0.5)]


def _mask(b: int, h: int, n: int, density: float) -> Any:
    import torch

    gen = torch.Generator(device="cuda").manual_seed(n)
    mask = torch.rand(b, h, n, n, device="cuda", generator=gen) < density
    mask[..., 0] = True  # every query block attends somewhere
    return mask


def _flex(q: Any, k: Any, v: Any, mask: Any) -> Callable[[], Any]:
    """FlexAttention with the kept blocks as full blocks (no mask_mod inside them), built from the
    block mask directly (``create_block_mask`` evaluates a mask_mod per element: 64 GB at S=8192)."""
    import torch
    from torch.nn.attention.flex_attention import BlockMask, flex_attention

    counts = mask.sum(-1).to(torch.int32)
    indices = torch.argsort(mask.to(torch.int8), dim=-1, descending=True, stable=True).to(torch.int32)
    block_mask = BlockMask.from_kv_blocks(torch.zeros_like(counts), torch.zeros_like(indices), counts, indices,
                                          BLOCK_SIZE=BLOCK, seq_lengths=(q.shape[2], k.shape[2]))
    compiled = torch.compile(flex_attention)
    return lambda: compiled(q, k, v, block_mask=block_mask)


def bench_case(b: int, h: int, s: int, d: int, density: float, args: Any) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    import tilelang_x
    from tests.kernels import attention

    n = s // BLOCK
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
    mask = _mask(b, h, n, density)
    kept = int(mask.sum())
    flops = 4.0 * kept * BLOCK * BLOCK * d
    row: dict[str, Any] = {"B": b, "H": h, "S": s, "D": d, "density": round(kept / mask.numel(), 3)}
    func = attention.blocksparse_attention.get_ir(b, h, s, d, block_M=BLOCK, block_N=BLOCK, num_stages=2, threads=256)
    fns: dict[str, Callable[[], Any]] = {}
    forms = (("ours", {}), ("ours_warp_specialized", {"tlx.ws_compute_loops": True}),
             ("ours_listed", {"tlx.ws_compute_loops": False}))
    for name, configs in forms:
        kernel, err = attempt(lambda configs=configs: tilelang_x.compile(func, out_idx=[4], pass_configs=configs))
        if err is None:
            fns[name] = lambda kernel=kernel: kernel(q, k, v, mask)
        else:
            row[f"{name}_error"] = err
    flex, err = attempt(lambda: _flex(q, k, v, mask))
    if err is None:
        fns["flex"] = flex
    else:
        row["flex_error"] = err
    fns["dense"] = lambda: F.scaled_dot_product_attention(q, k, v)
    if "flex" in fns:
        ref = fns["flex"]().float()
    else:
        keep = mask.repeat_interleave(BLOCK, -2).repeat_interleave(BLOCK, -1)
        scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(d)
        ref = torch.softmax(scores.masked_fill(~keep, float("-inf")), -1) @ v.float()
    for name in [x for x in fns if x.startswith("ours")]:
        out, err = attempt(fns[name])
        e = rel_err(out.float(), ref) if err is None else float("nan")
        if err is not None or not e < 1e-2:
            row[f"{name}_error"] = err or f"wrong result: relative error {e:.3g}"
            del fns[name]
        else:
            row[f"{name}_rel_err"] = float(f"{e:.3g}")
            row[f"{name}_ms_alone"] = round(median_ms(fns[name], args.warmup, args.rep), 4)
    final = round_robin_ms(fns, args.rounds, args.warmup, args.rep)
    for key, ms in final.items():
        row[f"{key}_ms"] = round(ms, 4)
        if key != "dense":
            row[f"{key}_tflops"] = round(flops / ms / 1e9, 1)
    if "ours" in final and "flex" in final:
        row["ratio"] = round(final["flex"] / final["ours"], 3)
    for form in ("ours_warp_specialized", "ours_listed"):
        if "ours" in final and form in final:
            row[f"speedup_over_{form[len('ours_'):]}"] = round(final[form] / final["ours"], 2)
    return row


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    results: list[dict[str, Any]] = []
    doc = {"bench": "blocksparse_attention", "info": device_info(), "results": results}
    for shape in SHAPES[:1] if args.quick else SHAPES:
        row, err = attempt(lambda shape=shape: bench_case(*shape, args))
        results.append(row if err is None else {"shape": list(shape), "error": err})
        checkpoint(doc, args.out)
    emit(doc, args.out)


if __name__ == "__main__":
    main()
