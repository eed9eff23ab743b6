"""Integer helpers for the Python side of a kernel factory, as TileLang's ``tilelang.math``
provides them (``tilelang.cdiv``, ``tilelang.next_power_of_2``): plain ``int`` arithmetic for
tile sizes, not IR (inside a kernel use ``T.ceildiv``)."""

from __future__ import annotations


def cdiv(a: int, b: int) -> int:
    """``a / b`` rounded up, for ``b > 0``."""
    return -(-a // b)


def next_power_of_2(x: int) -> int:
    """The smallest power of two ``>= x`` (1 for ``x <= 1``)."""
    return 1 << max(x - 1, 0).bit_length()
