"""16-bit fragment elements computed in pairs (plugins/cuda/half_pairs.py, ``tlx.half_pairs``):
f16x2 / bf16x2 arithmetic on adjacent register slots, 4-bit codes through their float16 bits."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import dequant
from tests.null.cuda_helpers import cuda_source

M, N = 64, 64


def elementwise(dtype: str):
    """Every paired form: loads, literals, a float32 cast, +, -, *, max, min, and codes."""

    @T.prim_func
    def pairs(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), X: T.Tensor((M, N), T.float32),
              P: T.Tensor((M, N), T.uint8), C: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((M, N), dtype)
            for i, j in T.Parallel(M, N):
                a, b = A[i, j], B[i, j]
                code = T.cast(T.bitwise_and(P[i, j], 0xF), dtype) - T.cast(3, dtype)
                F[i, j] = T.min(T.max((a - b) * a + T.cast(X[i, j], dtype), b * T.cast(0.3, dtype)), a) + code
            T.copy(F, C)

    return pairs


def _inputs(dtype: str) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(11)
    tdt = getattr(torch, dtype)
    a, b = (torch.randn(M, N, generator=gen).to(tdt) for _ in range(2))
    x = torch.randn(M, N, generator=gen) * 3
    p = torch.randint(0, 256, (M, N), generator=gen, dtype=torch.uint8)
    return [a, b, x, p, torch.empty(M, N, dtype=tdt)]


def reference(dtype: str, a: torch.Tensor, b: torch.Tensor, x: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    tdt = getattr(torch, dtype)
    code = (p & 15).to(tdt) - torch.tensor(3, dtype=tdt)
    inner = torch.maximum((a - b) * a + x.to(tdt), b * torch.tensor(0.3, dtype=tdt))
    return torch.minimum(inner, a) + code


def _store(src: str) -> str:
    return next(line for line in src.splitlines() if "tlx_st2_" in line and "(&F[" in line)


@pytest.mark.parametrize(("dtype", "suffix"), [("float16", "h"), ("bfloat16", "b")])
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_a_16_bit_fragment_is_computed_in_pairs(dtype: str, suffix: str, arch: str) -> None:
    store = _store(cuda_source(elementwise(dtype), arch)[0])
    for op in ("add", "sub", "mul", "max", "min"):
        assert f"tlx_{op}2_{suffix}(" in store, op
    cvt = "tlx_cvt_h2" if dtype == "float16" else "tlx_cvt_b2"
    assert f"{cvt}(X[" in store  # the float32 cast: both rounded by one instruction
    assert ("0x64006400u | " if dtype == "float16" else "0x43004300u | ") in store  # the codes' bits
    assert "tlx_f2h(" not in store and "tlx_f2b(" not in store


def test_codes_minus_a_literal_are_one_subtraction_from_their_bits() -> None:
    func = dequant.matmul_w4a16.get_ir(4096, 4096, 4096, block_M=256, block_N=128, block_K=64, num_stages=4,
                                       threads=256, registers=True)
    src, _ = cuda_source(func, "sm_90a", {"tlx.ws_compute_loops": True})
    unpack = next(line for line in src.splitlines() if "tlx_st2_h(&W_local" in line)
    # (1024 + q) - 1032 = q - 8, then one paired product with the group's scale
    assert unpack.lstrip().startswith("tlx_st2_h(&W_local[u_") and "tlx_mul2_h(tlx_sub2_h(" in unpack
    assert unpack.count("0x64086408u") == 1 and "I2F" not in unpack and "(float)" not in unpack


def test_the_switch_turns_it_off() -> None:
    src, _ = cuda_source(elementwise("float16"), "sm_90a", {"tlx.half_pairs": False})
    assert "tlx_st2_h(" not in src.split("__global__")[1]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_interpreter_gives_the_per_operation_results(dtype: str) -> None:
    args = _inputs(dtype)
    tilelang.compile(elementwise(dtype), target="interp")(*args)
    assert torch.equal(args[-1], reference(dtype, *args[:-1]))
