"""Layouts on the interpreter: there are none to infer.

The interpreter keeps every buffer as a plain row-major numpy array and executes each tile op on
whole tiles, so no thread owns any element and nothing is swizzled: a layout annotation
(``T.annotate_layout``) or a swizzle hint (``T.use_swizzle``) cannot change a result, and the
interpreter ignores them. This module exists so the plugin has the same module set as every
other backend; ``infer_layout`` states that the interpreter has no opinion.
"""

from __future__ import annotations

from typing import Any


def infer_layout(op: Any, ctx: Any) -> None:
    """No layout constraints: always ``None``."""
    return None
