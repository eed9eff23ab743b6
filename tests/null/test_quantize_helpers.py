"""``tilelang.quantize``'s unpacking builders (TileLang's dequantization examples call them inside
kernels), run in the interpreter on every byte and checked against numpy / torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tilelang_x import quantize
from tilelang_x.core_ir.errors import NotSupportedError

BYTES = torch.arange(256, dtype=torch.uint8)


def _unpack(convert, nbit: int, out_dtype, zero: int | None = None) -> torch.Tensor:
    per_byte = 8 // nbit

    @T.prim_func
    def main(B: T.Tensor((256,), T.uint8), Out: T.Tensor((256, 8 // nbit), out_dtype)):
        with T.Kernel(1, threads=128):
            for i, p in T.Parallel(256, per_byte):
                if zero is None:
                    Out[i, p] = convert(nbit, B[i], p, dtype=out_dtype)
                else:
                    Out[i, p] = convert(nbit, B[i], p, zero, dtype=out_dtype)

    return tilelang.compile(main, out_idx=[-1], target="interp")(BYTES)


def _fields(nbit: int) -> np.ndarray:
    b = BYTES.numpy().astype(np.int64)
    return np.stack([(b >> (p * nbit)) & ((1 << nbit) - 1) for p in range(8 // nbit)], 1)


@pytest.mark.parametrize("nbit", [2, 4])
def test_integer_fields(nbit: int) -> None:
    f = _fields(nbit)
    unsigned = _unpack(quantize._tir_packed_to_unsigned_convert("uint", 8), nbit, T.int32)
    assert np.array_equal(unsigned.numpy(), f)
    offset = _unpack(quantize._tir_packed_to_signed_convert("uint", 8), nbit, T.int32)
    assert np.array_equal(offset.numpy(), f - (1 << (nbit - 1)))
    twos = _unpack(quantize._tir_packed_int_to_int_convert("int", 8), nbit, T.int32)
    assert np.array_equal(twos.numpy(), np.where(f >= 1 << (nbit - 1), f - (1 << nbit), f))
    zeroed = _unpack(quantize._tir_packed_to_unsigned_convert_with_zeros("uint", 8), nbit, T.float16, zero=3)
    assert np.array_equal(zeroed.float().numpy(), f - 3)


def test_fp4_fields_as_documented() -> None:
    f = _fields(4)
    x, sign = f & 7, np.where(f >> 3, -1.0, 1.0)
    want = np.where(x == 0, 0.0, sign * 2.0 ** (x - 7))
    got = _unpack(quantize._tir_packed_to_fp4_to_f16("uint", 8), 4, T.float16)
    assert np.array_equal(got.float().numpy(), want)


def test_e4m3_bytes_match_torch() -> None:
    @T.prim_func
    def main(B: T.Tensor((256,), T.uint8), Out: T.Tensor((256,), T.float16)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(256):
                Out[i] = quantize._tir_u8_to_f8_e4m3_to_f16(8, B[i], "float16")

    got = tilelang.compile(main, out_idx=[-1], target="interp")(BYTES)
    want = BYTES.view(torch.float8_e4m3fn).to(torch.float16)
    finite = ~torch.isnan(want)
    assert torch.equal(got[finite], want[finite]) and got[~finite].abs().eq(480).all()


def test_host_helpers_are_refused_with_a_hint() -> None:
    with pytest.raises(NotSupportedError, match="tilelang.quantize.interleave_weight is not supported"):
        _ = quantize.interleave_weight
