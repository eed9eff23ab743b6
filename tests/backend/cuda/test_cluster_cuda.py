"""Thread-block clusters and TMA multicast on the GPU (sm_90a): clustered GEMMs with M/N/K tails
against torch, and the launch-time error of a dynamic grid that is not a multiple of the cluster.
Skipped below sm_90."""

from __future__ import annotations

import pytest
import torch

import tilelang_x
import tilelang_x.language as T
from tests.kernels import gemm
from tilelang_x.compiler import clear_cache
from tilelang_x.core_ir.gemm_precision import round_tf32
from tilelang_x.errors import ArgumentError


@pytest.fixture(autouse=True)
def _hopper() -> None:
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("needs sm_90a")


def _tf32(x: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(round_tf32(x.cpu().numpy())).to(x.device)


def _reference(a: torch.Tensor, b: torch.Tensor, trans_b: bool) -> torch.Tensor:
    return a.float() @ (b.float().t() if trans_b else b.float())


# (cluster, M, N, K): every grid a multiple of the cluster, the last tile row / column / k-step partial
# (rows of 16-byte multiples, for TMA); M = 300: one CTA's 64-row slice of the last A tile lies wholly
# below the matrix (zero-filled, its bytes still counted)
CASES = [((2, 1, 1), 328, 504, 328), ((2, 1, 1), 300, 504, 328), ((1, 2, 1), 456, 296, 328),
         ((2, 2, 1), 456, 504, 256)]


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("cluster, m, n, k", CASES)
def test_clustered_gemm_matches_torch(cluster: tuple[int, int, int], m: int, n: int, k: int, trans_b: bool,
                                      launcher_kind: str) -> None:
    clear_cache()  # a fresh launcher of this kind
    func = gemm.matmul.get_ir(m, n, k, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256,
                              trans_B=trans_b, cluster=cluster)
    kernel = tilelang_x.compile(func, out_idx=[-1])
    assert "tlx_tma_load_mc_2d(" in kernel.get_kernel_source().split("TLX_DEV")[-1]
    gen = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", generator=gen).half()
    b = torch.randn(*((n, k) if trans_b else (k, n)), device="cuda", generator=gen).half()
    for _ in range(3):  # the stage ring wraps; repeated launches reuse the barriers' first phases
        c = kernel(a, b)
        torch.testing.assert_close(c.float(), _reference(a, b, trans_b), atol=5e-2, rtol=1e-2)


@pytest.mark.parametrize("cluster", [(2, 1, 1), (1, 2, 1)])
def test_clustered_swapped_tf32_gemm_matches_torch(cluster: tuple[int, int, int]) -> None:
    """A float32 gemm with B stored K x N runs on wgmma as C^T = B^T A^T (B^T gathered from the
    multicast B tile) in clusters too; inputs are TF32 values, which wgmma reads exactly."""
    m, n, k = 456, 504, 328
    func = gemm.matmul.get_ir(m, n, k, block_M=128, block_N=256, block_K=32, num_stages=3, threads=256,
                              in_dtype=T.float32, out_dtype=T.float32, cluster=cluster)
    kernel = tilelang_x.compile(func, out_idx=[-1])
    source = kernel.get_kernel_source().split("TLX_DEV")[-1]
    assert "tlx_tma_load_mc_2d(" in source and "tlx_wgmma_rs_tf32" in source
    gen = torch.Generator(device="cuda").manual_seed(m + n + k)
    a, b = (_tf32(torch.randn(*shape, device="cuda", generator=gen)) for shape in ((m, k), (k, n)))
    want = (a.double() @ b.double()).float()
    for _ in range(3):
        torch.testing.assert_close(kernel(a, b), want, atol=2e-4, rtol=1e-4)


@pytest.mark.parametrize("cluster", [(2, 1, 1), (1, 2, 1)])
@pytest.mark.parametrize("configs", [{"tlx.multicast": False}, {"tlx.multicast": False, "tlx.persistent": False}])
def test_clustered_gemm_without_multicast_matches_torch(cluster: tuple[int, int, int],
                                                        configs: dict[str, bool]) -> None:
    func = gemm.matmul.get_ir(2048, 4096, 512, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256,
                              cluster=cluster)  # 256 tiles: the persistent form walks them on 132 blocks
    kernel = tilelang_x.compile(func, out_idx=[-1], pass_configs=configs)
    body = kernel.get_kernel_source().split("TLX_DEV")[-1]
    assert "__cluster_dims__" in body and "tlx_tma_load_mc" not in body
    assert ("tlx_tile_j" in body) == configs.get("tlx.persistent", True)  # persistent by default
    a = torch.randn(2048, 512, device="cuda").half()
    b = torch.randn(512, 4096, device="cuda").half()
    torch.testing.assert_close(kernel(a, b).float(), _reference(a, b, False), atol=5e-2, rtol=1e-2)


def test_dynamic_grid_not_a_multiple_of_the_cluster_raises_at_launch(launcher_kind: str) -> None:
    clear_cache()
    kernel = tilelang_x.compile(gemm.matmul_dynamic_m((1, 2, 1)), out_idx=[2])
    b = torch.randn(256, 256, device="cuda").half()
    a = torch.randn(456, 256, device="cuda").half()  # 4 tile rows: two clusters
    torch.testing.assert_close(kernel(a, b).float(), _reference(a, b, False), atol=5e-2, rtol=1e-2)
    with pytest.raises(ArgumentError, match=r"for m=300 its grid is \(2, 3, 1\)"):
        kernel(torch.randn(300, 256, device="cuda").half(), b)
    torch.testing.assert_close(kernel(a, b).float(), _reference(a, b, False), atol=5e-2, rtol=1e-2)


@pytest.mark.parametrize("blocks", [None, 4, 68, 128])
@pytest.mark.parametrize("cluster, m, n, k", [((1, 2, 1), 4040, 4040, 328), ((2, 1, 1), 8192, 3000, 200),
                                              ((2, 2, 1), 2000, 4096, 136)])
def test_persistent_clustered_gemm_multicasts_and_matches_torch(cluster: tuple[int, int, int], m: int, n: int,
                                                                k: int, blocks: int | None) -> None:
    """The persistent form walks cluster tiles (rasterized for the large grid) with multicast loads;
    any grid of whole clusters (``blocks``; ``None``: one block per SM) computes every tile once."""
    import dataclasses

    from tests.null.cuda_helpers import cuda_source
    from tilelang_x.plugins.cuda import runtime
    from tilelang_x.plugins.cuda.compile import compile_cuda

    func = gemm.matmul.get_ir(m, n, k, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256,
                              cluster=cluster)
    source, ctx = cuda_source(func, "sm_90a", {"tlx.persistent": True})
    body = source.split("TLX_DEV")[-1]
    assert "tlx_tile_j" in body and "tlx_tma_load_mc_2d(" in body
    meta = ctx.data["cuda.meta"]
    if blocks is not None:
        meta = dataclasses.replace(meta, grid_static=(blocks, 1, 1), persistent_tiles=None)
    launch = runtime.load(compile_cuda(source, "sm_90a", kernel_name=meta.kernel_name), meta)
    gen = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", generator=gen).half()
    b = torch.randn(k, n, device="cuda", generator=gen).half()
    for _ in range(2):
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
        launch([a, b, c])
        torch.cuda.synchronize()
        torch.testing.assert_close(c.float(), _reference(a, b, False), atol=5e-2, rtol=1e-2)



@pytest.mark.parametrize("cluster", [(2, 1, 1), (2, 2, 1), (4, 1, 1)])
def test_persistent_clustered_grid_holds_only_clusters_that_fit(cluster: tuple[int, int, int]) -> None:
    """A GPC holds whole clusters, so fewer than SMs / size may fit at once: the loaded grid has no
    more (H200: 66 clusters of 2 but 30 of 4), or the rest would wait for a second round."""
    from tests.null.cuda_helpers import cuda_source
    from tilelang_x.plugins.cuda import driver, runtime
    from tilelang_x.plugins.cuda.compile import compile_cuda

    func = gemm.matmul.get_ir(4096, 4096, 1024, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256,
                              cluster=cluster)
    source, ctx = cuda_source(func, "sm_90a", {"tlx.persistent": True})
    meta = ctx.data["cuda.meta"]
    loaded = runtime.LoadedKernel(compile_cuda(source, "sm_90a", kernel_name=meta.kernel_name), meta)
    blocks = runtime._one_block_per_sm(loaded, meta).grid_static[0]
    size, sms = cluster[0] * cluster[1], driver.device_attribute(torch.cuda.current_device(),
                                                                 driver.ATTR_MULTIPROCESSOR_COUNT)
    assert blocks % size == 0 and blocks <= sms
    if sms == 132:  # H100 / H200: 66 clusters of 2 fit, but 33 of 4 do not fit in the GPCs (H200: 30)
        assert blocks == 132 if size == 2 else 100 <= blocks < 132
