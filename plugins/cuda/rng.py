"""CUDA code of ``T.rng_rand``: a call of ``tlx_rng_rand`` (Philox4x32-10 in
``include/tlx_random.h``, plain C++ with no cuRAND), which a kernel includes only when it draws."""

from __future__ import annotations

import functools
import os

__all__ = ["rng_call", "rng_header"]


@functools.lru_cache(maxsize=1)
def rng_header() -> str:
    with open(os.path.join(os.path.dirname(__file__), "include", "tlx_random.h")) as fh:
        return fh.read()


def rng_call(args: list[str], extra_headers: list[str]) -> str:
    """The draw at ``(seed, subsequence, offset)`` (the code of three 64-bit unsigned operands);
    adds the header to ``extra_headers`` once."""
    if rng_header() not in extra_headers:
        extra_headers.append(rng_header())
    return f"tlx_rng_rand({', '.join(args)})"
