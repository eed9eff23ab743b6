"""Element accesses to on-chip buffers that a loop's own range puts out of bounds.

``for i, j in T.Parallel(64, 128): frag[i, j] = ...`` on a ``(64, 64)`` fragment writes past it in
half its iterations: the interpreter stops there at run time, while the CUDA backend, which checks
nothing, writes other registers or other shared memory. This check finds the plain cases before
any backend runs: an index that is a loop variable (plus a constant) of a loop with constant
bounds, into a shared / fragment / local buffer of constant shape, outside any ``if`` (whose
condition may be the guard) and any ``T.if_then_else``. Global tensors are left out: their
element accesses are guarded (``safe_access``).
"""

from __future__ import annotations

from typing import Any

from .buffer import Buffer
from .errors import OutOfBoundsError
from .expr import BinOp, Const, Expr, Load, Select, Var, as_int
from .source import SourceLoc
from .stmt import For, If, PrimFunc, Store, While
from .visit import children

_CHECKED_SCOPES = ("shared", "fragment", "local")


def verify_bounds(func: PrimFunc) -> None:
    """Raise ``OutOfBoundsError`` at the first access the enclosing loops' ranges put outside its
    buffer (see the module docstring)."""
    _walk(func.body, {}, func.loc)


def _walk(node: Any, ranges: dict[int, tuple[int, int]], loc: SourceLoc | None) -> None:
    loc = getattr(node, "loc", None) or loc
    if isinstance(node, (If, While, Select)):
        return
    if isinstance(node, For):
        ranges = {**ranges, **_loop_range(node)}
    elif isinstance(node, (Store, Load)):
        _check(node.buffer, node.indices, ranges, loc, "write to" if isinstance(node, Store) else "read of")
    for child in children(node):
        _walk(child, ranges, loc)


def _loop_range(loop: For) -> dict[int, tuple[int, int]]:
    start = 0 if loop.start is None else as_int(loop.start)
    extent = as_int(loop.extent)
    if start is None or extent is None or extent <= 0:
        return {}
    return {id(loop.var): (start, start + extent - 1)}


def _check(buf: Buffer, indices: tuple[Expr, ...], ranges: dict[int, tuple[int, int]], loc: SourceLoc | None,
           what: str) -> None:
    if buf.storage.scope not in _CHECKED_SCOPES or buf.storage is not buf:
        return
    shape = buf.static_shape()
    if shape is None or len(shape) != len(indices):
        return
    for dim, (index, size) in enumerate(zip(indices, shape)):
        span = _span(index, ranges)
        if span is not None and (span[0] < 0 or span[1] >= size):
            raise OutOfBoundsError(
                f"{what} `{buf.name}` out of bounds: index `{index}` of dimension {dim} runs from {span[0]} to "
                f"{span[1]} over its loop, but the dimension has {size} elements", loc=loc,
                hint=f"make the loop's extent match `{buf.name}`'s shape {tuple(shape)}, or guard the access with "
                "an `if`")


def _span(index: Expr, ranges: dict[int, tuple[int, int]]) -> tuple[int, int] | None:
    """The exact values of ``var`` or ``var + c`` / ``var - c`` for a loop variable ``var``."""
    if isinstance(index, Var):
        return ranges.get(id(index))
    if isinstance(index, BinOp) and index.op in ("+", "-") and isinstance(index.a, Var) and isinstance(index.b, Const):
        span = ranges.get(id(index.a))
        offset = as_int(index.b)
        if span is None or offset is None:
            return None
        offset = offset if index.op == "+" else -offset
        return span[0] + offset, span[1] + offset
    return None
