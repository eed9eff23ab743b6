#!/usr/bin/env bash
# Stream-K on the H200 (branch stream-k-wip), each step under its own time limit so that a hang
# costs one step: the correctness tests, then the A/B against the default in both timing regimes.
# Run: OUT=$OUT bash bench/run_stream_k.sh   (writes sk_tests.log, sk_variants.json under $OUT)
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
python3 -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
timeout 60 python3 -m pytest -x -q \
  "tests/backend/cuda/test_stream_k_cuda.py::test_stream_k_gemm_matches_torch[cython-4096-4096-1024-float16-128-256-3-extra0]" \
  > "$OUT/sk_first.log" 2>&1
echo "first case: rc=$?"; tail -3 "$OUT/sk_first.log"
timeout 300 python3 -m pytest -q tests/backend/cuda/test_stream_k_cuda.py > "$OUT/sk_tests.log" 2>&1
echo "stream-K tests: rc=$?"; tail -3 "$OUT/sk_tests.log"
cd bench && timeout 240 python3 variants.py gemm --shapes 4096x4096x4096,8192x8192x8192 --rounds 7 --timeout 230 \
  --back-to-back 1.0 --variants '{"default": {}, "stream_k": {"tlx.stream_k": true}, "default_again": {}}' \
  --out "$OUT/sk_variants.json" 2>&1 | grep -v Warn | tail -4
