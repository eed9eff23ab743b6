"""Buffers (tensors at one memory level) and regions of them.

A ``Buffer`` is compared by identity, like a variable. A *view* (``T.view``, ``T.reshape``) is a
buffer whose ``base`` is the buffer that owns its memory: it reads and writes the same bytes,
row-major from the first one, with its own shape and dtype. Passes that reason about memory
(hazards, written buffers) key on ``storage``, the owning buffer. Indexing builds IR: ``A[i, j]`` is a
``Load``; an index with slices, or fewer indices than dimensions, is a ``Region`` (what tile ops
such as ``T.copy`` take). ``A[i, j] = v`` is a store, recorded by the frontend's active builder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import expr as E
from . import packed
from .dtypes import DType
from .errors import OutOfBoundsError, ShapeMismatchError, TileLangSyntaxError
from .packed import Packed
from .source import SourceLoc, caller_loc

#: Scopes every backend understands. Plugins may add their own (e.g. Ascend ``ub``, ``l0a``).
CORE_SCOPES = ("global", "shared", "fragment", "local", "var", "barrier")
_extra_scopes: set[str] = set()


def register_scope(name: str) -> None:
    """Let a plugin declare a backend-specific memory scope."""
    _extra_scopes.add(name)


def known_scope(name: str) -> bool:
    return name in CORE_SCOPES or name in _extra_scopes


# The frontend installs a handler while it traces a kernel; outside a trace a store is an error.
_store_handler: list[Callable[[Buffer, tuple[E.Expr, ...], E.Expr], None]] = []


def push_store_handler(fn: Callable[[Buffer, tuple[E.Expr, ...], E.Expr], None]) -> None:
    _store_handler.append(fn)


def pop_store_handler() -> None:
    _store_handler.pop()


class Buffer:
    """A named, typed, shaped tile of memory in one scope."""

    __slots__ = ("name", "shape", "dtype", "scope", "loc", "strides", "base")

    def __init__(
        self,
        name: str,
        shape: tuple[Any, ...],
        dtype: DType,
        scope: str = "global",
        loc: SourceLoc | None = None,
        strides: tuple[Any, ...] | None = None,
        base: Buffer | None = None,
    ) -> None:
        self.name = name
        self.shape: tuple[E.Expr, ...] = tuple(E.convert(s) for s in shape)
        self.dtype = dtype
        self.scope = scope
        self.loc = loc
        self.strides = None if strides is None else tuple(E.convert(s) for s in strides)
        self.base = None if base is None else base.storage

    @property
    def storage(self) -> Buffer:
        """The buffer that owns this one's memory: its ``base`` for a view, else itself."""
        return self if self.base is None else self.base

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def data(self) -> BufferData:
        """The buffer's memory, as TileLang's ``T.Tensor(shape, dtype, buf.data)`` takes it to
        declare another view of it."""
        return BufferData(self)

    def static_shape(self) -> tuple[int, ...] | None:
        """The shape as Python ints, or ``None`` when a dimension is symbolic."""
        dims = [E.as_int(s) for s in self.shape]
        return None if any(d is None for d in dims) else tuple(dims)  # type: ignore[return-value]

    def __repr__(self) -> str:
        dims = ", ".join(str(s) for s in self.shape)
        of = "" if self.base is None else f" (view of {self.base.name})"
        return f"{self.name}: {self.scope}[{dims}] {self.dtype}{of}"

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    # ---- indexing ---------------------------------------------------------------------------
    def _normalize_index(self, idx: Any) -> tuple[Any, ...]:
        if not isinstance(idx, tuple):
            idx = (idx,)
        if len(idx) > self.ndim:
            raise OutOfBoundsError(
                f"{len(idx)} indices given for {self.ndim}-d buffer `{self.name}`",
                loc=caller_loc(),
            )
        for dim, i in enumerate(idx):
            self._check_index_entry(dim, i, idx)
        return idx

    def _check_index_entry(self, dim: int, i: Any, idx: tuple[Any, ...]) -> None:
        """Reject what Python sequences accept but a kernel index is not: a list, a literal negative
        int (a kernel index does not count from the end) and a literal int past a constant
        dimension (into a global tensor either would silently read 0 or drop the store)."""
        if isinstance(i, list):
            raise TileLangSyntaxError(
                f"a list is not an index of `{self.name}`", loc=caller_loc(),
                hint=f"give one int, loop variable or slice per dimension, e.g. `{self.name}[i, j]`")
        first = i.start if isinstance(i, slice) else i
        for b in ((i.start, i.stop) if isinstance(i, slice) else (i,)):
            if isinstance(b, int) and not isinstance(b, bool) and b < 0:
                raise OutOfBoundsError(
                    f"index {b} of `{self.name}` is negative: kernel indices do not count from the end",
                    loc=caller_loc(), hint=f"write the position from the start, e.g. `{self.name}.shape[k] - 1`")
        extent = E.as_int(self.shape[dim])
        if isinstance(first, int) and not isinstance(first, bool) and extent is not None and first >= extent \
                and self.scope != "barrier":  # T.alloc_barrier lists check their own indices
            access = ", ".join(_index_text(x) for x in idx)
            raise OutOfBoundsError(
                f"`{self.name}`[{access}]: index {first} is past the end of `{self.name}`, whose dimension {dim} has "
                f"{extent} elements", loc=caller_loc(), hint=f"indices of dimension {dim} run from 0 to {extent - 1}")

    def __getitem__(self, idx: Any) -> E.Load | Region | Packed:
        idx = self._normalize_index(idx)
        if packed.has_ramp(idx):
            return packed.load(self, idx)
        if len(idx) == self.ndim and not any(isinstance(i, slice) for i in idx):
            return E.Load(self, tuple(E.convert(i) for i in idx), caller_loc())
        return Region.from_index(self, idx)

    def __setitem__(self, idx: Any, value: Any) -> None:
        idx = self._normalize_index(idx)
        if packed.has_ramp(idx) or isinstance(value, Packed):
            packed.store(self, idx, value)
            return
        if len(idx) < self.ndim and not any(isinstance(i, slice) for i in idx):
            raise TileLangSyntaxError(
                f"`{self.name}` has {self.ndim} dimensions but the store gives {len(idx)} "
                f"ind{'ex' if len(idx) == 1 else 'ices'}", loc=caller_loc(),
                hint="index every dimension to store one element, or use T.copy / T.fill for a region",
            )
        if len(idx) != self.ndim or any(isinstance(i, slice) for i in idx):
            raise TileLangSyntaxError(
                f"assignment to a slice of `{self.name}` is not supported",
                loc=caller_loc(),
                hint="assign elements inside `for ... in T.Parallel(...)`, or use T.copy / T.fill",
            )
        if not _store_handler:
            raise TileLangSyntaxError(
                f"store to `{self.name}` outside a kernel being traced", loc=caller_loc()
            )
        indices = tuple(E.convert(i) for i in idx)
        _store_handler[-1](self, indices, E.cast(value, self.dtype))

    def access_all(self) -> Region:
        return Region.full(self)

    # A 1-element ``var`` buffer (T.alloc_var) reads as its value in expressions.
    def as_expr(self) -> E.Expr:
        if self.scope == "var" or (self.ndim == 1 and E.as_int(self.shape[0]) == 1 and self.scope == "local"):
            return E.Load(self, (E.const(0),), caller_loc())
        raise TileLangSyntaxError(
            f"buffer `{self.name}` used as a scalar value",
            loc=caller_loc(),
            hint=f"index it, e.g. `{self.name}[i, j]`",
        )


