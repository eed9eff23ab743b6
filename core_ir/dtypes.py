"""Scalar data types of the IR.

A ``DType`` is a small immutable value. ``as_dtype`` accepts every spelling users write:
``T.float16``, ``"float16"``, ``torch.float16`` (recognised by its text, so torch is never
imported here) and numpy dtypes.
"""

from __future__ import annotations

from typing import Any

from .errors import TileLangTypeError


class DType(str):
    """A scalar type: ``kind`` is one of ``float``, ``int``, ``uint``, ``bool``.

    As in TileLang (whose dtypes are strings), a dtype *is* its name: ``T.bfloat16 == "bfloat16"``,
    and host code may write ``getattr(torch, T.bfloat16)`` or format it. Immutable; copies and
    pickles come back as the same object (``as_dtype`` of the name)."""

    name: str
    kind: str
    bits: int

    def __new__(cls, name: str, kind: str, bits: int) -> DType:
        self = super().__new__(cls, name)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "bits", bits)
        return self

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"dtype {self.name} is immutable")

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return as_dtype, (self.name,)

    def __copy__(self) -> DType:
        return self

    def __deepcopy__(self, memo: Any) -> DType:
        return self

    @property
    def bytes(self) -> int:
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    def __repr__(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name

    def __call__(self, value: Any) -> Any:
        """``T.float32(x)``: cast ``x`` to this dtype."""
        from . import expr

        return expr.cast(value, self)

    def as_torch(self) -> Any:
        """The torch dtype (TileLang's ``T.dtype(...).as_torch()``); imports torch."""
        import torch

        from .errors import ArgumentError

        found = getattr(torch, TORCH_NAMES.get(self.name, self.name), None)
        if found is None:
            raise ArgumentError(f"torch has no dtype for {self}")
        return found


float16 = DType("float16", "float", 16)
bfloat16 = DType("bfloat16", "float", 16)
float32 = DType("float32", "float", 32)
float64 = DType("float64", "float", 64)
float8_e4m3 = DType("float8_e4m3", "float", 8)
float8_e5m2 = DType("float8_e5m2", "float", 8)
int8 = DType("int8", "int", 8)
int16 = DType("int16", "int", 16)
int32 = DType("int32", "int", 32)
int64 = DType("int64", "int", 64)
uint8 = DType("uint8", "uint", 8)
uint16 = DType("uint16", "uint", 16)
uint32 = DType("uint32", "uint", 32)
uint64 = DType("uint64", "uint", 64)
bool_ = DType("bool", "bool", 1)

#: torch attribute names of the dtypes whose names differ
TORCH_NAMES = {"float8_e4m3": "float8_e4m3fn"}

ALL: tuple[DType, ...] = (
    float16, bfloat16, float32, float64, float8_e4m3, float8_e5m2,
    int8, int16, int32, int64, uint8, uint16, uint32, uint64, bool_,
)

_ALIASES: dict[str, DType] = {d.name: d for d in ALL}
_ALIASES.update({
    "half": float16, "float": float32, "double": float64, "bf16": bfloat16, "fp16": float16,
    "fp32": float32, "float8_e4m3fn": float8_e4m3, "e4m3": float8_e4m3, "e5m2": float8_e5m2,
    "int": int32, "long": int64, "boolean": bool_,
    # TVM's older spellings of the 8-bit floats (TileLang's DeepGEMM fp8 example)
    "e4m3_float8": float8_e4m3, "e5m2_float8": float8_e5m2,
})


def as_dtype(value: Any) -> DType:
    """Convert a user's dtype spelling to a ``DType``; raise ``TileLangTypeError`` if unknown."""
    if isinstance(value, DType):
        return value
    if value is bool:
        return bool_
    if value is int:
        return int32
    if value is float:
        return float32
    text = value if isinstance(value, str) else str(value)
    text = text.removeprefix("torch.").removeprefix("numpy.")
    if text.startswith("<class 'numpy."):
        text = text[len("<class 'numpy."):-2]
    found = _ALIASES.get(text)
    if found is None:
        names = ", ".join(d.name for d in ALL)
        hint = f"use one of: {names}"
        if text.endswith("x2") and text[:-2] in _ALIASES:  # T.float16x2 and its siblings: packed pairs
            hint = f"{text} is a packed pair, not an element dtype: hold {text[:-2]} elements and read two " \
                   "with A[T.Ramp(i, 1, 2)]"
        raise TileLangTypeError(f"unknown dtype {value!r}", hint=hint)
    return found


def promote(a: DType, b: DType) -> DType:
    """The dtype of a binary arithmetic result on operands of dtypes ``a`` and ``b``."""
    if a == b:
        return a
    if a.is_float != b.is_float:
        return a if a.is_float else b
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    if a.is_float:
        return float32  # float16 with bfloat16, or two 8-bit floats
    return a if a.kind == "int" else b
