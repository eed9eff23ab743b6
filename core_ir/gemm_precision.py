"""How ``T.gemm`` multiplies float32 operands, for every backend.

``tf32`` (the default, as TileLang does on NVIDIA tensor cores): each float32 operand is first
rounded to TF32 (8 exponent and 10 mantissa bits, to nearest with ties away from zero, as
``cvt.rna.tf32.f32``), the products are exact and the sums float32. ``ieee``: float32 products.
Chosen per kernel with the pass config ``tlx.fp32_gemm``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import TileLangError

KEY = "tlx.fp32_gemm"
PRECISIONS = ("tf32", "ieee")
_DROPPED_BITS = 13  # float32 has 23 mantissa bits, TF32 10


def fp32_gemm_precision(pass_configs: dict[str, Any]) -> str:
    """``tf32`` or ``ieee`` from a kernel's pass configs; another value raises."""
    value = pass_configs.get(KEY, "tf32")
    if value not in PRECISIONS:
        raise TileLangError(f"pass config {KEY!r} is {value!r}; it takes one of {', '.join(map(repr, PRECISIONS))}",
                            hint=f'e.g. pass_configs={{"{KEY}": "ieee"}} for float32 products')
    return value


def round_tf32(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to TF32 as ``cvt.rna.tf32.f32`` does (infinities and NaN kept; a
    value that rounds past the largest finite one becomes infinite)."""
    f = np.ascontiguousarray(x, dtype=np.float32)
    bits = f.view(np.uint32)
    rounded = ((bits + np.uint32(1 << (_DROPPED_BITS - 1))) & np.uint32(~((1 << _DROPPED_BITS) - 1) & 0xFFFFFFFF))
    return np.where(np.isfinite(f), rounded.view(np.float32), f)
