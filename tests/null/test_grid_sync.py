"""``T.sync_grid``, ``T.pdl_trigger``, ``T.pdl_sync``: the frontend's checks, the interpreter's
side-by-side blocks (plugins/interp/grid_sync.py), the CUDA code and the launch attributes
(plugins/cuda/grid_sync.py, runtime_ex.py). The kernels' results are suite cases
(tests/kernels/grid.py)."""

from __future__ import annotations

import ctypes
import subprocess

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import grid, reductions
from tests.null.cuda_helpers import cuda_source
from tilelang_x.core_ir.errors import BackendNotImplementedError, OutOfBoundsError, TileLangError, VerificationError
from tilelang_x.core_ir.kernel_parts import kernel_parts
from tilelang_x.plugins.cuda import driver, runtime_ex
from tilelang_x.plugins.cuda.meta import KernelMeta
from tilelang_x.plugins.interp.grid_sync import MAX_GRID_BLOCKS


def _interp(func: object) -> object:
    return tilelang.compile(func, target="interp")


def test_blocks_see_every_block_s_writes_after_the_barrier() -> None:
    """Without the barrier block 0 would read partial sums no block has written yet."""
    x = torch.rand(32, 16, generator=torch.Generator().manual_seed(3))
    partial = torch.zeros(32)
    y = _interp(grid.normalize.get_ir(32, 16))(x, partial)
    torch.testing.assert_close(y, x / x.sum())
    torch.testing.assert_close(partial, x.sum(1))


def _counted(n: int, barriers_of_block_1: int) -> object:
    @T.prim_func
    def main(C: T.Tensor((n,), T.int32), D: T.Tensor((n,), T.int32)):
        with T.Kernel(n, threads=32) as bx:
            if bx == 1:
                for _ in T.serial(barriers_of_block_1):
                    T.sync_grid()
            else:
                C[bx] = 1
                T.sync_grid()
                D[bx] = C[(bx + 1) % n] + 1

    return main


def test_blocks_that_reach_different_numbers_of_barriers_fail_at_the_barrier() -> None:
    with pytest.raises(TileLangError, match="ended without reaching a grid barrier") as e:
        _interp(_counted(4, 0))(torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32))
    assert "test_grid_sync.py" in str(e.value.loc)


def test_a_block_dependent_condition_with_matching_counts_runs() -> None:
    c, d = torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
    _interp(_counted(4, 1))(c, d)
    assert d.tolist() == [1, 0, 2, 2]  # blocks 2 and 3 see the C their neighbour wrote before the barrier


def test_an_error_in_one_block_stops_the_launch_with_that_error() -> None:
    @T.prim_func
    def main(A: T.Tensor((4,), T.float32)):
        with T.Kernel(4, threads=32) as bx:
            T.sync_grid()
            A[bx * 2] = 1.0

    off = {"tl.disable_safe_memory_legalize": True}  # else the store outside is dropped
    with pytest.raises(OutOfBoundsError):
        tilelang.compile(main, target="interp", pass_configs=off)(torch.zeros(4))


def test_the_interpreter_refuses_grids_above_its_bound() -> None:
    @T.prim_func
    def main(A: T.Tensor((MAX_GRID_BLOCKS + 1,), T.float32)):
        with T.Kernel(MAX_GRID_BLOCKS + 1, threads=32) as bx:
            T.sync_grid()
            A[bx] = 1.0

    with pytest.raises(BackendNotImplementedError, match=f"at most {MAX_GRID_BLOCKS} blocks"):
        _interp(main)(torch.zeros(MAX_GRID_BLOCKS + 1))


def test_pdl_points_change_nothing_in_the_interpreter() -> None:
    a = torch.randn(64, 128)
    out = _interp(reductions.split_row_sum.get_ir(64, 128, pdl=True))(a, torch.zeros(4, 64))
    torch.testing.assert_close(out, a.sum(1), atol=1e-4, rtol=1e-4)


def test_sync_grid_inside_parallel_is_rejected() -> None:
    with pytest.raises(VerificationError, match=r"T.sync_grid\(\) inside a T.Parallel loop"):
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64):
                for i in T.Parallel(64):
                    A[i] = 1.0
                    T.sync_grid()

        _interp(main)


def test_sync_grid_under_a_per_thread_condition_is_rejected() -> None:
    with pytest.raises(VerificationError, match=r"T.sync_grid\(\) under a condition that differs"):
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(2, threads=64) as bx:
                tx = T.get_thread_binding()
                if tx < 32:
                    T.sync_grid()
                A[bx] = 1.0

        _interp(main)


@pytest.mark.parametrize("name", ["sync_grid", "pdl_trigger", "pdl_sync"])
def test_outside_a_kernel_is_a_syntax_error(name: str) -> None:
    with pytest.raises(TileLangError, match=f"T.{name} must be used inside"):
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            getattr(T, name)()
            with T.Kernel(1, threads=64):
                A[0] = 1.0


# ---- CUDA ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_grid_barrier_code_and_cooperative_meta(arch: str) -> None:
    src, ctx = cuda_source(grid.smooth.get_ir(512, 5), arch)
    meta = ctx.data["cuda.meta"]
    assert meta.cooperative and not meta.pdl
    assert meta.params[-1].name == "tlx_grid_bar" and meta.params[-1].index == 3  # appended after X, Work, Y
    assert "unsigned int* __restrict__ tlx_grid_bar)" in src
    assert src.count("tlx_grid_sync(tlx_grid_bar);") == 2  # before the loop and inside it
    assert src.count("__device__ __forceinline__ void tlx_grid_sync(") == 1


