"""Thread-block clusters (``T.Kernel(..., cluster_dims=...)``, plugins/cuda/cluster.py) and TMA multicast
in the warp-specialized Hopper pipeline (plugins/cuda/hopper/multicast.py), checked without a GPU:
the generated source, the SASS, the compile- and launch-time errors, and the targets that ignore it."""

from __future__ import annotations

import dataclasses
import inspect
import logging
import re
from typing import Any

import pytest
import torch

import tilelang_x
import tilelang_x.language as T
from tests.kernels import attention, gemm
from tests.null.cuda_helpers import cuda_source, sass_text
from tilelang_x.core_ir.stmt import Kernel
from tilelang_x.core_ir.visit import rewrite
from tilelang_x.errors import ArgumentError, TileLangError, TileLangSyntaxError

BIG = dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)
def _kernel_line(fn: Any) -> int:
    """The line of ``fn``'s ``T.Kernel``, where errors about the launch point."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if "T.Kernel(" in line)


def _gemm(cluster: Any, m: int = 1024, n: int = 1024, k: int = 512, **kw: Any) -> Any:
    return gemm.matmul.get_ir(m, n, k, **{**BIG, **kw}, cluster=cluster)


def _loads(source: str) -> list[str]:
    return [ln.strip() for ln in source.splitlines() if "tlx_tma_load" in ln and "TLX_DEV" not in ln]


# ---- launch -----------------------------------------------------------------------------------------

def test_cluster_dims_declare_the_kernel_and_reach_the_launch_metadata() -> None:
    source, ctx = cuda_source(_gemm((2, 1, 1)), "sm_90a")
    assert re.search(r'__global__ void __launch_bounds__\(384, 1\) __cluster_dims__\(2, 1, 1\) main_kernel\(', source)
    meta = ctx.data["cuda.meta"]
    assert meta.cluster == (2, 1, 1) and meta.grid_static == (4, 8, 1)
    _, one = cuda_source(gemm.matmul.get_ir(256, 256, 256, cluster=2), "sm_90a")  # an int is (n, 1, 1)
    assert one.data["cuda.meta"].cluster == (2, 1, 1)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_targets_without_clusters_ignore_them(arch: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="tilelang_x.cuda.cluster"):
        source, ctx = cuda_source(_gemm((2, 1, 1)), arch)
    plain, _ = cuda_source(_gemm(None), arch)
    assert source == plain and ctx.data["cuda.meta"].cluster is None
    assert any("T.Kernel(cluster_dims=(2, 1, 1)) ignored on " + arch in r.getMessage() for r in caplog.records)
    source, _ = cuda_source(_gemm((2, 3, 1)), arch)  # not even checked against the grid there
    assert "__cluster_dims__" not in source


def test_interpreter_ignores_cluster_dims() -> None:
    @T.prim_func
    def fill(A: T.Tensor((256,), T.float32)):
        with T.Kernel(2, threads=128, cluster_dims=(2, 1, 1)) as bx:
            for i in T.Parallel(128):
                A[bx * 128 + i] = bx + 1.0

    a = torch.zeros(256)
    tilelang_x.compile(fill, target="interp")(a)
    assert bool((a[:128] == 1).all()) and bool((a[128:] == 2).all())


def test_indivisible_static_grid_is_a_compile_error() -> None:
    with pytest.raises(TileLangError, match=r"grid \(4, 3\) cannot be launched in clusters of \(1, 2, 1\)") as info:
        cuda_source(_gemm((1, 2, 1), m=384), "sm_90a")
    assert "grid dimension y is 3" in str(info.value) and info.value.hint
    assert info.value.loc is not None and info.value.loc.file.endswith("gemm.py")


def test_cluster_of_more_than_8_blocks_is_an_error() -> None:
    with pytest.raises(TileLangError, match="clusters of 16 blocks; at most 8"):
        cuda_source(_gemm((4, 4, 1)), "sm_90a")


@pytest.mark.parametrize("bad", [0, (2, 1, 1, 1), (2, "1"), 1.5])
def test_malformed_cluster_dims_are_rejected(bad: Any) -> None:
    with pytest.raises(TileLangSyntaxError, match="cluster_dims"):
        gemm.matmul.get_ir(256, 256, 256, cluster=bad)


def test_indivisible_dynamic_grid_is_a_launch_error() -> None:
    from tilelang_x.plugins.cuda.runtime import _Plan

    _, ctx = cuda_source(gemm.matmul_dynamic_m((1, 2, 1)), "sm_90a")
    meta = ctx.data["cuda.meta"]
    assert meta.grid_static is None and meta.cluster == (1, 2, 1)
    assert meta.grid({"m": 512}) == (2, 4, 1)
    plan = _Plan(meta)
    assert plan.grid_program is None and plan.grid_fn is not None  # the compiled launcher calls the check
    with pytest.raises(ArgumentError, match=r"for m=300 its grid is \(2, 3, 1\): dimension y is not a multiple of 2") \
            as info:
        plan.grid_fn(300)
    assert info.value.loc is not None and info.value.loc.line == _kernel_line(gemm.matmul_dynamic_m)


# ---- multicast ----------------------------------------------------------------------------------------

def test_gemm_multicasts_a_along_x() -> None:
    source, ctx = cuda_source(_gemm((2, 1, 1)), "sm_90a")
    loads = _loads(source)
    mc = [ln for ln in loads if ln.startswith("tlx_tma_load_mc_2d(")]
    assert len(mc) == 1 and "A_tmap" in mc[0] and ", 3, " in mc[0]  # A: both CTAs of the cluster
    assert "(by * 128) + (tlx_cluster_coord(1, 2) * 64)" in mc[0]  # this CTA's 64 of the 128 rows
    assert all("B_tmap" in ln for ln in loads if not ln.startswith("tlx_tma_load_mc"))
    assert "tlx_mbar_arrive_peers(" in source and "tlx_mbar_arrive(" not in source.split("TLX_DEV")[-1]
    # the empty barriers count the 2 consumer warpgroups of each of the 2 CTAs (tlx.elected_release)
    assert source.count("tlx_mbar_init(tlx_empty_s") == 3 and "tlx_mbar_init(tlx_empty_s + (0) * 8, 4);" in source
    assert ", 3, 2, tx & 127);" in source  # thread r of each warpgroup arrives on peer r's barrier
    assert "tlx_mbar_expect_tx(tlx_full_s" in source and ", 49152);" in source  # the whole stage, per CTA
    body = source[source.index('extern "C"'):]
    assert body.index("tlx_mbar_fence_init();") < body.index("tlx_cluster_sync_init();") < body.index("ko_p")
    assert body.rstrip().endswith("tlx_cluster_sync();\n}") and "__syncthreads" not in body
    boxes = [m[2] for m in ctx.data["cuda.meta"].tensor_maps]
    assert (64, 64) in boxes and (64, 128) not in boxes  # A's map holds a 64-row slice


def test_gemm_multicasts_b_along_y_and_both_on_a_2x2_cluster() -> None:
    source, _ = cuda_source(_gemm((1, 2, 1)), "sm_90a")
    mc = [ln for ln in _loads(source) if ln.startswith("tlx_tma_load_mc_2d(")]
    assert len(mc) == 4 and all("B_tmap" in ln for ln in mc)  # four 64-column panels of 32 of the 64 rows
    assert all("((0 + ko_p) * 64) + (tlx_cluster_coord(1, 2) * 32)" in ln for ln in mc)
    source, _ = cuda_source(_gemm((2, 2, 1)), "sm_90a")
    mc = [ln for ln in _loads(source) if ln.startswith("tlx_tma_load_mc_2d(")]
    assert len(mc) == 5 and "3 << (tlx_cluster_coord(2, 2) * 2)" in mc[0] and "5 << tlx_cluster_coord(1, 2)" in mc[1]
    assert "(3 << (tlx_cluster_coord(2, 2) * 2)) | (5 << tlx_cluster_coord(1, 2)), 4, tx & 127)" in source  # 3 of 4
    assert "tlx_mbar_init(tlx_empty_s + (0) * 8, 6);" in source
    source, _ = cuda_source(_gemm((2, 2, 1)), "sm_90a", {"tlx.elected_release": False})  # every consumer thread
    assert "(3 << (tlx_cluster_coord(2, 2) * 2)) | (5 << tlx_cluster_coord(1, 2)), 4)" in source
    assert "tlx_mbar_init(tlx_empty_s + (0) * 8, 768);" in source


@pytest.mark.parametrize("configs", [{"tlx.multicast": False}, {"tlx.multicast": False, "tlx.persistent": True},
                                     {"tl.disable_warp_specialized": True}])
def test_cluster_launch_without_multicast(configs: dict[str, bool]) -> None:
    source, ctx = cuda_source(_gemm((1, 2, 1), m=4096, n=4096), "sm_90a", configs)
    body = source.split("TLX_DEV")[-1]
    assert "__cluster_dims__" in body and "tlx_tma_load_2d(" in body
    assert "tlx_tma_load_mc" not in body and "tlx_cluster_sync" not in body
    grid, cluster = ctx.data["cuda.meta"].grid_static, ctx.data["cuda.meta"].cluster
    assert all(g % c == 0 for g, c in zip(grid, cluster))
    if "tlx.persistent" in configs:  # a 1-d grid of whole clusters
        assert cluster == (2, 1, 1) and grid == (132, 1, 1) and "__cluster_dims__(2, 1, 1)" in source


@pytest.mark.parametrize("cluster,shared", [((1, 2, 1), "B"), ((2, 1, 1), "A")])
def test_persistent_clusters_multicast(cluster: tuple[int, int, int], shared: str) -> None:
    """A persistent clustered GEMM walks cluster tiles, so the operand cluster-mates share is
    multicast as in the clustered grid (the rasterized block order included)."""
    source, ctx = cuda_source(_gemm(cluster, m=8192, n=8192), "sm_90a", {"tlx.persistent": True})
    body = source.split("TLX_DEV")[-1]
    assert ctx.data.get("cuda.raster_panel") and "tlx_tile_j" in body
    assert "__cluster_dims__(2, 1, 1)" in body and ctx.data["cuda.meta"].grid_static == (132, 1, 1)
    mc = [ln for ln in _loads(source) if ln.startswith("tlx_tma_load_mc_2d(")]
    assert mc and all(f"{shared}_tmap" in ln for ln in mc)
    assert "tlx_mbar_arrive_peers(" in body and "tlx_cluster_sync();" in body
    assert "tlx_floormod(((tlx_tile_j" not in body  # the stage index is proven non-negative


@pytest.mark.parametrize("gx,gy,cluster,raster,blocks", [
    (16, 32, (1, 2, 1), None, 132), (16, 32, (2, 1, 1), (12, False), 132), (9, 16, (1, 2, 1), (4, True), 66),
    (8, 6, (2, 2, 1), (2, False), 12), (32, 64, (1, 2, 1), (8, False), 2)])
def test_persistent_cluster_walk(gx: int, gy: int, cluster: tuple[int, int, int], raster: Any, blocks: int) -> None:
    """Every block of the clustered grid runs exactly once, on any grid of whole clusters, and the
    blocks of one cluster run, at each step, one cluster of the original grid with their ranks."""
    from tilelang_x.core_ir import dtypes
    from tilelang_x.core_ir import expr as E
    from tilelang_x.core_ir.evaluate import evaluate
    from tilelang_x.core_ir.stmt import Kernel, Seq
    from tilelang_x.plugins.cuda.hopper.persistent import plan_persistent

    bx, by = E.Var("bx", dtypes.int32), E.Var("by", dtypes.int32)
    kernel = Kernel((E.const(gx), E.const(gy)), (bx, by), (128,), Seq(()))
    pers = plan_persistent(kernel, E.const(8), E.const(0), 132 if gx * gy > 132 else 12, raster, cluster)
    assert pers is not None and pers.grid % (cluster[0] * cluster[1]) == 0
    size = cluster[0] * cluster[1]
    seen = []
    for pid in range(blocks):
        env = {pers.pid: pid, pers.stride: blocks}
        for j in range(evaluate(pers.tiles_here, env)):
            x, y = (evaluate(pers.block_of[v], {**env, pers.j: j}) for v in (bx, by))
            rank = pid % size
            assert (x % cluster[0], y % cluster[1]) == (rank % cluster[0], rank // cluster[0])
            mate = pid - rank  # rank 0 of the cluster: the same cluster tile
            x0, y0 = (evaluate(pers.block_of[v], {pers.pid: mate, pers.stride: blocks, pers.j: j}) for v in (bx, by))
            assert (x // cluster[0], y // cluster[1]) == (x0 // cluster[0], y0 // cluster[1])
            seen.append((x, y))
    assert sorted(seen) == [(x, y) for x in range(gx) for y in range(gy)]


def test_rasterized_block_order_is_multicast_only_when_persistent() -> None:
    func = _gemm((2, 1, 1), m=8192, n=8192)
    source, ctx = cuda_source(func, "sm_90a", {"tlx.persistent": False})
    assert ctx.data.get("cuda.raster_panel") and "tlx_tma_load_mc" not in source.split("TLX_DEV")[-1]
    source, _ = cuda_source(func, "sm_90a", {"tlx.auto_rasterize": False, "tlx.persistent": False})
    assert "tlx_tma_load_mc_2d(" in source.split("TLX_DEV")[-1]
    # by default a clustered gemm walks cluster tiles (in panel order), which keeps cluster-mates together
    source, ctx = cuda_source(func, "sm_90a")
    assert ctx.data.get("cuda.persistent") is not None and "tlx_tma_load_mc_2d(" in source.split("TLX_DEV")[-1]


@pytest.mark.parametrize("causal", [False, True])
def test_attention_multicasts_k_and_v_unless_the_trip_count_depends_on_the_block(causal: bool) -> None:
    func = attention.flash_attention.get_ir(1, 2, 512, 128, causal, block_M=128, block_N=128, num_stages=2,
                                            threads=256)
    clustered = dataclasses.replace(func, body=rewrite(func.body, lambda n: dataclasses.replace(
        n, annotations=n.annotations + (("cluster_dims", (2, 1, 1)),)) if isinstance(n, Kernel) else None))
    body = cuda_source(clustered, "sm_90a", {"tlx.ws_compute_loops": True})[0].split("TLX_DEV")[-1]
    mc = [ln for ln in body.splitlines() if "tlx_tma_load_mc_4d(" in ln]
    if causal:  # blocks of one cluster run different numbers of iterations: no sharing
        assert not mc and "__cluster_dims__(2, 1, 1)" in body
    else:  # K and V (two 64-column panels each) do not depend on the query block
        assert len(mc) == 4 and "tlx_cluster_sync();" in body


def test_slices_keep_whole_swizzle_atoms() -> None:
    source, _ = cuda_source(_gemm((1, 8, 1), block_K=32), "sm_90a")  # B: 32 rows / 8 CTAs
    assert "__cluster_dims__(1, 8, 1)" in source and "tlx_tma_load_mc" not in source.split("TLX_DEV")[-1]


def test_clustered_gemm_sass_has_multicast_tma_and_cluster_barriers() -> None:
    for cluster in [(2, 1, 1), (1, 2, 1)]:
        text = sass_text(_gemm(cluster))
        assert re.search(r"UTMALDG\.2D\.MULTICAST", text), cluster
        assert "UCGABAR_ARV" in text and "UCGABAR_WAIT" in text
        assert re.search(r"SYNCS\.ARRIVE\.TRANS64\.RED", text)  # the remote release


def test_clustered_source_is_deterministic() -> None:
    first, _ = cuda_source(_gemm((2, 2, 1)), "sm_90a")
    second, _ = cuda_source(_gemm((2, 2, 1)), "sm_90a")
    assert first == second
