"""Automatic block rasterisation (plugins/cuda/rasterize.py, ``tlx.auto_rasterize``), checked without
a GPU: the remap is a bijection of every grid onto itself (``panel_order`` evaluated and the emitted C, run
on the host with g++), it is emitted only for large GEMM grids and only when switched on, and the
remapped kernels compile for sm_90a and sm_80."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Any

import pytest

from tests.null.cuda_suite_funcs import suite_funcs
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.tile_order import panel_order
from tilelang_x.plugins.cuda.rasterize import choose_panel

FUNCS = suite_funcs()
BIG = (8192, 28672, 4096)
TILE = {"block_M": 128, "block_N": 256, "block_K": 64, "num_stages": 3, "threads": 256}


def _matmul(m: int, n: int, k: int, **kw: Any) -> Any:
    from tests.kernels import gemm

    return gemm.matmul.get_ir(m, n, k, **kw)


def _source(func: Any, arch: str, configs: dict[str, bool] | None = None) -> tuple[str, Any]:
    """The kernel with a grid of tiles, where codegen remaps ``blockIdx`` (a persistent kernel walks
    its tiles in the same order: ``test_persistent_walk_follows_the_block_remap``)."""
    from tests.null.cuda_helpers import cuda_source as source

    return source(func, arch, {"tlx.persistent": False, **(configs or {})})


def remap(bid: int, gx: int, gy: int, panel: int, column: bool = False) -> tuple[int, int]:
    """(bx, by) of block ``bid = blockIdx.y * gx + blockIdx.x`` (``blockIdx.x * gy + blockIdx.y``
    when ``column``): ``panel_order`` on constants, which fold."""
    bx, by = panel_order(E.const(bid), E.const(gx), E.const(gy), panel, column)
    x, y = E.as_int(bx), E.as_int(by)
    assert x is not None and y is not None
    return x, y


def _remap_lines(src: str) -> list[str]:
    lines = [ln.strip() for ln in src.splitlines()]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("const int tlx_gx"))
    return lines[start:start + 8]


@pytest.mark.parametrize("gx,gy", [(1, 1), (3, 1), (1, 7), (5, 7), (16, 32), (112, 64), (7, 13), (9, 30)])
def test_remap_is_a_bijection(gx: int, gy: int) -> None:
    for panel in range(1, 18):
        for column in (False, True):
            seen = {remap(bid, gx, gy, panel, column) for bid in range(gx * gy)}
            assert seen == {(x, y) for x in range(gx) for y in range(gy)}, (gx, gy, panel, column)


def test_panel_heuristic() -> None:
    assert choose_panel(16, 32, 128, 256, 4096, 2, 132, 50 << 20) == 15  # 4096³
    assert choose_panel(16, 16, 128, 256, 4096, 2, 132, 50 << 20) == 0  # 4096 x 2048: under two waves
    assert choose_panel(32, 64, 128, 256, 8192, 2, 132, 50 << 20) == 12  # 8192³
    assert choose_panel(112, 64, 128, 256, 4096, 2, 132, 50 << 20) == 15  # 8192 x 28672 x 4096
    assert choose_panel(8, 8, 128, 128, 1024, 2, 132, 50 << 20) == 0  # under two waves
    assert choose_panel(112, 64, 128, 256, 1 << 20, 2, 132, 50 << 20) == 0  # A panel cannot fit in L2
    assert choose_panel(1 << 20, 4096, 128, 256, None, 2, 132, 50 << 20) == 0  # linear id overflows int


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_remap_only_when_enabled(arch: str) -> None:
    big = _matmul(*BIG, **TILE)
    on, ctx = _source(big, arch)
    assert "tlx_grp" in on and ctx.data.get("cuda.raster_panel")
    off, ctx = _source(big, arch, {"tlx.auto_rasterize": False})
    assert "tlx_grp" not in off and "const int bx = blockIdx.x;" in off
    small, _ = _source(_matmul(1024, 1024, 1024), arch)
    assert "tlx_grp" not in small


def test_emitted_remap_is_a_bijection_in_c() -> None:
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("needs a host C++ compiler")
    src, _ = _source(_matmul(*BIG, **TILE), "sm_90a")
    body = "\n".join("    " + ln for ln in _remap_lines(src))
    program = f"""#include <cstdio>