def test_kernels_without_the_new_statements_do_not_include_the_header() -> None:
    src, ctx = cuda_source(kernel_parts(reductions.split_row_sum.get_ir(96, 256, pdl=True))[0], "sm_80")
    assert "tlx_pdl_trigger();" in src and not ctx.data["cuda.meta"].pdl

    plain, ctx = cuda_source(kernel_parts(reductions.split_row_sum.get_ir(96, 256))[1], "sm_90a")
    assert "tlx_grid.h" not in plain and "griddepcontrol" not in plain
    assert not ctx.data["cuda.meta"].pdl and not ctx.data["cuda.meta"].cooperative


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_pdl_wait_is_set_only_for_the_dependent_kernel_on_sm90(arch: str) -> None:
    parts = kernel_parts(reductions.split_row_sum.get_ir(96, 256, pdl=True))
    first, second = (cuda_source(p, arch) for p in parts)
    assert not first[1].data["cuda.meta"].pdl
    assert second[1].data["cuda.meta"].pdl == (arch == "sm_90a")
    body = second[0][second[0].index('extern "C"'):]
    assert body.index("tlx_pdl_sync();") < body.index("Partial[")  # waits before it reads the first's output


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx_has_griddepcontrol_only_on_sm90(arch: str) -> None:
    from tilelang_x.plugins.cuda.compile import find_nvcc

    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("needs nvcc")
    src, _ = cuda_source(kernel_parts(reductions.split_row_sum.get_ir(96, 256, pdl=True))[1], arch)
    ptx = subprocess.run([nvcc, "-ptx", f"-arch={arch.replace('sm_', 'compute_')}", "-x", "cu", "-", "-o", "-"],
                         input=src, capture_output=True, text=True, check=True).stdout
    assert ("griddepcontrol.wait" in ptx) == (arch == "sm_90a")
    assert "griddepcontrol.launch_dependents" not in ptx  # the second kernel does not trigger


def _pipelined_gemm(sync: bool) -> object:
    @T.prim_func
    def main(A: T.Tensor((256, 256), T.float16), B: T.Tensor((256, 256), T.float16),
             C: T.Tensor((256, 256), T.float16)):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 32), T.float16)
            B_s = T.alloc_shared((32, 128), T.float16)
            acc = T.alloc_fragment((128, 128), T.float32)
            T.clear(acc)
            for k in T.Pipelined(8, num_stages=3):
                T.copy(A[by * 128, k * 32], A_s)
                T.copy(B[k * 32, bx * 128], B_s)
                T.gemm(A_s, B_s, acc)
            if sync:
                T.sync_grid()
            T.copy(acc, C[by * 128, bx * 128])

    return main


def test_grid_sync_kernels_are_not_warp_specialized() -> None:
    """The same gemm gets a producer warpgroup (256 threads) without the barrier, none with it."""
    assert cuda_source(_pipelined_gemm(False), "sm_90a")[1].data["cuda.meta"].block == (256, 1, 1)
    src, ctx = cuda_source(_pipelined_gemm(True), "sm_90a")
    meta = ctx.data["cuda.meta"]
    assert meta.block == (128, 1, 1) and meta.cooperative and meta.tensor_maps  # the plain TMA pipeline
    assert "tlx_grid_sync(tlx_grid_bar);" in src


def test_launch_attribute_layout_matches_cuda_h() -> None:
    assert ctypes.sizeof(driver.LaunchAttribute) == 72
    assert driver.LaunchAttribute.value.offset == 8


def _meta(cooperative: bool, pdl: bool) -> KernelMeta:
    return KernelMeta("k", (), (128, 1, 1), grid_static=(4, 1, 1), cooperative=cooperative, pdl=pdl)


@pytest.mark.parametrize(("cooperative", "pdl", "ids"), [(True, False, [2]), (False, True, [6]), (False, False, [])])
def test_launch_attributes_of_the_meta(cooperative: bool, pdl: bool, ids: list[int]) -> None:
    assert runtime_ex.launch_attributes(_meta(cooperative, pdl)) == ids


def test_launch_ex_passes_config_and_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}

    def fake_launch(config, fn, params, extra) -> int:  # noqa: ANN001 - the ctypes call's arguments
        cfg = config._obj
        attrs = ctypes.cast(cfg.attrs, ctypes.POINTER(driver.LaunchAttribute))
        seen.update(grid=tuple(cfg.grid), block=tuple(cfg.block), smem=cfg.shared_mem_bytes, stream=cfg.stream,
                    attrs=[(attrs[i].id, attrs[i].value) for i in range(cfg.num_attrs)], fn=fn.value)
        return 0

    monkeypatch.setattr(driver, "launch_kernel_ex", lambda: fake_launch)
    ex = runtime_ex.LaunchEx(_meta(True, True))
    assert ex(ctypes.c_void_p(0x1234), 4, 2, 1, 128, 1, 1, 1024, 0x55, None, None) == 0
    assert seen == {"grid": (4, 2, 1), "block": (128, 1, 1), "smem": 1024, "stream": 0x55,
                    "attrs": [(2, 1), (6, 1)], "fn": 0x1234}
