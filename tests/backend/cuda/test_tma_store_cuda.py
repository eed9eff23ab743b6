"""TMA stores of the staged GEMM epilogue (sm_90a, lower/tma_store.py) against torch: fp16 and bf16,
M and N not multiples of the tile (the copy engine clips the edge tiles), the output allocated by
the kernel (``out_idx``) or passed in, one and two staging slots per warp, a 3-d output. Skipped
below sm_90."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import tilelang_x
from tests.kernels import gemm, gemm_tma_store
from tilelang_x.core_ir import dtypes

DTYPES = {"float16": (torch.float16, dtypes.float16), "bfloat16": (torch.bfloat16, dtypes.bfloat16)}
TILES = {
    "64x64": dict(block_M=64, block_N=64, block_K=32, num_stages=2, threads=128),
    # 8 consumer warps, 4 chunks each: two slots per warp in turn
    "128x256": dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256),
    # 4 stages leave shared memory for one slot per warp only
    "128x256_one_slot": dict(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256),
}


@pytest.fixture(autouse=True)
def _hopper() -> None:
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("needs sm_90a")


def _inputs(shape_a: tuple[int, ...], shape_b: tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator(device="cuda").manual_seed(sum(shape_a) + sum(shape_b))
    return tuple(torch.randn(*s, device="cuda", generator=gen).to(dtype) for s in (shape_a, shape_b))


def _check(out: torch.Tensor, ref: torch.Tensor, kernel: Any) -> None:
    torch.cuda.synchronize()
    assert "tlx_tma_store_" in kernel.get_kernel_source().split('extern "C"', 1)[1], "TMA store not taken"
    torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("tile", sorted(TILES))
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("mnk", [(200, 136, 96), (300, 264, 128)])
def test_gemm_output_allocated_by_the_kernel(tile: str, dtype: str, mnk: tuple[int, int, int]) -> None:
    m, n, k = mnk
    tdt, dt = DTYPES[dtype]
    a, b = _inputs((m, k), (k, n), tdt)
    kernel = gemm.matmul(m, n, k, in_dtype=dt, out_dtype=dt, **TILES[tile])
    c = kernel(a, b)
    _check(c, a.float() @ b.float(), kernel)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_gemm_output_passed_in(dtype: str) -> None:
    """The caller's C (NaN before the call) is wholly overwritten; each call's new tensor gets its
    own map."""
    m, n, k = 200, 136, 96
    tdt, dt = DTYPES[dtype]
    a, b = _inputs((m, k), (k, n), tdt)
    func = gemm.matmul.get_ir(m, n, k, in_dtype=dt, out_dtype=dt, **TILES["64x64"])
    kernel = tilelang_x.compile(func)
    ref = a.float() @ b.float()
    for _ in range(2):
        c = torch.full((m, n), float("nan"), device="cuda", dtype=tdt)
        kernel(a, b, c)
        _check(c, ref, kernel)


def test_batched_gemm_3d_output() -> None:
    batch, m, n, k = 3, 200, 136, 96
    a, b = _inputs((batch, m, k), (batch, k, n), torch.float16)
    kernel = gemm_tma_store.batched_matmul(batch, m, n, k)
    c = kernel(a, b)
    _check(c, torch.bmm(a.float(), b.float()), kernel)


def test_off_switch_gives_the_same_result() -> None:
    m, n, k = 200, 136, 96
    a, b = _inputs((m, k), (k, n), torch.float16)
    func = gemm.matmul.get_ir(m, n, k, **TILES["64x64"])
    on = tilelang_x.compile(func, out_idx=[-1])(a, b)
    off_kernel = tilelang_x.compile(func, out_idx=[-1], pass_configs={"tlx.tma_store": False})
    off = off_kernel(a, b)
    torch.cuda.synchronize()
    assert "tlx_tma_store_" not in off_kernel.get_kernel_source().split('extern "C"', 1)[1]
    torch.testing.assert_close(on, off, atol=0, rtol=0)


@pytest.mark.parametrize("swizzle", [None, (3,), (3, "column")])
@pytest.mark.parametrize("configs", [{"tlx.persistent": True}, {"tlx.persistent": True, "tlx.tma_store": False}])
def test_persistent_gemm_stages_every_tile_epilogue(swizzle: Any, configs: dict[str, bool]) -> None:
    """144 edge-clipped tiles on 132 blocks: each block's staged epilogue runs once per tile, in
    the tile order of ``T.use_swizzle`` when asked."""
    m, n, k = 2000, 2104, 192  # rows of 16-byte multiples: TMA describes them
    a, b = _inputs((m, k), (k, n), torch.float16)
    func = gemm.matmul.get_ir(m, n, k, swizzle=swizzle, **TILES["128x256"])
    kernel = tilelang_x.compile(func, out_idx=[-1], pass_configs=configs)
    source = kernel.get_kernel_source().split('extern "C"', 1)[1]
    assert "tlx_tile_j" in source and "tlx_stsm_x4" in source
    c = kernel(a, b)
    torch.cuda.synchronize()
    assert ("tlx_tma_store_" in source) == configs.get("tlx.tma_store", True)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("blocks", [1, 50, 131, 144])
def test_persistent_gemm_is_right_on_any_grid(blocks: int) -> None:
    """The tile stride is ``gridDim.x``: a device with fewer SMs (one block each) gets all tiles."""
    import dataclasses

    from tests.null.cuda_helpers import cuda_source
    from tilelang_x.plugins.cuda import runtime
    from tilelang_x.plugins.cuda.compile import compile_cuda

    m, n, k = 2000, 2104, 192
    a, b = _inputs((m, k), (k, n), torch.float16)
    source, ctx = cuda_source(gemm.matmul.get_ir(m, n, k, **TILES["128x256"]), "sm_90a")
    meta = ctx.data["cuda.meta"]
    assert meta.persistent_tiles == 144
    launch = runtime.load(compile_cuda(source, "sm_90a", kernel_name=meta.kernel_name),
                          dataclasses.replace(meta, grid_static=(blocks, 1, 1), persistent_tiles=None))
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    launch([a, b, c])
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=2e-2, rtol=2e-2)
