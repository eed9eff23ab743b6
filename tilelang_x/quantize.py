"""``tilelang.quantize``: the expression builders TileLang's dequantization examples call inside a
kernel to unpack narrow values from a wider storage word, e.g.::

    decode = _tir_packed_to_unsigned_convert("uint", 8)
    B_f[i, j] = decode(4, B_packed[i, j // 2], j % 2, dtype=T.float16)  # the j % 2-th nibble

Each ``_tir_packed_*(storage_type, storage_nbit)`` returns ``f(nbit, val, pos, dtype)``: field ``pos``
of ``nbit`` bits of ``val`` (lowest first), converted to ``dtype``:

- ``_tir_packed_to_unsigned_convert``: the field as an unsigned integer;
- ``_tir_packed_to_unsigned_convert_with_zeros``: ``f(nbit, val, pos, zero, dtype)``, the field minus ``zero``;
- ``_tir_packed_to_signed_convert``: the field minus ``2 ** (nbit - 1)`` (offset binary);
- ``_tir_packed_int_to_int_convert``: the field as a two's-complement ``nbit``-bit integer;
- ``_tir_packed_to_fp4_to_f16``: a 4-bit float (sign, then 3 bits ``x``) as float16: 0 when ``x`` is 0,
  else the float16 whose exponent field is ``8 + x`` and mantissa 0, i.e. ``±2 ** (x - 7)``.

``_tir_u8_to_f8_e4m3_to_f16(nbit, val, dtype)`` turns the byte ``val`` (float8 e4m3 bits) into
float16. The host-side helpers of TileLang's module (``get_lop3_intrin_group``, ``gen_quant4``,
``general_compress``, ``interleave_weight``) are not provided.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .core_ir import expr as E
from .core_ir.dtypes import as_dtype
from .core_ir.errors import NotSupportedError

Convert = Callable[..., E.Expr]


def _field(val: Any, pos: Any, nbit: int, word: str) -> E.Expr:
    """Bits ``[pos * nbit, (pos + 1) * nbit)`` of ``val`` as an unsigned ``word``."""
    v = E.cast(val, word)
    return (v >> E.cast(E.convert(pos) * nbit, word)) & E.const((1 << nbit) - 1, as_dtype(word))


def _unsigned_word(val: Any) -> str:
    return f"uint{max(E.convert(val).dtype.bits, 32)}"


def _tir_packed_to_unsigned_convert(storage_type: str = "uint", storage_nbit: int = 8) -> Convert:
    def f_convert(nbit: int, val: Any, pos: Any, dtype: Any) -> E.Expr:
        return E.cast(_field(val, pos, nbit, _unsigned_word(val)), dtype)

    return f_convert


def _tir_packed_to_unsigned_convert_with_zeros(storage_type: str = "uint", storage_nbit: int = 8) -> Convert:
    def f_convert(nbit: int, val: Any, pos: Any, zero: Any, dtype: Any) -> E.Expr:
        return E.cast(E.cast(_field(val, pos, nbit, _unsigned_word(val)), "int32") - zero, dtype)

    return f_convert


def _tir_packed_to_signed_convert(storage_type: str = "uint", storage_nbit: int = 8) -> Convert:
    def f_convert(nbit: int, val: Any, pos: Any, dtype: Any) -> E.Expr:
        return E.cast(_field(val, pos, nbit, _unsigned_word(val)), dtype) - E.cast(1 << (nbit - 1), dtype)

    return f_convert


def _tir_packed_int_to_int_convert(storage_type: str = "uint", storage_nbit: int = 8) -> Convert:
    def f_convert(nbit: int, val: Any, pos: Any, dtype: Any) -> E.Expr:
        field = E.cast(_field(val, pos, nbit, "uint32"), "int32")
        return E.cast((field << (32 - nbit)) >> (32 - nbit), dtype)  # arithmetic shift: the sign

    return f_convert


def _tir_packed_to_fp4_to_f16(storage_type: str = "uint", storage_nbit: int = 8) -> Convert:
    def f_convert(nbit: int, val: Any, pos: Any, dtype: Any) -> E.Expr:
        if nbit != 4:
            raise NotSupportedError(f"_tir_packed_to_fp4_to_f16 unpacks 4-bit fields, got nbit={nbit}")
        f4 = _field(val, pos, 4, "uint32")
        x = f4 & 7
        bits = ((f4 >> 3) << 15) | ((x | 8) << 10)
        half = E.reinterpret("float16", E.cast(bits, "uint16"))
        return E.cast(E.select(E.binary("==", x, 0), E.const(0.0, as_dtype("float16")), half), dtype)

    return f_convert


def _tir_u8_to_f8_e4m3_to_f16(nbit: int, val: Any, dtype: Any) -> E.Expr:
    """float8 e4m3 bits to float16, exactly (e4m3fn's NaN pattern becomes 480): a normal value's
    exponent and mantissa move into float16's fields with the bias grown from 7 to 15, a subnormal
    one (exponent 0) is its mantissa times 2^-9."""
    v = E.cast(val, "uint32")
    negative = E.binary("==", v >> 7, 1)
    normal = E.reinterpret("float16", E.cast(((v >> 7) << 15) | (((v & 0x7F) << 7) + (8 << 10)), "uint16"))
    small = E.cast(v & 7, "float32") * (2.0 ** -9)
    subnormal = E.cast(E.select(negative, -small, small), "float16")
    return E.cast(E.select(E.binary("==", v & 0x78, 0), subnormal, normal), dtype)


def __getattr__(name: str) -> Any:
    raise NotSupportedError(f"tilelang.quantize.{name} is not supported by tilelang-x",
                            hint="unpack with the _tir_packed_* builders here, or with shifts and masks in the "
                            "kernel (T.reinterpret for the bit patterns of floats)")
