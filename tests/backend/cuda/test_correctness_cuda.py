"""On the GPU: the constructs of tests/null/test_cuda_correctness.py give the interpreter's
results (local buffers, float8, strided tensors) or print what the interpreter prints."""

from __future__ import annotations

import math

import pytest
import torch

import tilelang_x
import tilelang_x.language as T
from tilelang_x.core_ir.errors import ArgumentError


def _both(func, *inputs: torch.Tensor, out_idx=None):
    """(CUDA outputs, interpreter outputs) of ``func`` on ``inputs`` (CUDA copies of them)."""
    gpu = tilelang_x.compile(func, out_idx=out_idx, target="cuda")(*[x.cuda() for x in inputs])
    cpu = tilelang_x.compile(func, out_idx=out_idx, target="interp")(*[x.cpu() for x in inputs])
    torch.cuda.synchronize()
    return gpu, cpu


def test_local_fill_clear_copy_every_thread_has_the_whole_array() -> None:
    @T.prim_func
    def local_ops(A: T.Tensor((64, 8), T.float32), B: T.Tensor((64, 128), T.float32)):
        with T.Kernel(64, threads=128) as bx:
            A_s = T.alloc_shared((8,), T.float32)
            T.copy(A[bx, 0:8], A_s)
            lo = T.alloc_local((8,), T.float32)
            m = T.alloc_local((8,), T.float32)
            c = T.alloc_local((8,), T.float32)
            g = T.alloc_local((8,), T.float32)
            T.fill(lo, 2.0)
            T.clear(c)
            T.copy(A_s, m)
            T.copy(A[bx, 0:8], g)
            for t in T.Parallel(128):
                acc = T.alloc_var(T.float32, 0.0)
                for k in T.serial(8):
                    acc = acc + lo[k] * m[k] + c[k] + g[k] * (t % 3)
                B[bx, t] = acc

    a = torch.randn(64, 8)
    b_gpu = torch.zeros(64, 128, device="cuda")
    b_cpu = torch.zeros(64, 128)
    tilelang_x.compile(local_ops, target="cuda")(a.cuda(), b_gpu)
    tilelang_x.compile(local_ops, target="interp")(a, b_cpu)
    torch.cuda.synchronize()
    torch.testing.assert_close(b_gpu.cpu(), b_cpu)
    t = torch.arange(128) % 3
    torch.testing.assert_close(b_cpu, (2 * a.sum(1, keepdim=True)) + a.sum(1, keepdim=True) * t)


def test_local_scratch_inside_parallel() -> None:
    @T.prim_func
    def scratch(A: T.Tensor((256, 4), T.float32), B: T.Tensor((256,), T.float32)):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                tmp = T.alloc_local((4,), T.float32)
                for k in T.serial(4):
                    tmp[k] = A[bx * 128 + i, k] * 2.0
                B[bx * 128 + i] = tmp[0] + tmp[1] * tmp[2] - tmp[3]

    a = torch.randn(256, 4)
    b = torch.zeros(256, device="cuda")
    tilelang_x.compile(scratch, target="cuda")(a.cuda(), b)
    x = 2 * a
    torch.testing.assert_close(b.cpu(), x[:, 0] + x[:, 1] * x[:, 2] - x[:, 3])


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_float8_decodes_every_code_like_torch(dtype: torch.dtype) -> None:
    fp8 = T.float8_e4m3 if dtype == torch.float8_e4m3fn else T.float8_e5m2

    @T.prim_func
    def decode(A: T.Tensor((256,), fp8), B: T.Tensor((256,), T.float32)):
        with T.Kernel(1, threads=256):
            for i in T.Parallel(256):
                B[i] = A[i]

    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype)
    got = tilelang_x.compile(decode, out_idx=[1], target="cuda")(codes.cuda()).cpu()
    want = codes.float()
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    ok = ~torch.isnan(want)
    assert torch.equal(got[ok], want[ok])


