"""Numbers as the interpreter holds them: storage dtypes, conversions and correct rounding.

Every IR dtype has a numpy *storage* dtype. Most are the obvious one; ``bfloat16`` and the two
``float8`` formats have none in numpy, so their values live in ``float32`` arrays that only ever
hold values representable in the narrow format: every producer of such a value (a constant, a
cast, an arithmetic result, a store from another dtype) rounds it with the functions below.

Rounding rules (they match torch's conversions, which the tests check):

- ``bfloat16``: IEEE round-to-nearest-even, overflow to ±inf, NaN stays NaN.
- ``float8_e4m3`` (the ``fn`` variant: max 448, no infinities): round-to-nearest-even, values
  beyond ±448 and ±inf *saturate* to ±448, NaN stays NaN.
- ``float8_e5m2`` (IEEE-like, max 57344): round-to-nearest-even, overflow to ±inf, NaN stays NaN.

Conversions to integers truncate toward zero and wrap like C (numpy ``astype``).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from tilelang_x.core_ir.dtypes import DType

_STORAGE: dict[str, np.dtype] = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(np.float32),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "float8_e4m3": np.dtype(np.float32),
    "float8_e5m2": np.dtype(np.float32),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
    "bool": np.dtype(np.bool_),
}

#: dtypes held in float32 storage and rounded by ``round_to``.
NARROW_FLOATS = ("bfloat16", "float8_e4m3", "float8_e5m2")


def storage_dtype(dt: DType) -> np.dtype:
    """The numpy dtype that holds values of IR dtype ``dt``."""
    try:
        return _STORAGE[dt.name]
    except KeyError:
        from tilelang_x.core_ir.errors import BackendNotImplementedError

        raise BackendNotImplementedError(f"the interpreter has no storage for dtype {dt}") from None


def is_narrow(dt: DType) -> bool:
    """Whether ``dt`` is stored in float32 and rounded on every conversion."""
    return dt.name in NARROW_FLOATS


# ---- rounding to narrow float formats --------------------------------------------------------

def _bf16_from_f32(x: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 precision (nearest even), returned as float32."""
    bits = x.view(np.uint32)
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) & np.uint32(0xFFFF0000)
    out = rounded.view(np.float32)
    nan = np.isnan(x)
    if nan.any():
        out = np.where(nan, np.float32(np.nan), out)
    return out


# (mantissa bits, smallest normal exponent, largest finite value, saturate on overflow)
_FORMATS: dict[str, tuple[int, int, float, bool]] = {
    "bfloat16": (7, -126, float.fromhex("0x1.fep127"), False),
    "float8_e4m3": (3, -6, 448.0, True),
    "float8_e5m2": (2, -14, 57344.0, False),
}


def _round_generic(x: np.ndarray, name: str) -> np.ndarray:
    """Round float64 values to the format ``name`` exactly (nearest even, subnormals included)."""
    mant, emin, max_finite, saturate = _FORMATS[name]
    ax = np.abs(x)
    _, e = np.frexp(ax)  # ax = f * 2**e with f in [0.5, 1)
    exp = np.maximum(e.astype(np.int64) - 1, emin)
    quantum = np.ldexp(1.0, (exp - mant).astype(np.int32))
    r = np.rint(x / quantum) * quantum  # x / quantum is exact: quantum is a power of two
    over = np.abs(r) > max_finite  # false for NaN
    if over.any():
        big = max_finite if saturate else np.inf
        r = np.where(over, np.copysign(big, x), r)
    return r


def round_to(values: Any, dt: DType) -> Any:
    """Round ``values`` (any numeric numpy value) to the narrow float ``dt``; float32 result
    (a numpy scalar for a scalar input)."""
    arr = np.asarray(values)
    scalar = arr.ndim == 0 and not isinstance(values, np.ndarray)
    exact_in_f32 = arr.dtype in (np.float32, np.float16) or (arr.dtype.kind in "iub" and arr.dtype.itemsize <= 2)
    if dt.name == "bfloat16" and exact_in_f32:
        out = _bf16_from_f32(np.ascontiguousarray(arr, dtype=np.float32)).reshape(arr.shape)  # (0-d stays 0-d)
    else:
        out = _round_generic(arr.astype(np.float64), dt.name).astype(np.float32)
    return out[()] if scalar else out


# ---- bit patterns (T.reinterpret) --------------------------------------------------------------

_UINTS = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32), 64: np.dtype(np.uint64)}
# float8 formats: (mantissa bits, exponent bias, has infinities)
_FP8: dict[str, tuple[int, int, bool]] = {"float8_e4m3": (3, 7, False), "float8_e5m2": (2, 15, True)}


