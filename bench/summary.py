"""Print the headline numbers of bench JSON files (single benches, or the merged ``all.json`` of
``bench/run_h200.sh``): ``python bench/summary.py a.json b.json``."""

from __future__ import annotations

import json
import sys


def main() -> None:
    for path in sys.argv[1:]:
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{path}: {e}")
            continue
        docs = [doc] if "bench" in doc else [d for d in doc.values() if isinstance(d, dict)]
        for doc, r in ((d, r) for d in docs for r in d.get("results", []) if isinstance(r, dict)):
            keys = ("kind", "dtype", "M", "N", "K", "B", "H", "S", "D", "causal", "density", "ours_tflops",
                    "torch_tflops", "ratio", "cudnn_tflops", "flash_tflops", "ratio_cudnn", "ratio_flash",
                    "ours_weight_gb_s", "ratio_cublas", "ratio_torch_dequant", "ours_tb_s", "reference", "flex_tflops",
                    "speedup_over_synchronous", "speedup_over_warp_specialized", "speedup_over_listed",
                    "best_config", "error")
            print(doc.get("bench"), {k: r[k] for k in keys if k in r})
            for c in r.get("configs", []):
                print("   ", {k: v for k, v in c.items() if k != "error"}, (c.get("error") or "")[:300])
        for doc, r in ((d, r) for d in docs for r in d.get("rows", [])):  # bench/variants.py
            print(doc.get("bench"), doc.get("kernel"), r["case"], r["tflops"], r["ratio_vs_reference"],
                  r["errors"] or "")


if __name__ == "__main__":
    main()
