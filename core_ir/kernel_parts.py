"""A function with several ``T.Kernel`` blocks, compiled as one function per block.

TileLang kernels such as split-KV flash decoding write two grids in one ``@T.prim_func``: the
split pass, then the combine pass that reads what the first wrote. Each block becomes a function
of its own with every parameter of the original (so one set of arguments serves all), named
``<name>_<k>``; the compile driver builds each and launches them in order on one stream, so a
later kernel sees everything an earlier one wrote.
"""

from __future__ import annotations

import dataclasses

from .stmt import Kernel, PrimFunc, Seq

__all__ = ["kernel_parts"]


def kernel_parts(func: PrimFunc) -> list[PrimFunc]:
    """``func`` itself when it has at most one ``T.Kernel``; else one function per kernel, in
    order. Only a body of kernels splits (statements outside kernels are the verifier's to refuse)."""
    stmts = func.body.stmts if isinstance(func.body, Seq) else (func.body,)
    stmts = tuple(s for s in stmts if not (isinstance(s, Seq) and not s.stmts))
    if len(stmts) < 2 or not all(isinstance(s, Kernel) for s in stmts):
        return [func]
    return [dataclasses.replace(func, name=f"{func.name}_{k}", body=s) for k, s in enumerate(stmts)]
