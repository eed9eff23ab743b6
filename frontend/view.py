"""``T.view`` and ``T.reshape``: buffers that reinterpret the memory of another one.

A view aliases the whole of its base, row-major from its first byte, with its own shape and
(``T.view``) dtype; the IR records it as a ``Buffer`` whose ``base`` is the buffer owning the
memory, so it needs no statement and is visible wherever its base is.
"""

from __future__ import annotations

import math
from typing import Any

from ..core_ir import expr as E
from ..core_ir.buffer import Buffer
from ..core_ir.dtypes import DType
from ..core_ir.errors import NotSupportedError, ShapeMismatchError, TileLangTypeError
from ..core_ir.simplify import simplify
from ..core_ir.source import SourceLoc, caller_loc
from . import builder as bld
from .spec import dtype_of, shape_of


def view(buffer: Any, shape: Any = None, dtype: Any = None, strides: Any = None) -> Buffer:
    """``T.view(buf, shape=None, dtype=None)``: ``buf``'s memory as a buffer of ``shape`` and
    ``dtype`` (each defaults to ``buf``'s; with only a new dtype, the last dimension is scaled by
    the ratio of the element sizes). The byte counts must match; nothing is copied, and a write
    through either buffer is seen through the other."""
    return _make_view("T.view", buffer, shape, dtype, strides)


def reshape(buffer: Any, shape: Any) -> Buffer:
    """``T.reshape(buf, shape)``: ``buf``'s elements, row-major, as a buffer of ``shape`` (the
    same element count); nothing is copied."""
    return _make_view("T.reshape", buffer, shape, None, None)


def _make_view(what: str, buffer: Any, shape: Any, dtype: Any, strides: Any) -> Buffer:
    b = bld.require(what)
    loc = caller_loc()
    base = _viewed(what, buffer, strides, loc)
    dt = base.dtype if dtype is None else dtype_of(dtype)
    if dt != base.dtype and (dt.is_bool or base.dtype.is_bool):
        raise TileLangTypeError(f"{what}: cannot reinterpret {base.dtype} `{base.name}` as {dt}", loc=loc,
                                hint="bool holds one value per byte; convert with T.cast element by element")
    dims = _default_shape(what, base, dt, loc) if shape is None else shape_of(shape, what)
    _check_bytes(what, base, dims, dt, loc)
    scope = base.scope
    if scope == "var" and _numel(dims) != 1:
        scope = "local"  # several elements of a T.alloc_var: an array, not a scalar
    return b.new_buffer("view", dims, dt, scope, loc, base=base)


def _viewed(what: str, buffer: Any, strides: Any, loc: SourceLoc | None) -> Buffer:
    if type(buffer) is not Buffer:
        raise TileLangTypeError(
            f"{what} takes a buffer, got {type(buffer).__name__} {buffer!r}", loc=loc,
            hint="pass the whole buffer (a tensor parameter or a T.alloc_* tile), not a slice or an element")
    if strides is not None:
        raise NotSupportedError(f"{what}(..., strides=...) is not supported by tilelang-x", loc=loc,
                                hint="views are row-major; declare a T.StridedTensor parameter for strided data")
    if buffer.strides is not None:
        raise NotSupportedError(f"{what} of `{buffer.name}`, a tensor with explicit strides, is not supported",
                                loc=loc, hint="view a contiguous T.Tensor parameter instead")
    return buffer


def _default_shape(what: str, base: Buffer, dt: DType, loc: SourceLoc | None) -> tuple[E.Expr, ...]:
    """``base``'s shape with the last dimension scaled from ``base``'s element size to ``dt``'s."""
    if dt == base.dtype:
        return base.shape
    last = E.as_int(base.shape[-1]) if base.shape else None
    if last is None or last * base.dtype.bytes % dt.bytes:
        raise ShapeMismatchError(
            f"{what}: the last dimension of `{base.name}` ({base.shape[-1] if base.shape else 'none'} x "
            f"{base.dtype}) is not a whole number of {dt} elements", loc=loc,
            hint=f"pass shape= explicitly, e.g. {what}({base.name}, shape, {dt.name})")
    return (*base.shape[:-1], E.const(last * base.dtype.bytes // dt.bytes))


def _numel(dims: tuple[E.Expr, ...]) -> int | None:
    sizes = [E.as_int(d) for d in dims]
    return None if any(s is None for s in sizes) else math.prod(sizes)  # type: ignore[arg-type]


def _nbytes(dims: tuple[E.Expr, ...], dt: DType) -> E.Expr:
    total: E.Expr = E.const(dt.bytes)
    for d in dims:
        total = E.binary("*", total, d)
    return total


def _check_bytes(what: str, base: Buffer, dims: tuple[E.Expr, ...], dt: DType, loc: SourceLoc | None) -> None:
    have, want = _nbytes(base.shape, base.dtype), _nbytes(dims, dt)
    diff = E.as_int(simplify(E.binary("-", have, want)))
    if diff == 0:
        return
    shape = ", ".join(str(d) for d in dims)
    base_shape = ", ".join(str(d) for d in base.shape)
    if diff is None:
        raise ShapeMismatchError(
            f"{what}: cannot prove that [{shape}] x {dt} has the {have} bytes of `{base.name}` "
            f"([{base_shape}] x {base.dtype})", loc=loc,
            hint="write the new shape from the same sizes as the buffer's (e.g. (M * N,) for (M, N)), or use "
            "constant sizes")
    raise ShapeMismatchError(
        f"{what}: [{shape}] x {dt} is {simplify(want)} bytes but `{base.name}` ([{base_shape}] x {base.dtype}) "
        f"is {simplify(have)}", loc=loc,
        hint="the view must cover the whole buffer: same element count for T.reshape, same byte count for T.view")
