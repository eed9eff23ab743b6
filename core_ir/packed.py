"""TileLang's packed x2 values and the math on them (``T.add2`` ... ``T.abs2``).

TileLang types these operands as the vector dtypes ``float16x2``, ``bfloat16x2`` and
``float32x2``. The IR has scalar dtypes only, so a packed value is a trace-time ``Packed``: its two
lanes, each a scalar expression. A packed operation becomes one ``Call`` per result lane, named
``<op>.<lane>`` (``add2.0``, ``add2.1``) and taking the lanes of every operand in order
(``x0, x1, y0, y1``), so a backend can compute both lanes with one paired instruction, and the
interpreter computes lane ``k`` from the operands' lane ``k``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import dtypes
from . import expr as E
from .dtypes import DType
from .errors import TileLangTypeError
from .source import caller_loc

#: packed dtype name -> the dtype of its lanes
PACKED_DTYPES: dict[str, DType] = {
    "float16x2": dtypes.float16, "bfloat16x2": dtypes.bfloat16, "float32x2": dtypes.float32,
}
#: TileLang's packed x2 operations and their arity
PACKED_OPS: dict[str, int] = {"add2": 2, "sub2": 2, "mul2": 2, "fma2": 3, "max2": 2, "min2": 2, "abs2": 1}
LANES = 2


class PackedDType(str):
    """``T.float16x2`` and its siblings: the dtype's name (as TileLang's dtypes are strings), and
    called with two values, the packed value of them: ``T.float16x2(a, b)``."""

    @property
    def elem(self) -> DType:
        return PACKED_DTYPES[str(self)]

    def __call__(self, *values: Any) -> Packed:
        if len(values) != LANES:
            raise TileLangTypeError(f"T.{self}(...) takes {LANES} values, got {len(values)}", loc=caller_loc(),
                                    hint=f"T.{self}(lo, hi)")
        return Packed(tuple(E.cast(v, self.elem) for v in values), self.elem)


@dataclass(frozen=True, eq=False)
class Packed:
    """Two lanes of dtype ``elem``: TileLang's ``float16x2`` / ``bfloat16x2`` / ``float32x2`` value."""

    lanes: tuple[E.Expr, ...]
    elem: DType

    @property
    def dtype(self) -> PackedDType:
        return PackedDType(f"{self.elem.name}x{len(self.lanes)}")

    def __repr__(self) -> str:
        return f"T.{self.dtype}({', '.join(str(lane) for lane in self.lanes)})"

    def _refuse(self, *_: Any) -> Any:
        raise TileLangTypeError(f"Python operators on a packed {self.dtype} value are not supported", loc=caller_loc(),
                                hint="use T.add2, T.sub2, T.mul2, T.fma2, T.max2, T.min2, T.abs2")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __neg__ = __abs__ = _refuse
    __lt__ = __le__ = __gt__ = __ge__ = _refuse

    def __bool__(self) -> bool:
        raise TileLangTypeError(f"a packed {self.dtype} value has no truth value", loc=caller_loc())


def _operand(a: Any) -> Any:
    """``a``, or for a region of two elements along one dimension (``A[i:i + 2]``), their pair."""
    from .buffer import Region

    if isinstance(a, Region) and len(a.starts) == a.buffer.ndim:
        idx = tuple(slice(s, s + e) if E.as_int(e) != 1 else s for s, e in zip(a.starts, a.extents))
        ramped = _slice_as_ramp(a.buffer, idx)
        if ramped is not None:
            return load(a.buffer, ramped)
    return a


def _check(name: str, args: tuple[Any, ...]) -> DType:
    """The lane dtype shared by ``args``; a ``TileLangTypeError`` naming the line otherwise."""
    for a in args:
        if not isinstance(a, Packed):
            what = a.dtype if isinstance(a, E.Expr) else type(a).__name__
            raise TileLangTypeError(
                f"T.{name} takes packed float16x2, bfloat16x2 or float32x2 values, got {what}", loc=caller_loc(),
                hint="make one with T.float16x2(a, b) (or bfloat16x2 / float32x2), or load two elements with "
                     "A[T.Ramp(i, 1, 2)]")
    kinds = {a.dtype for a in args}
    if len(kinds) > 1:
        raise TileLangTypeError(f"T.{name} operands must have the same dtype, got {', '.join(sorted(kinds))}",
                                loc=caller_loc(), hint="convert the lanes with T.cast before packing them")
    return args[0].elem


def apply(name: str, *args: Any) -> Packed:
    """``T.<name>(*args)`` for a ``PACKED_OPS`` name."""
    arity = PACKED_OPS[name]
    if len(args) != arity:
        raise TileLangTypeError(f"T.{name} takes {arity} packed values, got {len(args)}", loc=caller_loc())
    args = tuple(_operand(a) for a in args)
    elem = _check(name, args)
    flat = tuple(lane for a in args for lane in a.lanes)
    return Packed(tuple(E.Call(f"{name}.{k}", flat, elem) for k in range(LANES)), elem)


def packed_parts(name: str) -> tuple[str, int] | None:
    """``(operation, lane)`` of a packed lane ``Call`` name (``add2.1``), else ``None``."""
    base, _, lane = name.partition(".")
    return (base, int(lane)) if base in PACKED_OPS and lane.isdigit() else None


def lane_operands(args: tuple[Any, ...], lane: int) -> tuple[Any, ...]:
    """The operands of lane ``lane`` among a packed ``Call``'s flattened ``args``."""
    return tuple(args[lane::LANES])


@dataclass(frozen=True, eq=False)
class Ramp:
    """``T.Ramp(base, stride, lanes)``: the indices ``base + k * stride`` of a packed access
    ``A[T.Ramp(i, 1, 2)]`` (a load of two elements; as a store target, a store of two)."""

    base: E.Expr
    stride: E.Expr
    lanes: int

    def index(self, k: int) -> E.Expr:
        return E.binary("+", self.base, E.binary("*", self.stride, k))


