"""Code generation for the interpreter: it runs the IR itself, so its "source" is the IR text."""

from __future__ import annotations

from tilelang_x.core_ir.stmt import PrimFunc


def generate(func: PrimFunc) -> str:
    """What ``kernel.get_kernel_source()`` shows for the interpreter: the function's IR."""
    return func.script()