#include <algorithm>
using std::max;
using std::min;
struct D {{ unsigned x, y; }};
int main() {{
  const int grids[][2] = {{{{112, 64}}, {{1, 1}}, {{5, 7}}, {{3, 40}}, {{17, 31}}, {{112, 15}}, {{2, 16}}}};
  for (const auto& g : grids) {{
    D gridDim{{(unsigned)g[0], (unsigned)g[1]}};
    static bool hit[200][200];
    for (int y = 0; y < g[1]; ++y) for (int x = 0; x < g[0]; ++x) hit[x][y] = false;
    for (unsigned yy = 0; yy < gridDim.y; ++yy) for (unsigned xx = 0; xx < gridDim.x; ++xx) {{
      D blockIdx{{xx, yy}};
{body}
      if (bx < 0 || by < 0 || bx >= g[0] || by >= g[1] || hit[bx][by]) return 1;
      hit[bx][by] = true;
    }}
  }}
  std::puts("ok");
  return 0;
}}
"""
    with tempfile.TemporaryDirectory() as tmp:
        cpp, exe = os.path.join(tmp, "remap.cpp"), os.path.join(tmp, "remap")
        with open(cpp, "w") as fh:
            fh.write(program)
        subprocess.run([cxx, "-O1", "-o", exe, cpp], check=True, capture_output=True)
        out = subprocess.run([exe], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", program


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_remapped_gemm_compiles(arch: str) -> None:
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    if find_nvrtc() is None and find_nvcc() is None:
        pytest.skip("needs a CUDA compiler")
    src, ctx = _source(_matmul(*BIG, **TILE), arch)
    assert "tlx_grp" in src
    binary = compile_cuda(src, arch, kernel_name=ctx.data["cuda.meta"].kernel_name)
    assert binary.cubin


def _swizzled(*swizzle: Any) -> Any:
    return _matmul(1024, 1024, 1024, block_M=128, block_N=128, block_K=32, num_stages=2, swizzle=swizzle)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_use_swizzle_rows_columns_and_off(arch: str) -> None:
    rows = _source(_swizzled(4), arch)[0]
    assert "const int tlx_bid = blockIdx.y * gridDim.x + blockIdx.x;" in rows and "tlx_grp = tlx_gx * 4;" in rows
    cols = _source(_swizzled(4, "column"), arch)[0]
    assert "const int tlx_bid = blockIdx.x * gridDim.y + blockIdx.y;" in cols and "tlx_grp = tlx_gy * 4;" in cols
    off = _source(_swizzled(4, "row", False), arch)[0]
    assert "tlx_bid" not in off and "const int bx = blockIdx.x;" in off


@pytest.mark.parametrize("gx,gy,panel,column", [(16, 32, 12, False), (9, 16, 3, True), (7, 13, 4, False),
                                                (5, 40, 16, False), (33, 4, 2, True)])
def test_persistent_walk_follows_the_block_remap(gx: int, gy: int, panel: int, column: bool) -> None:
    """The persistent form's tile t runs what block ``remap(t)`` would: the same order, so every
    tile exactly once and the same panels for L2 reuse."""
    from tilelang_x.core_ir import dtypes
    from tilelang_x.core_ir import expr as E
    from tilelang_x.core_ir.evaluate import evaluate
    from tilelang_x.core_ir.stmt import Kernel, Seq
    from tilelang_x.plugins.cuda.hopper.persistent import plan_persistent

    bx, by = E.Var("bx", dtypes.int32), E.Var("by", dtypes.int32)
    kernel = Kernel((E.const(gx), E.const(gy)), (bx, by), (128,), Seq(()))
    pers = plan_persistent(kernel, E.const(8), E.const(0), 132 if gx * gy > 132 else gx * gy - 1, (panel, column))
    assert pers is not None
    seen = []
    for pid in range(pers.grid):
        for j in range(evaluate(pers.tiles_here, {pers.pid: pid, pers.stride: pers.grid})):
            env = {pers.pid: pid, pers.j: j, pers.stride: pers.grid}
            x, y = (evaluate(pers.block_of[v], env) for v in (bx, by))
            t = pid + j * pers.grid
            assert (x, y) == remap(t, gx, gy, panel, column), (pid, j)
            seen.append((x, y))
    assert sorted(seen) == [(x, y) for x in range(gx) for y in range(gy)]