def ramp(base: Any, stride: Any, lanes: Any) -> Ramp:
    """``T.Ramp(base, stride, lanes)``; packed values have two lanes, so ``lanes`` must be 2."""
    if E.as_int(lanes) != LANES:
        raise TileLangTypeError(f"T.Ramp with {lanes} lanes: packed values have {LANES}", loc=caller_loc(),
                                hint=f"T.Ramp(base, stride, {LANES}) for the operands of T.add2 and the others")
    return Ramp(E.convert(base), E.convert(stride), LANES)


def _lane_index(idx: tuple[Any, ...], k: int) -> tuple[Any, ...]:
    return tuple(i.index(k) if isinstance(i, Ramp) else i for i in idx)


def has_ramp(idx: tuple[Any, ...]) -> bool:
    return any(isinstance(i, Ramp) for i in idx)


def _slice_as_ramp(buffer: Any, idx: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """``idx`` with its one slice ``i:i + 2`` as ``T.Ramp(i, 1, 2)``, as TVM reads ``A[i:i + 2]``
    where a packed value goes; ``None`` for any other index."""
    from .simplify import simplify

    dims = [k for k, i in enumerate(idx) if isinstance(i, slice)]
    if len(idx) != buffer.ndim or len(dims) != 1:
        return None
    k = dims[0]
    s = idx[k]
    if s.start is None or s.stop is None or (s.step is not None and E.as_int(s.step) != 1):
        return None
    lo = E.convert(s.start)
    if E.as_int(simplify(E.convert(s.stop) - lo)) != LANES:
        return None
    return (*idx[:k], Ramp(lo, E.const(1), LANES), *idx[k + 1:])


def load(buffer: Any, idx: tuple[Any, ...]) -> Packed:
    """``buffer[idx]`` with a ``Ramp`` among ``idx``: the packed value of the elements it names."""
    if buffer.dtype.name not in {d.name for d in PACKED_DTYPES.values()}:
        raise TileLangTypeError(f"a packed load of `{buffer.name}` ({buffer.dtype}): packed values are float16, "
                                "bfloat16 or float32", loc=caller_loc())
    if sum(isinstance(i, Ramp) for i in idx) != 1:
        raise TileLangTypeError("a packed access takes one T.Ramp index", loc=caller_loc())
    return Packed(tuple(buffer[_lane_index(idx, k)] for k in range(LANES)), buffer.dtype)


def store(buffer: Any, idx: tuple[Any, ...], value: Any) -> None:
    """``buffer[idx] = value`` with a ``Ramp`` (or a slice ``i:i + 2``) among ``idx``: one store per
    lane of ``value``."""
    if not has_ramp(idx):
        idx = _slice_as_ramp(buffer, idx) or idx
    if not has_ramp(idx):
        raise TileLangTypeError(f"a packed {value.dtype} value stored to `{buffer.name}` at an index that is not "
                                "a pair of elements", loc=caller_loc(),
                                hint=f"store its two lanes at {buffer.name}[T.Ramp(i, 1, 2)] or {buffer.name}[i:i + 2]")
    if not isinstance(value, Packed) or sum(isinstance(i, Ramp) for i in idx) != 1:
        raise TileLangTypeError(f"a store to `{buffer.name}` at a T.Ramp index takes one packed value",
                                loc=caller_loc(), hint="store T.add2(...) and the others, or T.float16x2(a, b)")
    for k, lane in enumerate(value.lanes):
        buffer[_lane_index(idx, k)] = lane


def reinterpret(dtype: Any, value: Any) -> Packed | E.Expr:
    """``T.reinterpret`` to or from a packed dtype: the lanes' bits, lane 0 in the low half."""
    if isinstance(value, Packed):
        if isinstance(dtype, str) and dtype in PACKED_DTYPES:
            raise TileLangTypeError(f"T.reinterpret of a packed {value.dtype} value as {dtype}", loc=caller_loc(),
                                    hint="reinterpret its lanes one by one")
        dt = dtypes.as_dtype(dtype)
        bits = value.elem.bits
        if dt.bits != bits * LANES or dt.is_bool:
            raise TileLangTypeError(
                f"T.reinterpret of a packed {value.dtype} value as {dt}: the widths differ "
                f"({bits * LANES} and {dt.bits} bits)", loc=caller_loc(),
                hint=f"reinterpret it as a {bits * LANES}-bit type, e.g. uint{bits * LANES}")
        word = dtypes.as_dtype(f"uint{bits * LANES}")
        half = dtypes.as_dtype(f"uint{bits}")
        parts = [E.cast(E.reinterpret(half, lane), word) for lane in value.lanes]
        return E.reinterpret(dt, parts[0] | (parts[1] << bits))
    pdt = PackedDType(dtype)
    elem = pdt.elem
    e = E.convert(value)
    if e.dtype.bits != elem.bits * LANES or e.dtype.is_bool:
        raise TileLangTypeError(
            f"T.reinterpret of a {e.dtype} value as {pdt}: the widths differ ({e.dtype.bits} and "
            f"{elem.bits * LANES} bits)", loc=caller_loc(), hint=f"reinterpret a uint{elem.bits * LANES} value")
    word = E.reinterpret(dtypes.as_dtype(f"uint{e.dtype.bits}"), e)
    half = dtypes.as_dtype(f"uint{elem.bits}")
    mask = (1 << elem.bits) - 1
    lanes = (E.cast(word & mask, half), E.cast(word >> elem.bits, half))
    return Packed(tuple(E.reinterpret(elem, lane) for lane in lanes), elem)
