"""``tilelang.intrinsics``: TileLang's tensor-core macro emitters are not provided (tilelang-x lowers
``T.gemm`` itself); the one layout helper its examples use outside them is."""

from __future__ import annotations

from typing import Any

from .core_ir.errors import NotSupportedError
from .core_ir.layout import make_swizzled_layout


def make_mma_swizzle_layout(buffer: Any, is_smooth: bool = False) -> Any:
    """The bank-conflict-free layout of a shared tile an MMA reads (``make_swizzled_layout``; the
    backend places gemm operands this way itself, so annotating it is optional). ``is_smooth`` is
    accepted and changes nothing: a layout never changes results."""
    return make_swizzled_layout(buffer)


def __getattr__(name: str) -> Any:
    raise NotSupportedError(f"tilelang.intrinsics.{name} is not supported by tilelang-x",
                            hint="write the matrix multiply as T.gemm: the backend emits the tensor-core "
                            "instructions (mma.sync, wgmma) itself")
