"""Counts how often the interpreter runs ``T.gemm`` (an example tilelang-x plugin).

The hook implementations are in ``tilelang_x_gemm_counter.plugin`` (named by the entry point);
this module holds the counters, which a user or a test reads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__version__ = "0.1.0"
__all__ = ["calls", "lowered", "reset", "stats", "wrap"]

_lock = threading.Lock()
_lowered = 0
_executed = 0


def calls() -> int:
    """How many times a counted ``T.gemm`` executor ran (once per block and loop iteration)."""
    return _executed


def lowered() -> int:
    """How many ``T.gemm`` ops this plugin has lowered (once per op per compiled kernel)."""
    return _lowered


def stats() -> dict[str, int]:
    """``{"lowered": ..., "executed": ...}``."""
    return {"lowered": _lowered, "executed": _executed}


def reset() -> None:
    """Set both counters back to zero."""
    global _lowered, _executed
    with _lock:
        _lowered = _executed = 0


def wrap(executor: Callable[[Any], None]) -> Callable[[Any], None]:
    """An executor that counts each call, then runs ``executor``."""
    global _lowered
    with _lock:
        _lowered += 1

    def counted_gemm(rt: Any) -> None:
        global _executed
        with _lock:
            _executed += 1
        executor(rt)

    return counted_gemm
