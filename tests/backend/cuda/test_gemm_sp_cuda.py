"""T.gemm_sp (tests/kernels/gemm_sp.py, TileLang's example) on the GPU against torch on the dense A:
both metadata dtypes, both transposes, M and N tails, TileLang's example configurations, and the
tile sizes that take the sm_90a TMA pipeline."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import tilelang_x
from tests.kernels import gemm_sp
from tilelang_x.utils.sparse import compress, randn_semi_sparse

# (M, N, K), dtype, arch of the metadata ("8.0": int16, "9.0": uint8), kernel options
CASES: list[tuple[tuple[int, int, int], str, str, dict[str, Any]]] = [
    ((1024, 1024, 1024), "float16", "8.0", {}),
    ((1024, 1024, 1024), "bfloat16", "9.0", {}),
    ((512, 768, 512), "float16", "9.0", {"trans_B": True}),
    ((512, 768, 512), "bfloat16", "8.0", {"trans_A": True}),
    ((512, 512, 512), "float16", "8.0", {"trans_A": True, "trans_B": True, "block_M": 64, "block_N": 64}),
    ((1000, 520, 512), "float16", "8.0", {"block_M": 128, "block_N": 64}),  # M and N tails
    ((2048, 2048, 2048), "float16", "9.0", {"block_M": 64, "block_N": 64, "block_K": 128}),  # TileLang "h20"
    ((2048, 2048, 2048), "float16", "8.0", {"block_M": 256, "block_N": 128, "block_K": 64}),  # TileLang "4090"
    ((2048, 2048, 2048), "float16", "8.0", {"block_K": 128, "num_stages": 3, "threads": 256}),  # sm_90a: TMA
    ((2048, 2048, 2048), "bfloat16", "9.0", {"block_N": 256, "block_K": 64, "num_stages": 2, "threads": 256}),
]


def _case_id(case: tuple[Any, ...]) -> str:
    (m, n, k), dtype, arch, kw = case
    return "-".join([f"{m}x{n}x{k}", dtype, "uint8" if arch == "9.0" else "int16",
                     *(f"{key}={value}" for key, value in kw.items())])


# "cuda": the device's own arch (sm_90a on the H200: TMA and warp specialization where the copies
# qualify, and wgmma.mma_async.sp: hopper/wgmma_sp.py); "cuda:sm_90": the sm_80-class path (cp.async)
# on the same device; "mma_sp": sm_90a with tlx.wgmma_sp off (mma.sp.sync on the sm_90a pipelines)
@pytest.mark.parametrize("target", ["cuda", "cuda:sm_90", "mma_sp"])
@pytest.mark.parametrize("shape, dtype, arch, kw", CASES, ids=[_case_id(c) for c in CASES])
def test_gemm_sp_matches_dense_torch(shape: tuple[int, int, int], dtype: str, arch: str, kw: dict[str, Any],
                                     target: str) -> None:
    if target == "mma_sp" and torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("tlx.wgmma_sp only matters on sm_90a")
    m, n, k = shape
    tdt = getattr(torch, dtype)
    trans_a, trans_b = kw.get("trans_A", False), kw.get("trans_B", False)
    gen = torch.Generator().manual_seed(m * 31 + n * 7 + k)
    a = randn_semi_sparse(m, k, tdt, "cuda", transposed=trans_a, generator=gen)
    b = torch.randn(*((n, k) if trans_b else (k, n)), generator=gen).to(device="cuda", dtype=tdt)
    a_sparse, e = compress(a, transposed=trans_a, arch=arch)
    func = gemm_sp.matmul_sp.get_ir(m, n, k, in_dtype=dtype, out_dtype="float32", arch=arch, **kw)
    off = target == "mma_sp"
    kernel = tilelang_x.compile(func, out_idx=[-1], target="cuda" if off else target,
                                pass_configs={"tlx.wgmma_sp": not off})
    out = kernel(a_sparse, e, b)
    ref = (a.float().T if trans_a else a.float()) @ (b.float().T if trans_b else b.float())
    assert ((out - ref).norm() / ref.norm()).item() < 1e-4  # a wrong fragment or metadata layout gives ~1


def test_gemm_sp_fp16_output_and_second_launch() -> None:
    """The suite kernel with a float16 result, launched twice on new inputs."""
    kernel = gemm_sp.matmul_sp(256, 256, 256)
    for seed in (1, 2):
        gen = torch.Generator().manual_seed(seed)
        a = randn_semi_sparse(256, 256, torch.float16, "cuda", generator=gen)
        b = torch.randn(256, 256, generator=gen).half().cuda()
        torch.testing.assert_close(kernel(*compress(a), b), (a.float() @ b.float()).half(), atol=1e-2, rtol=1e-2)