@pytest.mark.parametrize("fp8", ["float8_e4m3", "float8_e5m2"])
def test_float8_encodes_like_the_interpreter(fp8: str) -> None:
    dt = getattr(T, fp8)

    @T.prim_func
    def encode(A: T.Tensor((4096,), T.float32), B: T.Tensor((4096,), dt), s: dt):
        with T.Kernel(32, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * s

    special = torch.tensor([0.0, -0.0, 448.0, 449.0, 464.0, 465.0, 480.0, 1e6, -1e6, 57344.0, 61439.0, 61440.0,
                            math.inf, -math.inf, math.nan, 2.0**-9, 2.0**-10, 3 * 2.0**-10, 2.0**-16, 2.0**-17,
                            2.0**-6, 2.0**-14, 1.0625, 1.1875, 1.125, 1.375])
    sweep = torch.cat([special, torch.randn(2048) * 4, torch.randn(1024) * 1000,
                       torch.randn(4096 - 3072 - len(special)) * 1e-3])
    gpu = tilelang_x.compile(encode, out_idx=[1], target="cuda")(sweep.cuda(), 1.0).cpu().float()
    cpu = tilelang_x.compile(encode, out_idx=[1], target="interp")(sweep, 1.0).float()
    assert torch.equal(torch.isnan(gpu), torch.isnan(cpu))
    ok = ~torch.isnan(cpu)
    assert torch.equal(gpu[ok], cpu[ok])


def test_strided_tensor_arguments_are_checked_and_used() -> None:
    s = T.dynamic("s")

    @T.prim_func
    def strided(A: T.StridedTensor((64, 32), (s, 1), T.float32), B: T.Tensor((64, 32), T.float32)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(64, 32):
                B[i, j] = A[i, j] + 1.0

    kernel = tilelang_x.compile(strided, out_idx=[1], target="cuda")
    big = torch.randn(64, 48, device="cuda")
    torch.testing.assert_close(kernel(big[:, 8:40]), big[:, 8:40] + 1)
    with pytest.raises(ArgumentError, match="strides"):
        kernel(torch.randn(32, 64, device="cuda").t())


def test_print_smoke(capfd: pytest.CaptureFixture[str]) -> None:
    @T.prim_func
    def printing(A: T.Tensor((4, 4), T.float32), n: T.int32):
        with T.Kernel(2, threads=128):
            A_s = T.alloc_shared((4, 4), T.float32)
            T.copy(A, A_s)
            T.print(A_s, msg="tile")
            T.print(n, msg="n")

    a = torch.arange(16, dtype=torch.float32).reshape(4, 4)
    tilelang_x.compile(printing, target="cuda")(a.cuda(), 7)
    torch.cuda.synchronize()
    out = capfd.readouterr().out
    assert out.count("tile: A_s[") == 16  # one thread of block 0 prints
    assert "tile: A_s[2, 3] = 11" in out and "n: n = 7" in out


def test_reciprocal_division_matches_torch_on_special_divisors() -> None:
    """``tlx.reciprocal_division``: ``A[i, j] / D[i]`` multiplies by ``1 / D[i]``; zeros, infinities,
    NaN and large or small normal divisors give torch's values, finite ones within 1.5 ulp."""
    @T.prim_func
    def row_div(A: T.Tensor((64, 32), T.float32), D: T.Tensor((64,), T.float32), B: T.Tensor((64, 32), T.float32)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(64, 32):
                B[i, j] = A[i, j] / D[i]

    a = torch.randn(64, 32)
    a[:, 0] = 0.0
    a[:, 1] = math.inf
    d = torch.rand(64) + 0.5
    d[:8] = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-37, 3e38, -1e-30])
    b = torch.zeros(64, 32, device="cuda")
    tilelang_x.compile(row_div, target="cuda")(a.cuda(), d.cuda(), b)
    torch.cuda.synchronize()
    torch.testing.assert_close(b.cpu(), a / d[:, None], rtol=2.5e-7, atol=1e-37, equal_nan=True)


def test_reciprocal_division_gives_the_quotients_of_a_division() -> None:
    """The reciprocal is corrected once (``tlx_div_rcp``): an fp8 quantization's ``x / (amax / 448)``
    over bf16 values, whose quotients often lie exactly between two e4m3 values, equals torch's
    division bit for bit (the bare product ``x * (1 / s)`` differed in about a quarter of them)."""
    @T.prim_func
    def row_div(A: T.Tensor((256, 128), T.float32), D: T.Tensor((256,), T.float32),
                B: T.Tensor((256, 128), T.float32)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(256, 128):
                B[i, j] = A[i, j] / D[i]

    a = torch.randn(256, 128, generator=torch.Generator().manual_seed(7)).bfloat16().float() * 30
    d = a.abs().amax(dim=1) / 448.0
    b = torch.zeros(256, 128, device="cuda")
    tilelang_x.compile(row_div, target="cuda")(a.cuda(), d.cuda(), b)
    torch.cuda.synchronize()
    want = a / d[:, None]
    assert torch.equal(b.cpu(), want)
    assert torch.equal(b.cpu().to(torch.float8_e4m3fn).float(), want.to(torch.float8_e4m3fn).float())
