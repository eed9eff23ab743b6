"""Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3",
SC 2011), the counter-based generator behind ``T.rng_rand``, on numpy arrays or Python ints.

The CUDA backend's ``include/tlx_random.h`` computes the same function; both follow the paper's
definition, so the streams are bit-identical. A draw is identified by three 64-bit numbers:

- the **seed**, the key: ``(seed mod 2^32, seed >> 32)``;
- the **subsequence**, the high half of the counter: words 2 and 3;
- the **offset**, the position in the subsequence: word ``offset mod 4`` of the block of four
  that the counter ``(offset >> 2)`` (words 0 and 1) produces.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["MULTIPLIERS", "WEYL", "philox4x32", "rng_rand"]

#: the round multipliers (M0, M1) and the key schedule's Weyl increments (W0, W1) of the paper
MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
WEYL = (0x9E3779B9, 0xBB67AE85)
ROUNDS = 10

_U32 = np.uint64(0xFFFFFFFF)


def _u32(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.uint64) & _U32


def philox4x32(counter: tuple[Any, Any, Any, Any], key: tuple[Any, Any]) -> tuple[np.ndarray, ...]:
    """The four output words of Philox4x32-10 for ``counter`` (four 32-bit words) and ``key``
    (two), elementwise over broadcast arrays; the words are ``uint64`` arrays below 2^32."""
    c0, c1, c2, c3 = (_u32(c) for c in counter)
    k0, k1 = (_u32(k) for k in key)
    m0, m1 = np.uint64(MULTIPLIERS[0]), np.uint64(MULTIPLIERS[1])
    w0, w1 = np.uint64(WEYL[0]), np.uint64(WEYL[1])
    shift = np.uint64(32)
    for r in range(ROUNDS):
        if r:
            k0, k1 = (k0 + w0) & _U32, (k1 + w1) & _U32
        p0, p1 = m0 * c0, m1 * c2
        c0, c1, c2, c3 = (p1 >> shift) ^ c1 ^ k0, p1 & _U32, (p0 >> shift) ^ c3 ^ k1, p0 & _U32
    return c0, c1, c2, c3


def rng_rand(seed: Any, subsequence: Any, offset: Any) -> np.ndarray:
    """The 32-bit draw at ``offset`` of stream ``subsequence`` under ``seed`` (64-bit unsigned
    values, elementwise), as a ``uint32`` array."""
    seed, sub, off = (np.asarray(v).astype(np.uint64) for v in (seed, subsequence, offset))
    shift = np.uint64(32)
    block = off >> np.uint64(2)
    words = philox4x32((block & _U32, block >> shift, sub & _U32, sub >> shift), (seed & _U32, seed >> shift))
    lane = off & np.uint64(3)
    out = np.choose(lane.astype(np.intp), np.broadcast_arrays(*words))
    return np.asarray(out, dtype=np.uint32)