@functools.cache
def _fp8_values(name: str) -> np.ndarray:
    """The float32 value of each of the 256 codes of a float8 format."""
    mant, bias, has_inf = _FP8[name]
    codes = np.arange(256)
    e_max = (1 << (7 - mant)) - 1
    e, m = (codes >> mant) & e_max, codes & ((1 << mant) - 1)
    mag = np.where(e == 0, m * 2.0 ** (1 - bias - mant), (1 + m / (1 << mant)) * 2.0 ** (e - bias))
    special = (e == e_max) & ((m == (1 << mant) - 1) if not has_inf else True)
    mag = np.where(special, np.where(m == 0, np.inf, np.nan) if has_inf else np.nan, mag)
    return np.where(codes >> 7, -mag, mag).astype(np.float32)


@functools.cache
def _fp8_lookup(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(sorted float32 bit patterns, their codes) of the non-NaN codes of a float8 format."""
    values = _fp8_values(name)
    codes = np.flatnonzero(~np.isnan(values))
    keys = values[codes].view(np.uint32)
    order = np.argsort(keys)
    return keys[order], codes[order].astype(np.uint8)


def to_bits(values: Any, dt: DType) -> Any:
    """The bit patterns of values of dtype ``dt`` (held in its storage), as unsigned integers of
    ``dt``'s width."""
    arr = np.asarray(values)
    if dt.name == "bfloat16":
        out = (arr.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    elif dt.name in _FP8:
        keys, codes = _fp8_lookup(dt.name)
        f32 = arr.astype(np.float32)
        found = codes[np.searchsorted(keys, f32.view(np.uint32)).clip(0, len(keys) - 1)]
        out = np.where(np.isnan(f32), np.uint8(0x7F) | (np.signbit(f32).astype(np.uint8) << np.uint8(7)), found)
    else:
        out = np.asarray(arr, dtype=storage_dtype(dt)).view(_UINTS[dt.bits])
    return out if isinstance(values, np.ndarray) else out[()]


def from_bits(bits: Any, dt: DType) -> Any:
    """Values of dtype ``dt`` (its storage) with the given bit patterns (unsigned integers)."""
    arr = np.asarray(bits).astype(_UINTS[dt.bits])
    if dt.name == "bfloat16":
        out = (arr.astype(np.uint32) << np.uint32(16)).view(np.float32)
    elif dt.name in _FP8:
        out = _fp8_values(dt.name)[arr]
    else:
        out = arr.view(storage_dtype(dt))
    return out if isinstance(bits, np.ndarray) else out[()]


# ---- conversions -------------------------------------------------------------------------------

def convert(values: Any, dt: DType, src: DType | None = None) -> Any:
    """Convert ``values`` to dtype ``dt`` with C cast semantics and correct rounding, returning
    the storage representation (a numpy scalar for a scalar input). ``src`` is the IR dtype the
    values have, when known; a conversion to the same dtype is then free."""
    if src is not None and src == dt:
        return values
    if is_narrow(dt):
        if (src is not None and src.is_bool) or getattr(values, "dtype", None) == np.bool_:
            values = np.asarray(values).astype(np.float32)
        return round_to(values, dt)
    target = _STORAGE.get(dt.name)
    if target is None:
        storage_dtype(dt)  # raises
    if isinstance(values, (np.ndarray, np.generic)):
        if values.dtype == target:
            return values
        return values.astype(target)
    return np.asarray(values).astype(target)[()]


def scalar(value: Any, dt: DType) -> Any:
    """A numpy scalar of ``dt``'s storage type for a Python number (integers wrap like C)."""
    target = storage_dtype(dt)
    if is_narrow(dt):
        return round_to(np.float64(value), dt)
    if dt.is_bool:
        return np.bool_(bool(value))
    if dt.is_int:
        v = int(value)
        info = np.iinfo(target)
        if not info.min <= v <= info.max:
            bits = 8 * target.itemsize
            v &= (1 << bits) - 1
            if dt.kind == "int" and v >= 1 << (bits - 1):
                v -= 1 << bits
        return target.type(v)
    return target.type(value)


def zeros(shape: tuple[int, ...], dt: DType) -> np.ndarray:
    """A zero-filled array for a buffer of dtype ``dt``."""
    return np.zeros(shape, dtype=storage_dtype(dt))


def compute_dtype(dt: DType) -> np.dtype:
    """The dtype tile ops (gemm, reduce, cumsum) accumulate in for operands of dtype ``dt``."""
    if dt.is_float:
        return np.dtype(np.float64) if dt.name == "float64" else np.dtype(np.float32)
    if dt.is_bool:
        return np.dtype(np.int64)
    return np.dtype(np.uint64) if dt.kind == "uint" else np.dtype(np.int64)
