"""The quick-start demo (scripts/demo) runs and matches torch (small size, interpreter)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def test_demo_matches_torch() -> None:
    path = Path(__file__).resolve().parents[2] / "examples" / "gemm_relu.py"
    spec = importlib.util.spec_from_file_location("gemm_relu_demo", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.run(size=128, target="interp")
    assert result["target"] == "interp"
    assert result["error"] <= result["allowed"]
