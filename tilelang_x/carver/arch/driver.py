"""``tilelang.carver.arch.driver``: properties of the CUDA device, as TileLang's persistent GEMM
example reads them (``driver.get_num_sms()`` blocks for a persistent grid)."""

from __future__ import annotations

from ...core_ir.errors import TileLangError


def get_num_sms(device_id: int = 0) -> int:
    """Streaming multiprocessors of CUDA device ``device_id``."""
    import torch

    if not torch.cuda.is_available():
        raise TileLangError("tilelang.carver.arch.driver needs a CUDA device, and torch sees none",
                            hint="pass the SM count yourself on a machine without a GPU (132 on an H100/H200 SXM)")
    return int(torch.cuda.get_device_properties(device_id).multi_processor_count)
