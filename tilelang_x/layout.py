"""``tilelang.layout``: layout constructors for ``T.annotate_layout`` (as in TileLang).

Re-exports the public constructors of ``tilelang_x.core_ir.layout``: ``Layout``, ``Fragment``,
``make_swizzled_layout`` and its 128/64/32-byte variants, ``make_linear_layout``,
``make_fully_replicated_layout_fragment``, and ``make_metadata_layout`` /
``make_cutlass_metadata_layout`` (accepted for ``T.gemm_sp``'s metadata; no-ops here).
"""

from __future__ import annotations

from .core_ir.layout import (
    Fragment,
    Layout,
    make_cutlass_metadata_layout,
    make_full_bank_swizzled_layout,
    make_fully_replicated_layout_fragment,
    make_half_bank_swizzled_layout,
    make_linear_layout,
    make_metadata_layout,
    make_quarter_bank_swizzled_layout,
    make_swizzled_layout,
)

__all__ = [
    "Fragment", "Layout", "make_cutlass_metadata_layout", "make_full_bank_swizzled_layout",
    "make_fully_replicated_layout_fragment", "make_half_bank_swizzled_layout", "make_linear_layout",
    "make_metadata_layout", "make_quarter_bank_swizzled_layout", "make_swizzled_layout",
]
