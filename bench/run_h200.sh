#!/usr/bin/env bash
# Every figure of the closing notes in one go, on a machine with one NVIDIA GPU (the H200 here):
# installs the package, runs the GPU test suite, then the benchmarks, and merges their JSON into
# "$OUT/all.json" (OUT defaults to ./bench-out). Takes about 20 minutes on the H200, in four parts
# of under 10 minutes each: `bash bench/run_h200.sh 1` runs the tests and the GEMM and attention
# benchmarks, `... 2` the other benchmarks, `... 3` the A/B runs of compiler switches, `... 4` the
# FlashAttention backward, 2:4-sparse, TF32 and int8 benchmarks; each part merges what "$OUT/json/"
# holds so far.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-bench-out}"
PART="${1:-all}"
work="$OUT/json"
mkdir -p "$work"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/install.log" 2>&1 || tail -20 "$OUT/install.log"
if [ "$PART" = 1 ] || [ "$PART" = all ]; then
timeout 260 python3 -m pytest -q -rf tests/backend/cuda > "$OUT/cuda_tests.log" 2>&1
tail -3 "$OUT/cuda_tests.log"
{
  # Hopper path (target "cuda" resolves to sm_90a on an H100/H200)
  python3 bench/gemm.py --shapes 4096x4096x4096,8192x8192x8192,8192x28672x4096 \
    --configs 128x256x64x3x256,128x256x64x4x256,128x256x64x4x256@1x2x1 --timeout 200 --out "$work/gemm.json"
  python3 bench/gemm.py --shapes 16x8192x8192 --timeout 60 --out "$work/gemm_decode.json"
  # float8 e4m3 (B stored N x K, fp16 out) against torch._scaled_mm
  python3 bench/gemm.py --dtypes float8_e4m3fn --trans-b --shapes 4096x4096x4096,8192x8192x8192 --timeout 90 \
    --out "$work/gemm_fp8.json"
  # B stored N x K (a torch.nn.Linear weight): the reference is torch.matmul(a, b.T)
  python3 bench/gemm.py --trans-b --shapes 4096x4096x4096,8192x8192x8192 \
    --configs 128x256x64x3x256,128x256x64x4x256,128x256x64x4x256@1x2x1 --timeout 90 \
    --out "$work/gemm_trans_b.json"
  # A/B of the automatic block rasterisation (plugins/cuda/rasterize.py): the same kernels without it
  python3 bench/gemm.py --shapes 8192x8192x8192,8192x28672x4096 --dtypes float16,bfloat16 \
    --configs 128x256x64x3x256 --pass-configs '{"tlx.auto_rasterize": false}' --timeout 90 \
    --out "$work/gemm_no_raster.json"
  python3 bench/gemm.py --shapes 8192x8192x8192 --dtypes float16 --relu --configs 128x256x64x3x256 \
    --timeout 40 --out "$work/gemm_relu.json"
  python3 bench/attention.py --dims 64,128 --configs 128x128x2x256,128x64x2x256 --timeout 150 \
    --out "$work/attention.json"
} > "$OUT/bench1.log" 2>&1
fi
if [ "$PART" = 2 ] || [ "$PART" = all ]; then
{
  # decode attention (GQA, split-KV in two kernels of one function) against torch SDPA
  python3 bench/decode.py --timeout 150 --out "$work/decode.json"
  # weight-only int4 GEMM (W4A16) against cuBLAS on fp16 weights and torch dequantize-then-matmul
  python3 bench/dequant.py --timeout 200 --out "$work/dequant.json"
  # block-sparse attention (the pipelined body under `if block_mask[k]`) against FlexAttention
  python3 bench/blocksparse.py --timeout 300 --out "$work/blocksparse.json"
  # thread-block clusters with TMA multicast (persistent: cluster tiles in the rasterized order)
  python3 bench/gemm.py --shapes 8192x8192x8192 --dtypes float16 \
    --configs 128x256x64x3x256,128x256x64x3x256@2x1x1,128x256x64x4x256@1x2x1 --timeout 80 \
    --out "$work/gemm_cluster.json"
  # the portable sm_80-class path on the same GPU
  python3 bench/gemm.py --target cuda:sm_90 --shapes 4096x4096x4096,8192x8192x8192 --dtypes float16 \
    --configs 256x128x64x3x256,128x256x64x3x256 --timeout 60 --out "$work/gemm_sm80.json"
  python3 bench/attention.py --target cuda:sm_90 --configs 128x128x2x256 --timeout 60 \
    --out "$work/attention_sm80.json"
  python3 bench/compile_time.py --timeout 60 --out "$work/compile_time.json"
  python3 bench/launch_overhead.py --timeout 40 --out "$work/launch_overhead.json"
  python3 -m tilelang_x doctor
} > "$OUT/bench2.log" 2>&1
fi
if [ "$PART" = 3 ] || [ "$PART" = all ]; then
{
  # A/B of compiler switches, each variant timed round-robin in one process (bench/variants.py)
  python3 bench/variants.py attention --dims 128,64 --timeout 150 --out "$work/variants_attention.json" \
    --variants '{"default": {}, "no_rotation": {"tlx.softmax_rotation": false}, "plain": {"tlx.ws_compute_loops": false}, "ieee_division": {"tlx.reciprocal_division": false}, "no_prologue_loads": {"tlx.prologue_loads": false}, "default_again": {}}'
  python3 bench/variants.py gemm --shapes 4096x4096x4096,8192x8192x8192 --timeout 150 \
    --out "$work/variants_gemm.json" --variants '{"default": {}, "not_persistent": {"tlx.persistent": false}, "lane_stores": {"tlx.tma_store": false}, "default_again": {}}'
} > "$OUT/bench3.log" 2>&1
fi
if [ "$PART" = 4 ] || [ "$PART" = all ]; then
{
  # FlashAttention backward (preprocess, main kernel with atomic dQ, postprocess) against SDPA's backward
  python3 bench/attention_bwd.py --timeout 200 --out "$work/attention_bwd.json"
  # 2:4-sparse T.gemm_sp against dense cuBLAS and cuSPARSELt
  python3 bench/gemm_sp.py --timeout 200 --out "$work/gemm_sp.json"
  # float32 at TF32 precision against cuBLAS TF32, and int8 against torch._int_mm (B stored N x K)
  python3 bench/gemm.py --dtypes float32,int8 --trans-b --shapes 4096x4096x4096,8192x8192x8192 --timeout 150 \
    --out "$work/gemm_tf32_int8.json"
  # the same, and float8, with B stored K x N (sm_90a: swapped wgmma, C^T = B^T A^T; torch._scaled_mm
  # gets an untimed N x K copy of B)
  python3 bench/gemm.py --dtypes float32,int8,float8_e4m3fn --shapes 4096x4096x4096,8192x8192x8192 --timeout 200 \
    --out "$work/gemm_b_k_by_n.json"
} > "$OUT/bench4.log" 2>&1
fi
python3 - "$work" "$OUT/all.json" <<'PY'
import json, pathlib, sys
work, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
merged = {}
for p in sorted(work.glob("*.json")):
    try:
        merged[p.stem] = json.loads(p.read_text())
    except ValueError as exc:
        merged[p.stem] = {"error": f"unreadable: {exc}"}
out.write_text(json.dumps(merged, indent=1))
PY
python3 bench/summary.py "$OUT/all.json" 2>/dev/null || true
