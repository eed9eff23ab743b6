"""The Hopper path (sm_90a), checked without a GPU: the suite GEMM and FlashAttention kernels compile
for sm_90a and their SASS (cuobjdump, from the nvidia-cuda-cuobjdump wheel) holds the instructions
that prove the path was taken: HGMMA (wgmma), UTMALDG (TMA loads), SYNCS (mbarriers), USETMAXREG
(warp specialization's register split). The pass configs turn each feature off again."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

import tilelang_x.language as T
from tests.kernels import attention, gemm
from tests.null.cuda_helpers import cuda_source, sass_ops, sass_text
from tests.null.cuda_suite_funcs import suite_funcs
from tilelang_x.core_ir import expr as E

FUNCS = suite_funcs()
HOPPER_KERNELS = ["gemm_128x128x32_3stage", "gemm_transpose_B", "gemm_bf16_fp32_accum", "gemm_fp16_tails",
                  "flash_attention", "flash_attention_causal", "flash_attention_pipelined"]


def _source(func: Any, arch: str = "sm_90a", configs: dict[str, bool] | None = None) -> tuple[str, Any]:
    return cuda_source(func, arch, configs)


def _sass(func: Any, arch: str = "sm_90a", configs: dict[str, bool] | None = None) -> dict[str, int]:
    return sass_ops(func, r"\b(HGMMA|HMMA|UTMALDG|SYNCS|USETMAXREG|LDGSTS)\b", arch, configs)


@pytest.mark.parametrize("name", HOPPER_KERNELS)
def test_sass_proves_hopper_path(name: str) -> None:
    ops = _sass(FUNCS[name]())
    assert ops.get("HGMMA") and ops.get("UTMALDG") and ops.get("SYNCS"), ops
    assert not ops.get("HMMA") and not ops.get("LDGSTS"), ops


def test_warp_specialized_gemm_splits_registers() -> None:
    from tests.kernels import gemm
    func = gemm.matmul.get_ir(512, 512, 512, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)
    ops = _sass(func)
    assert ops.get("USETMAXREG") and ops.get("HGMMA") and ops.get("UTMALDG"), ops
    source, ctx = _source(func)
    assert ctx.data["cuda.meta"].block == (384, 1, 1) and "__launch_bounds__(384, 1)" in source
    assert "TLX_WGMMA_WAIT(1);" in source  # one wgmma group stays in flight across k-iterations
    assert [m[2] for m in ctx.data["cuda.meta"].tensor_maps] == [(64, 128), (64, 64), (64, 16)]  # A, B, C's store


@pytest.mark.parametrize("configs, present, absent", [
    ({"tl.disable_tma_lower": True}, ("HGMMA", "LDGSTS"), ("UTMALDG",)),
    ({"tl.disable_wgmma": True}, ("HMMA", "UTMALDG"), ("HGMMA",)),
    ({"tl.disable_warp_specialized": True}, ("HGMMA", "UTMALDG"), ("USETMAXREG",)),
])
def test_pass_configs_turn_features_off(configs: dict[str, bool], present: tuple[str, ...],
                                        absent: tuple[str, ...]) -> None:
    ops = _sass(FUNCS["gemm_128x128x32_3stage"](), configs=configs)
    assert all(ops.get(p) for p in present) and not any(ops.get(a) for a in absent), ops


@pytest.mark.parametrize("trans_b", [True, False])
def test_float8_gemm_takes_wgmma_when_both_tiles_are_k_major(trans_b: bool, caplog: pytest.LogCaptureFixture) -> None:
    func = gemm.matmul.get_ir(256, 256, 256, block_M=128, block_N=128, block_K=128, num_stages=2, threads=256,
                              in_dtype=T.float8_e4m3, out_dtype=T.float16, trans_B=trans_b)
    with caplog.at_level(logging.DEBUG, logger="tilelang_x.cuda.layout"):
        source, _ = _source(func)
    assert ("tlx_wgmma_ss_e4m3_n128" in source) == trans_b
    # B stored [K, N]: C^T = B^T A^T, B^T gathered byte by byte into registers, and the debug log says so
    assert ("tlx_wgmma_rs_e4m3_n128" in source) == (not trans_b)
    assert "tlx_mma_e4m3e4m3(" not in source
    assert ("runs on wgmma as C^T = B^T A^T" in caplog.text) == (not trans_b)


def test_float8_gemm_before_sm89_says_where_it_runs_on_tensor_cores(caplog: pytest.LogCaptureFixture) -> None:
    func = gemm.matmul.get_ir(256, 256, 256, block_M=128, block_N=128, block_K=128, num_stages=2, threads=256,
                              in_dtype=T.float8_e4m3, out_dtype=T.float16, trans_B=True)
    with caplog.at_level(logging.DEBUG, logger="tilelang_x.cuda.layout"):
        _source(func, "sm_80")
    assert "a per-element FMA loop; float8 runs on tensor cores on sm_89 and later" in caplog.text


def test_pre_hopper_target_takes_sm80_path() -> None:
    source, ctx = _source(FUNCS["flash_attention_pipelined"](), "sm_80")
    assert "wgmma" not in source and "tlx_tma_load" not in source and not ctx.data["cuda.meta"].tensor_maps


def test_unaligned_rows_keep_cp_async() -> None:
    from tests.kernels import gemm
    func = gemm.matmul.get_ir(128, 128, 100, block_M=64, block_N=64, block_K=32, num_stages=2)  # 200-byte rows
    source, ctx = _source(func)
    # A's rows cannot be a TMA map: the loop keeps cp.async (the epilogue's store to C has its map)
    assert [m[0] for m in ctx.data["cuda.meta"].tensor_maps] == [2]
    assert "tlx_cp_async" in source and "tlx_wgmma_ss_" in source


@pytest.mark.parametrize("span, elem", [(128, 2), (64, 2), (32, 2), (128, 1)])
def test_panel_layout_matches_hardware_swizzle(span: int, elem: int) -> None:
    """Byte offsets equal the TMA / wgmma swizzle of backends.md A5 on panel-contiguous bytes."""
    from tilelang_x.plugins.cuda.hopper.layout import panel_layout

    cols = 2 * span // elem if span == 128 else span // elem
    lay = panel_layout((16, cols), elem)
    assert lay is not None and lay.span == span
    shift = {128: 7, 64: 7, 32: 7}[span]
    mask = {128: 7, 64: 3, 32: 1}[span]
    for r in range(16):
        for c in range(cols):
            p, w = divmod(c, lay.panel)
            plain = p * 16 * span + r * span + w * elem
            want = plain ^ (((plain >> shift) & mask) << 4)
            got = E.as_int(lay.offset((E.const(r), E.const(c))))
            assert got is not None and got * elem == want, (r, c)


def test_overlapped_wgmma_drains_before_epilogue() -> None:
    """With a wgmma group in flight across k-iterations, every read of an accumulator register in
    the SASS comes after a ``wait_group 0`` (ptxas sinks a drain placed after the loop below the
    epilogue's reads; the last iteration drains inside the loop)."""
    from tests.kernels import gemm
    func = gemm.matmul.get_ir(512, 512, 512, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)
    text = sass_text(func)
    lines = [ln for ln in text.splitlines() if re.search(r"HGMMA|DEPBAR|F2FP|EXIT", ln)]
    first_read = next(i for i, ln in enumerate(lines) if "F2FP" in ln)
    drains = [i for i, ln in enumerate(lines) if "DEPBAR.LE gsb0, 0x0" in ln]
    assert drains and drains[0] < first_read, lines[:first_read + 2]


def test_gemm_goes_persistent_and_flash_attention_does_not() -> None:
    from tests.kernels import gemm

    source, ctx = _source(FUNCS["flash_attention_pipelined"]())
    assert "tlx_tma_load" in source and "cuda.ws" not in ctx.data  # softmax in the loop: no producer warpgroup
    func = gemm.matmul.get_ir(4096, 4096, 512, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)
    source, pers = _source(func)  # 512 tiles of a gemm-only loop: one block per SM
    assert pers.data["cuda.meta"].grid_static == (132, 1, 1) and "tlx_tile_j" in source
    _, plain = _source(func, configs={"tlx.persistent": False})
    assert plain.data["cuda.meta"].grid_static == (16, 32, 1)
    few = gemm.matmul.get_ir(1024, 1024, 512, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)
    assert _source(few)[1].data["cuda.meta"].grid_static == (4, 8, 1)  # 32 tiles: nothing to walk
    clustered = gemm.matmul.get_ir(4096, 4096, 512, block_M=128, block_N=256, block_K=64, num_stages=3,
                                   threads=256, cluster=(2, 1, 1))
    # clusters of 2 walk cluster tiles: 66 clusters (the runtime sizes it to the clusters that fit)
    assert _source(clustered)[1].data["cuda.meta"].grid_static == (132, 1, 1)
    fa = attention.flash_attention.get_ir(4, 32, 4096, 128, False, block_M=128, block_N=128, num_stages=2,
                                          threads=256)
    source, ctx = _source(fa)  # warp-specialized with the softmax: not persistent (it would lose the rotation)
    assert "cuda.ws" in ctx.data and "tlx_tile_j" not in source


@pytest.mark.parametrize("configs", [{}, {"tlx.ws_compute_loops": True}])
def test_generated_source_is_deterministic(configs: dict[str, bool]) -> None:
    """The source is the disk cache's key: names must not depend on object identities."""
    first, _ = _source(FUNCS["flash_attention_pipelined"](), "sm_90a", configs)
    second, _ = _source(FUNCS["flash_attention_pipelined"](), "sm_90a", configs)
    assert first == second


@pytest.mark.parametrize("sms,cluster,tiles,fits,want", [(132, None, 512, 0, 132), (78, None, 512, 0, 78),
                                                         (114, None, 50, 0, 50), (77, (2, 1, 1), 512, 66, 76),
                                                         (132, (2, 1, 1), 3, 66, 2), (132, (4, 1, 1), 512, 30, 120),
                                                         (132, (4, 1, 1), 512, 0, 132), (132, (4, 1, 1), 512, -1, 132)])
def test_persistent_grid_is_one_block_per_sm_of_the_device(monkeypatch: pytest.MonkeyPatch, sms: int,
                                                           cluster: Any, tiles: int, fits: int, want: int) -> None:
    """The launch metadata says 132 blocks; loading the kernel sets one per SM of the device (an
    H20 has 78), whole clusters, no more clusters than fit at once (``fits``; 0: the driver cannot
    say, -1: the query fails), at most one per tile: the kernel strides by ``gridDim.x``."""
    import contextlib
    import dataclasses

    from tests.kernels import gemm
    from tilelang_x.plugins.cuda import driver, runtime

    func = gemm.matmul.get_ir(4096, 4096, 512, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)
    source, ctx = _source(func)
    meta = ctx.data["cuda.meta"]
    assert meta.grid_static == (132, 1, 1) and meta.persistent_tiles == 512 and "= gridDim.x;" in source
    monkeypatch.setattr(driver, "device_attribute", lambda dev, attr: sms)
    monkeypatch.setattr(runtime, "_current_device", lambda: 0)
    asked = []
    monkeypatch.setattr(driver, "context", lambda ctx: contextlib.nullcontext())
    def max_active_clusters(fn: int, grid: Any, block: Any, smem: int) -> int:
        asked.append(fn)
        if fits < 0:  # the driver refuses the query: the grid stays one block per SM
            raise driver.CudaError("cuOccupancyMaxActiveClusters failed")
        return fits

    monkeypatch.setattr(driver, "max_active_clusters", max_active_clusters)
    kernel = type("Loaded", (), {"resolve": lambda self, device: (7, 1)})()
    meta = dataclasses.replace(meta, persistent_tiles=tiles, cluster=cluster)
    assert runtime._one_block_per_sm(kernel, meta).grid_static == (want, 1, 1)  # type: ignore[arg-type]
    assert asked == ([7] if cluster else [])


def test_launch_config_matches_cuda_h() -> None:
    """``driver._LaunchConfig`` (for ``cuOccupancyMaxActiveClusters``) has cuda.h's layout."""
    import ctypes
    import os
    import shutil
    import subprocess
    import tempfile

    from tilelang_x.plugins.cuda import driver
    from tilelang_x.plugins.cuda.compile import cuda_include_dirs

    cxx = shutil.which("g++") or shutil.which("c++")
    inc = next((d for d in cuda_include_dirs() if os.path.isfile(os.path.join(d, "cuda.h"))), None)
    if cxx is None or inc is None:
        pytest.skip("needs a host C++ compiler and the CUDA toolkit's cuda.h")
    fields = ("gridDimX", "blockDimX", "sharedMemBytes", "hStream", "attrs", "numAttrs")
    program = "#include <cstddef>\n#include <cstdio>\n#include <cuda.h>\nint main() {\n"
    program += '  std::printf("%zu", sizeof(CUlaunchConfig));\n'
    program += "".join(f'  std::printf(" %zu", offsetof(CUlaunchConfig, {f}));\n' for f in fields) + "}\n"
    with tempfile.TemporaryDirectory() as tmp:
        cpp, exe = os.path.join(tmp, "cfg.cpp"), os.path.join(tmp, "cfg")
        with open(cpp, "w") as fh:
            fh.write(program)
        subprocess.run([cxx, "-I", inc, "-o", exe, cpp], check=True, capture_output=True)
        want = [int(x) for x in subprocess.run([exe], capture_output=True, text=True, check=True).stdout.split()]
    cfg = driver._LaunchConfig
    ours = [ctypes.sizeof(cfg)] + [getattr(cfg, f).offset
                                   for f in ("grid", "block", "shared_mem_bytes", "stream", "attrs", "num_attrs")]
    assert ours == want


@T.prim_func
def _gemm_waiting_for_one(A: T.Tensor((256, 256), T.float16), B: T.Tensor((256, 256), T.float16),
                          C: T.Tensor((256, 256), T.float16)):
    with T.Kernel(2, 2, threads=128) as (bx, by):
        A_s = T.alloc_shared((128, 64), T.float16)
        B_s = T.alloc_shared((64, 128), T.float16)
        C_f = T.alloc_fragment((128, 128), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(4, num_stages=3):
            T.copy(A[by * 128, k * 64], A_s)
            T.copy(B[k * 64, bx * 128], B_s)
            for i, j in T.Parallel(64, 128):  # compute in the loop: the plain (not warp-specialized) pipeline
                B_s[i, j] = B_s[i, j] * 2.0
            T.gemm(A_s, B_s, C_f, wg_wait=1)
        T.copy(C_f, C[by * 128, bx * 128])


def test_a_kernel_wg_wait_leaves_no_group_in_flight(caplog: pytest.LogCaptureFixture) -> None:
    # a group left in flight would read its stage while the pipeline refills it, and the
    # accumulators while the epilogue reads them: the compiler places the waits instead
    with caplog.at_level(logging.DEBUG, logger="tilelang_x.cuda.hopper"):
        src = cuda_source(_gemm_waiting_for_one, "sm_90a")[0]
    body = src[src.index("__global__"):]
    assert "tlx_wgmma_wait0();" in body and "TLX_WGMMA_WAIT(1)" not in body
    assert "wg_wait=1" in caplog.text and "the compiler places the wgmma waits" in caplog.text


def test_mla_decode_takes_the_warp_specialized_path_with_two_column_warpgroups() -> None:
    # TileLang's MLA decode: FullCol splits the score and output columns between the two consumer
    # warpgroups, whose row maxima and sums meet in shared memory behind named barriers
    from tilelang_x.core_ir.kernel_parts import kernel_parts

    attend = kernel_parts(attention.mla_decode.get_ir(64, 128, 8192, num_split=4))[0]
    src, ctx = cuda_source(attend, "sm_90a")
    body = src[src.index("__global__"):]
    assert "TLX_SETMAXNREG_INC" in body and "tlx_tma_load_4d(KV_shared_s" in body
    assert "tlx_named_bar_sync(1, 256)" in body
    assert ctx.data["cuda.meta"].smem_bytes <= 227 * 1024
    ops = sass_ops(attend, r"\b(HGMMA|UTMALDG|SYNCS)\b")
    assert ops.get("HGMMA") and ops.get("UTMALDG") and ops.get("SYNCS"), ops


def test_a_row_of_scales_is_loaded_by_tma_unswizzled_and_aligned() -> None:
    # W4A16's scale tile is one row (1 x 128 fp16): a linear TMA box; each of its stages starts at a
    # multiple of 128 bytes, as TMA needs of an unswizzled destination
    from tests.kernels import dequant

    f = dequant.matmul_w4a16.get_ir(512, 256, 512, 128, block_M=256, block_N=128, block_K=64, num_stages=3,
                                    threads=256, registers=True)
    src, ctx = cuda_source(f, "sm_90a")
    assert "tlx_tma_load_2d(S_shared_s" in src
    offset = int(re.search(r"S_shared = \(tlx_half\*\)\(tlx_smem \+ (\d+)\)", src).group(1))
    assert offset % 128 == 0
    specs = {s.var.name: s for s in ctx.data["cuda.tmaps"]}
    scales = next(s for name, s in specs.items() if name.startswith("Scales"))
    assert scales.box == (128, 1) and scales.swizzle == 0


def test_a_row_tile_smaller_than_128_bytes_keeps_cp_async() -> None:
    # a 1 x 32 fp16 row (64 bytes): its second stage would start off TMA's 128-byte alignment
    from tests.kernels import dequant

    f = dequant.matmul_w4a16_split_k.get_ir(16, 256, 1024, 4, 128, block_M=16, block_N=32, block_K=128)
    from tilelang_x.core_ir.kernel_parts import kernel_parts

    src = cuda_source(kernel_parts(f)[0], "sm_90a")[0]
    assert "tlx_tma_load_2d(S_shared_s" not in src and "tlx_cp_async" in src


def test_cross_warpgroup_reductions_share_one_workspace() -> None:
    # MLA's row maximum and row sum both combine the two warpgroups through shared memory; each
    # starts with a barrier, so one workspace serves both and two 64-key stages fit beside Q
    from tilelang_x.core_ir.kernel_parts import kernel_parts

    attend = kernel_parts(attention.mla_decode.get_ir(64, 128, 8192, num_split=2, block_N=64, num_stages=2))[0]
    src, ctx = cuda_source(attend, "sm_90a")
    assert len(set(re.findall(r"\bred_ws_\d+\b", src))) == 1
    assert ctx.data["cuda.meta"].smem_bytes <= 227 * 1024


def test_paged_decode_loads_pages_by_tma_at_offsets_read_from_the_block_table() -> None:
    from tilelang_x.core_ir.kernel_parts import kernel_parts

    attend = kernel_parts(attention.paged_gqa_decode.get_ir(32, 32, 8, 128, 64, 128, num_split=4))[0]
    src = cuda_source(attend, "sm_90a")[0]
    assert re.search(r"tlx_tma_load_4d\(K_shared_s [^;]*BlockTable\[", src)
    ops = sass_ops(attend, r"\b(HGMMA|UTMALDG)\b")
    assert ops.get("HGMMA") and ops.get("UTMALDG"), ops
