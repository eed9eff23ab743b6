"""16-bit float arithmetic on CUDA rounds every operation to its dtype, as the interpreter does
(plugins/cuda/narrow_math.py): a narrow result another operation consumes is rounded unless it is
provably exact, and narrow literals take their value in the dtype."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source

N = 256


def _chain(dtype: str):
    @T.prim_func
    def chain(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                a, b = A[bx * 128 + i], B[bx * 128 + i]
                C[bx * 128 + i] = (a - b) * a * T.cast(0.1, dtype) + T.max(a, b)

    return chain


def _unpack():
    @T.prim_func
    def unpack(P: T.Tensor((N,), T.uint8), S: T.Tensor((N,), T.float16), W: T.Tensor((N,), T.float16),
               V: T.Tensor((N,), T.float16)):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                q = T.bitwise_and(P[bx * 128 + i], 0xF)
                W[bx * 128 + i] = (T.cast(q, T.float16) - T.float16(8)) * S[bx * 128 + i]
                magic = T.reinterpret(T.float16, T.bitwise_or(T.cast(q, T.uint16), T.uint16(0x6400)))
                V[bx * 128 + i] = (magic - T.float16(1032)) * S[bx * 128 + i]

    return unpack


def _body(func, arch: str = "sm_90a") -> str:
    src, _ = cuda_source(func, arch)
    return src[src.index("__global__"):]


@pytest.mark.parametrize(("dtype", "to"), [("float16", "tlx_f2h"), ("bfloat16", "tlx_f2b")])
def test_each_inexact_operation_of_a_chain_is_rounded(dtype: str, to: str) -> None:
    store = next(line for line in _body(_chain(dtype)).splitlines() if "C[" in line)
    # a - b, (a - b) * a and the product with the literal; the sum is rounded by the store; the
    # max is one of its operands
    assert store.count(f"{to}(") == 4, store
    assert "fmaxf" in store


def test_float16_literals_take_their_float16_value() -> None:
    body = _body(_chain("float16"))
    assert "0.0999755859375f" in body and "0.1f" not in body


def test_bfloat16_literals_take_their_bfloat16_value() -> None:
    body = _body(_chain("bfloat16"))
    assert "0.10009765625f" in body


def test_small_integers_are_exact_and_stay_unrounded() -> None:
    body = _body(_unpack())
    w = next(line for line in body.splitlines() if "W[" in line)
    v = next(line for line in body.splitlines() if "V[" in line)
    assert w.count("tlx_f2h(") == 1, w  # (q - 8) is exact; only the store rounds
    assert v.count("tlx_f2h(") == 1, v  # 0x6400 | q read as float16 is 1024 + q: exact minus 1032


def _inputs(dtype: str) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(5)
    a = torch.randn(N, generator=gen).to(getattr(torch, dtype))
    b = torch.randn(N, generator=gen).to(getattr(torch, dtype))
    return a, b


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_interpreter_rounds_every_operation_as_torch_does(dtype: str) -> None:
    a, b = _inputs(dtype)
    c = torch.empty_like(a)
    tilelang.compile(_chain(dtype), target="interp")(a, b, c)
    tdt = getattr(torch, dtype)
    ref = (a - b) * a * torch.tensor(0.1, dtype=tdt) + torch.maximum(a, b)
    assert torch.equal(c, ref)
    fused = ((a.float() - b.float()) * a.float() * 0.1 + torch.maximum(a, b).float()).to(tdt)
    assert not torch.equal(c, fused)  # the chain is one where rounding once would differ