def _index_text(i: Any) -> str:
    if isinstance(i, slice):
        return f"{'' if i.start is None else i.start}:{'' if i.stop is None else i.stop}"
    return str(i)


#: the operators a stand-in for one value (a one-element buffer, ``T.Ref``) forwards to the
#: expression its ``as_expr()`` gives
VALUE_OPS = (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
    "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__neg__",
    "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__or__", "__xor__", "__invert__",
    "__lshift__", "__rshift__", "__pow__", "__abs__",
)


def forward_value_ops(cls: type) -> None:
    """Give ``cls`` (which has ``as_expr()``) the arithmetic and comparison operators of the value
    it stands for."""
    for name in VALUE_OPS:
        setattr(cls, name, _forward_to_value(name))


def _forward_to_value(name: str) -> Callable[..., Any]:
    def method(self: Any, *args: Any) -> Any:
        return getattr(self.as_expr(), name)(*args)

    method.__name__ = name
    return method


forward_value_ops(Buffer)


@dataclass(frozen=True, eq=False, slots=True)
class BufferData:
    """``buf.data``: the memory of ``buffer`` (see ``Buffer.data``)."""

    buffer: Buffer


@dataclass(frozen=True, eq=False, slots=True)
class Region:
    """A rectangular part of a buffer: per dimension a start and an extent."""

    buffer: Buffer
    starts: tuple[E.Expr, ...]
    extents: tuple[E.Expr, ...]

    @staticmethod
    def full(buffer: Buffer) -> Region:
        return Region(buffer, tuple(E.const(0) for _ in buffer.shape), buffer.shape)

    @staticmethod
    def from_index(buffer: Buffer, idx: tuple[Any, ...]) -> Region:
        starts: list[E.Expr] = []
        extents: list[E.Expr] = []
        for dim, i in enumerate(idx):
            if isinstance(i, slice):
                if i.step is not None and E.as_int(i.step) != 1:
                    raise TileLangSyntaxError(
                        f"strided slice of `{buffer.name}` is not supported", loc=caller_loc()
                    )
                lo = E.convert(0 if i.start is None else i.start)
                hi = buffer.shape[dim] if i.stop is None else E.convert(i.stop)
                size = E.as_int(hi - lo)
                if size is not None and size <= 0:
                    raise ShapeMismatchError(
                        f"slice {lo}:{hi} of `{buffer.name}` (dimension {dim}) is empty", loc=caller_loc(),
                        hint="a slice is start:stop with stop > start")
                starts.append(lo)
                extents.append(hi - lo)
            else:
                starts.append(E.convert(i))
                extents.append(E.const(1))
        for dim in range(len(idx), buffer.ndim):
            starts.append(E.const(0))
            extents.append(buffer.shape[dim])
        return Region(buffer, tuple(starts), tuple(extents))

    @property
    def shape(self) -> tuple[E.Expr, ...]:
        return self.extents

    @property
    def dtype(self) -> DType:
        return self.buffer.dtype

    def is_full(self) -> bool:
        return all(
            E.as_int(s) == 0 and (e is d or e.same_as(d))
            for s, e, d in zip(self.starts, self.extents, self.buffer.shape)
        )

    def structural_key(self) -> tuple:
        return (
            id(self.buffer),
            tuple(s.structural_key() for s in self.starts),
            tuple(e.structural_key() for e in self.extents),
        )

    def __repr__(self) -> str:
        from .printer import region_to_str

        return region_to_str(self)
