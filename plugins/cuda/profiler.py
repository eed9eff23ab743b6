"""Timing CUDA work with events: the timer ``tlx_profiler`` hands out for CUDA targets.

``timer(fn, warmup, rep)`` calls ``fn`` ``warmup`` times, then ``rep`` times between a pair of
CUDA events each, and returns the ``rep`` elapsed times in milliseconds (the caller takes the
median). Before each timed call it overwrites a buffer twice the size of the GPU's L2 cache, so
every repetition starts with a cold L2, as a kernel inside a real model does.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

_FLUSH: dict[int, Any] = {}


def l2_cache_bytes(device: int) -> int:
    """The L2 cache size of ``device`` in bytes (64 MiB when it cannot be read)."""
    import torch

    size = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
    if not size:
        try:
            from . import driver

            size = driver.device_attribute(device, driver.ATTR_L2_CACHE_SIZE)
        except Exception:  # noqa: BLE001 - only a size estimate
            size = 0
    return int(size) or 64 * 1024 * 1024


def flush_buffer(device: int) -> Any:
    """A buffer twice the L2 size on ``device`` (allocated once per device); ``.zero_()`` flushes."""
    buf = _FLUSH.get(device)
    if buf is None:
        import torch

        n = max(2 * l2_cache_bytes(device), 16 * 1024 * 1024) // 4
        buf = torch.empty(n, dtype=torch.int32, device=f"cuda:{device}")
        _FLUSH[device] = buf
    return buf


def timer(fn: Callable[[], Any], warmup: int = 25, rep: int = 100, *, flush_l2: bool = True,
          device: int | None = None) -> list[float]:
    """Per-repetition times of ``fn()`` in milliseconds, measured with CUDA events on the current
    stream after ``warmup`` untimed calls; the L2 cache is flushed before each timed call."""
    import torch

    dev = torch.cuda.current_device() if device is None else int(device)
    warmup, rep = max(0, int(warmup)), max(1, int(rep))
    cache = flush_buffer(dev) if flush_l2 else None
    with torch.cuda.device(dev):
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize(dev)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(rep)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(rep)]
        for i in range(rep):
            if cache is not None:
                cache.zero_()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize(dev)
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def median_ms(fn: Callable[[], Any], warmup: int = 25, rep: int = 100, *, flush_l2: bool = True) -> float:
    """The median of ``timer(fn, warmup, rep)``."""
    return statistics.median(timer(fn, warmup, rep, flush_l2=flush_l2))
