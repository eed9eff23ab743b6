"""``tilelang.carver.arch.driver``: properties of the CUDA device, as TileLang's persistent GEMM
example reads them (``driver.get_num_sms()`` blocks for a persistent grid)."""

from __future__ import annotations

from typing import Any

from ...core_ir.errors import TileLangError


def _properties(device_id: int) -> Any:
    import torch

    if not torch.cuda.is_available():
        raise TileLangError("tilelang.carver.arch.driver needs a CUDA device, and torch sees none",
                            hint="pass the SM count yourself on a machine without a GPU (132 on an H100/H200 SXM)")
    return torch.cuda.get_device_properties(device_id)


def get_num_sms(device_id: int = 0) -> int:
    """Streaming multiprocessors of CUDA device ``device_id``."""
    return int(_properties(device_id).multi_processor_count)


def get_device_name(device_id: int = 0) -> str:
    return str(_properties(device_id).name)


def get_max_dynamic_shared_size_bytes(device_id: int = 0) -> int:
    """Shared memory one block may opt in to on device ``device_id``."""
    return int(getattr(_properties(device_id), "shared_memory_per_block_optin", 0))
