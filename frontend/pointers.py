"""``T.ptr`` parameters and ``T.make_tensor``: a tensor over memory the caller passes as a pointer.

A parameter annotated ``T.ptr`` (or ``T.ptr(dtype)``) is a global buffer whose shape and dtype
the body gives with ``T.make_tensor(ptr, shape, dtype, strides)``: the call returns that very
parameter, now typed, so the kernel reads and writes it like a ``T.Tensor`` parameter. The
function's ``attrs`` list these parameters under ``core_ir.stmt.POINTERS``; at a call each takes
a tensor (its memory from its first element) or, on CUDA, an integer device address, which the
argument binder turns into a tensor of the made shape (``tilelang_x.pointer_args``).
"""

from __future__ import annotations

from typing import Any

from ..core_ir.buffer import Buffer
from ..core_ir.dtypes import DType, float32, uint8
from ..core_ir.errors import TileLangSyntaxError, TileLangTypeError
from ..core_ir.source import SourceLoc, caller_loc
from . import builder as bld
from .spec import dtype_of, shape_of


class PointerSpec:
    """What a ``T.ptr(dtype)`` annotation says: the dtype pointed to, if given."""

    __slots__ = ("dtype",)

    def __init__(self, dtype: DType | None) -> None:
        self.dtype = dtype

    def __repr__(self) -> str:
        return "T.ptr" if self.dtype is None else f"T.ptr({self.dtype})"


class Pointer:
    """A pointer parameter while its function is traced: the declared dtype and where
    ``T.make_tensor`` typed it (``None`` until then)."""

    __slots__ = ("buffer", "dtype", "made")

    def __init__(self, buffer: Buffer, dtype: DType | None) -> None:
        self.buffer = buffer
        self.dtype = dtype
        self.made: SourceLoc | None = None


def ptr(dtype: Any = None, storage_scope: str = "global", *, is_size_var: bool = False) -> PointerSpec:
    """``T.ptr`` / ``T.ptr(dtype)``: the type of a pointer parameter (written bare or called)."""
    if storage_scope != "global":
        raise TileLangSyntaxError(
            f"T.ptr: pointers to {storage_scope!r} memory are not supported", loc=caller_loc(),
            hint="kernel parameters point to global memory; leave out `storage_scope`",
        )
    return PointerSpec(None if dtype is None else dtype_of(dtype))


def is_pointer_annotation(ann: Any) -> bool:
    return ann is ptr or isinstance(ann, PointerSpec)


def declare(b: bld.Builder, name: str, ann: Any, loc: SourceLoc | None) -> Buffer:
    """The parameter ``name: T.ptr`` declares: an untyped buffer until ``T.make_tensor``."""
    spec = ann if isinstance(ann, PointerSpec) else PointerSpec(None)
    buf = Buffer(name, (0,), spec.dtype or uint8, "global", loc)
    b.pointers[id(buf)] = Pointer(buf, spec.dtype)
    return buf


def make_tensor(ptr: Any, shape: Any, dtype: Any = None, strides: Any = None) -> Buffer:
    """``T.make_tensor(ptr, shape, dtype, strides=None)``: the pointer parameter ``ptr`` as a global
    tensor of ``shape`` and ``dtype`` (default: the pointer's dtype, else float32), row-major or
    with element ``strides``."""
    b = bld.require("T.make_tensor")
    loc = caller_loc()
    p = b.pointers.get(id(ptr)) if type(ptr) is Buffer else None
    if p is None:
        raise TileLangTypeError(
            f"T.make_tensor takes a parameter annotated `T.ptr`, got {ptr!r}", loc=loc,
            hint="declare the parameter as `x_ptr: T.ptr`; pointer arithmetic and tables of pointers are not "
            "supported (use T.view of a tensor parameter for another view of its memory)",
        )
    buf = p.buffer
    if p.made is not None:
        raise TileLangSyntaxError(
            f"T.make_tensor: pointer `{buf.name}` was already made into a tensor at {p.made}", loc=loc,
            hint=f"make one tensor per pointer; for another shape or dtype of the same memory use "
            f"T.view({buf.name}_tensor, shape, dtype)",
        )
    dt = dtype_of(dtype) if dtype is not None else (p.dtype or float32)
    if p.dtype is not None and dt != p.dtype:
        raise TileLangTypeError(
            f"T.make_tensor: pointer `{buf.name}` is declared T.ptr({p.dtype}), but the tensor has dtype {dt}",
            loc=loc, hint=f"make a {p.dtype} tensor, or declare the parameter T.ptr({dt})",
        )
    buf.shape = shape_of(shape, "T.make_tensor")
    buf.strides = None if strides is None else shape_of(strides, "T.make_tensor strides")
    if buf.strides is not None and len(buf.strides) != len(buf.shape):
        raise TileLangTypeError(
            f"T.make_tensor: {len(buf.strides)} strides for a {len(buf.shape)}-d shape", loc=loc,
            hint="give one stride (in elements) per dimension",
        )
    buf.dtype = dt
    buf.loc = loc
    p.made = loc
    return buf
