timeout 100 python3 -m pip install -q --no-build-isolation --no-deps -e . >/dev/null 2>&1; export PYTHONPATH=$PWD
timeout 170 python3 -m pytest -q tests/backend/cuda/test_attention_bwd_cuda.py tests/backend/cuda/test_suite_cuda.py -k "bwd or dequant or grouped or moe or deepgemm or persistent or pointers or tma_copy or async_copy or fp8 or flash_attention" > $OUT/tests.log 2>&1; tail -3 $OUT/tests.log
timeout 150 python3 bench/variants.py attention_bwd --dims 128 --config 128x64x2x256 --rounds 4 --variants '{"elide": {}, "fence_all": {"tlx.elide_proxy_fences": false}, "elide_again": {}}' --out $OUT/bwd.json > $OUT/bwd.log 2>&1
python3 -c "
import json
for r in json.load(open('$OUT/bwd.json'))['rows']: print(r['case'], r['ratio_vs_reference'], r.get('errors'))
" 2>&1 | tail -3
