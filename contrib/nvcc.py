"""``tilelang.contrib.nvcc``: the compute-capability helpers TileLang's examples call
(``examples/gemm_sp`` picks its metadata dtype with ``get_target_compute_version()``)."""

from __future__ import annotations


def get_target_compute_version(target: object = None) -> str:
    """``"major.minor"`` of the current CUDA device (``"9.0"`` on an H200); ``"8.0"`` without one,
    so a kernel that keys on it still builds for the interpreter (which reads every metadata dtype)."""
    import torch

    if not torch.cuda.is_available():
        return "8.0"
    major, minor = torch.cuda.get_device_capability()
    return f"{major}.{minor}"


def parse_compute_version(compute_version: str) -> tuple[int, int]:
    """``"9.0"`` -> ``(9, 0)``."""
    major, _, minor = compute_version.partition(".")
    return int(major), int(minor or 0)
