"""TileLang's SIMT escape hatch: thread queries and warp operations through the uniformity analysis,
the verifier, the interpreter and the CUDA code."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source
from tests.null.located import located_errors
from tilelang_x import knobs
from tilelang_x.core_ir.errors import TileLangError, TileLangSyntaxError, VerificationError
from tilelang_x.core_ir.stmt import Alloc, Kernel
from tilelang_x.core_ir.uniformity import Uniformity
from tilelang_x.core_ir.verify import verify
from tilelang_x.core_ir.visit import walk

where, raises = located_errors(__file__)


def _kernel(func: object) -> Kernel:
    return next(n for n in walk(func.body) if isinstance(n, Kernel))  # type: ignore[attr-defined]


def _allocs(func: object) -> dict[str, object]:
    return {n.buffer.name: n.buffer for n in walk(_kernel(func).body) if isinstance(n, Alloc)}


# ---- the uniformity analysis ----------------------------------------------------------------------

def test_a_var_made_varying_late_in_a_loop_makes_earlier_reads_varying() -> None:
    @T.prim_func
    def main(X: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            tx = T.get_thread_binding()
            carry = T.alloc_var(T.int32, init=0)
            seen = T.alloc_var(T.int32, init=0)
            steady = T.alloc_var(T.int32, init=0)
            for _i in T.serial(4):
                seen = carry * 1  # varying only from the second iteration on
                steady = steady + 1
                carry = tx
            X[0] = T.cast(seen + steady, T.float32)

    u = Uniformity(_kernel(main).body)
    bufs = _allocs(main)
    assert u.simt
    assert u.varying_buffer(bufs["carry"]) and u.varying_buffer(bufs["seen"])
    assert not u.varying_buffer(bufs["steady"])


def test_writes_under_a_divergent_if_make_a_var_varying_but_not_one_declared_inside() -> None:
    @T.prim_func
    def main(X: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            flag = T.alloc_var(T.int32, init=0)
            if T.get_thread_binding() < 7:
                flag = 1
                inner = T.alloc_var(T.int32, init=3)
                X[inner] = 1.0
            X[1] = T.cast(flag, T.float32)

    u = Uniformity(_kernel(main).body)
    bufs = _allocs(main)
    assert u.varying_buffer(bufs["flag"]) and not u.varying_buffer(bufs["inner"])


def test_a_kernel_without_thread_queries_is_uniform() -> None:
    @T.prim_func
    def main(X: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            v = T.alloc_var(T.int32, init=bx)
            X[v] = 1.0

    u = Uniformity(_kernel(main).body)
    assert not u.simt and not u.varying_buffer(_allocs(main)["v"])


# ---- the verifier ------------------------------------------------------------------------------

def _verify(make: object) -> None:
    verify(make())  # type: ignore[operator]


def test_tile_op_under_a_divergent_if_names_its_line() -> None:
    def make():
        @T.prim_func
        def main(X: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=128) as _:
                s = T.alloc_shared((128,), T.float32)
                if T.get_thread_binding() < 64:
                    T.clear(s)  # E:clear
                T.copy(s, X)

        return main

    raises(VerificationError, "clear", lambda: _verify(make), "differs between the threads", "hint:")


def test_sync_threads_under_a_divergent_if_names_its_line() -> None:
    def make():
        @T.prim_func
        def main(X: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=128) as _:
                if T.get_thread_binding() == 0:
                    X[0] = 1.0
                    T.sync_threads()  # E:sync

        return main

    raises(VerificationError, "sync", lambda: _verify(make), "T.sync_threads()", "never arrive")


def test_tile_op_at_a_per_thread_offset_names_its_line() -> None:
    def make():
        @T.prim_func
        def main(X: T.Tensor((512,), T.float32)):
            with T.Kernel(1, threads=128) as _:
                s = T.alloc_shared((4,), T.float32)
                T.copy(X[T.get_thread_binding() * 4], s)  # E:offset

        return main

    raises(VerificationError, "offset", lambda: _verify(make), "per-thread offset")


def test_tile_op_reading_a_per_thread_local_names_its_line() -> None:
    def make():
        @T.prim_func
        def main(X: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=128) as _:
                acc = T.alloc_local((4,), T.float32)
                for k in T.serial(4):
                    acc[k] = T.cast(T.get_thread_binding(), T.float32)
                T.copy(acc, X[0:4])  # E:reads

        return main

    raises(VerificationError, "reads", lambda: _verify(make), "`acc`", "per-thread values")


def test_parallel_loop_reading_a_per_thread_var_names_its_line() -> None:
    def make():
        @T.prim_func
        def main(X: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=128) as _:
                v = T.alloc_var(T.float32, init=T.get_thread_binding())
                for i in T.Parallel(128):
                    X[i] = v  # E:parallel_var

        return main

    raises(VerificationError, "parallel_var", lambda: _verify(make), "`v`", "other threads")


def test_thread_query_inside_parallel_names_its_line() -> None:
    def make():
        @T.prim_func
        def main(X: T.Tensor((128,), T.int32)):
            with T.Kernel(1, threads=128) as _:
                for i in T.Parallel(128):
                    X[i] = T.get_lane_idx()  # E:query

        return main

    raises(VerificationError, "query", lambda: _verify(make), "inside a T.Parallel loop")


def test_break_under_a_divergent_if_names_its_line() -> None:
    def make():
        @T.prim_func
        def main(X: T.Tensor((128,), T.int32)):
            with T.Kernel(1, threads=128) as _:
                for k in T.serial(8):
                    if T.get_thread_binding() < k:
                        break  # E:break
                    X[k] = k

        return main

    raises(VerificationError, "break", lambda: _verify(make), "`break`")


def test_warp_op_needs_whole_warps() -> None:
    def make():
        @T.prim_func
        def main(X: T.Tensor((48,), T.float32)):
            with T.Kernel(1, threads=48) as _:
                X[T.get_thread_binding()] = T.warp_reduce_sum(X[T.get_thread_binding()])  # E:warps

        return main

    raises(VerificationError, "warps", lambda: _verify(make), "48 threads", "multiple of 32")


def test_frontend_rejects_partial_masks_and_bad_widths() -> None:
    def mask():
        @T.prim_func
        def main(X: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64) as _:
                X[0] = T.shfl_xor(X[0], 1, mask=0xFFFF)  # E:mask

    def width():
        @T.prim_func
        def main(X: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64) as _:
                X[0] = T.shfl_down(X[0], 1, width=12)  # E:width

    raises(TileLangSyntaxError, "mask", mask, "full warp mask")
    raises(TileLangSyntaxError, "width", width, "power of two")


def test_thread_and_block_queries() -> None:
    @T.prim_func
    def main(X: T.Tensor((64,), T.int32)):
        with T.Kernel(3, 5, threads=[8, 4]) as (bx, by):
            assert T.get_thread_extents() == [8, 4, 1] and T.get_thread_extent(1) == 4
            assert T.get_block_binding(1) is by and T.get_block_bindings()[0] is bx
            assert [T.get_block_extent(0).value, T.get_block_extent(2).value] == [3, 1]
            assert T.get_thread_bindings()[2].value == 0  # extent 1: uniformly 0
            X[0] = T.get_warp_group_idx() + T.get_warp_idx_sync()

    assert "T.get_thread_binding(1) * 8" in main.script()


# ---- the interpreter ---------------------------------------------------------------------------

def test_interpreter_raises_when_part_of_a_warp_shuffles() -> None:
    @T.prim_func
    def main(X: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding()
            if tx < 40:
                X[tx] = T.shfl_xor(X[tx], 1)  # E:partial

    import tilelang_x as tilelang

    kernel = tilelang.compile(main, target="interp")
    raises(TileLangError, "partial", lambda: kernel(torch.zeros(64)), "warp 1", "all 32 lanes")


def test_interpreter_lanes_follow_divergent_control_flow() -> None:
    @T.prim_func
    def main(X: T.Tensor((64,), T.int32)):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding()
            n = T.alloc_var(T.int32, init=0)
            while n * n < tx:  # a per-thread trip count
                n += 1
            X[tx] = n + T.any_sync(tx == 40) * 100

    with knobs.scope(target_default="interp"):
        import tilelang_x as tilelang

        x = torch.zeros(64, dtype=torch.int32)
        tilelang.compile(main)(x)
    t = np.arange(64)
    expected = np.ceil(np.sqrt(t)).astype(np.int32) + np.where(t >= 32, 100, 0)
    assert np.array_equal(x.numpy(), expected)


# ---- CUDA --------------------------------------------------------------------------------------

def test_cuda_per_thread_store_is_unguarded_and_uniform_store_keeps_its_guard() -> None:
    @T.prim_func
    def main(X: T.Tensor((128,), T.float32), Y: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            tx = T.get_thread_binding()
            X[tx] = T.shfl_xor(X[tx], 3)
            Y[0] = 2.0

    src, _ = cuda_source(main)
    assert "X[tx] = __shfl_xor_sync(0xffffffffu, X[tx], 3, 32);" in src
    assert "if (tx == 0) {\n    X[" not in src
    assert "if (tx == 0) {\n    Y[0] = 2.0f;" in src


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_warp_reduction_and_no_warp_specialization(arch: str) -> None:
    from tests.null.cuda_suite_funcs import suite_funcs

    src, ctx = cuda_source(suite_funcs()["gemv_splitk_warp_reduce"](), arch)
    assert "tlx_warp_sum(C_accum[0])" in src and "TLX_WARP_REDUCE(tlx_warp_sum, float, v + o)" in src
    assert "threadIdx.y" in src and "cuda.ws" not in ctx.data


def test_cuda_atomic_load_at_a_per_thread_address_is_each_threads_own() -> None:
    # a block-uniform atomic load is made by thread 0 and broadcast through shared memory; one at a
    # per-thread address, or under a per-thread condition (where the block's barriers cannot be),
    # is made by every thread itself
    from tests.kernels import simt

    src = cuda_source(simt.flagged_copy.get_ir(), "sm_90a")[0]
    body = src[src.index("__global__"):]
    assert "aload" not in body
    assert "tlx_ld_acquire_32(&F[tx])" in body and "tlx_ld_seq_cst_32(&F[tx])" in body


# ---- T.match_any_sync, T.shuffle_elect ---------------------------------------------------------

def test_frontend_rejects_bad_elect_extents_and_match_masks() -> None:
    def extent(n):
        @T.prim_func
        def main(X: T.Tensor((64,), T.int32)):
            with T.Kernel(1, threads=64) as _:
                X[T.get_thread_binding()] = T.shuffle_elect(n)  # E:extent

    def mask():
        @T.prim_func
        def main(X: T.Tensor((64,), T.int32)):
            with T.Kernel(1, threads=64) as _:
                X[0] = T.match_any_sync(X[0], 0xFF)  # E:match-mask

    raises(TileLangSyntaxError, "extent", lambda: extent(48), "multiple of 32")
    raises(TileLangSyntaxError, "extent", lambda: extent(-32), "multiple of 32")
    raises(TileLangSyntaxError, "match-mask", mask, "full warp mask")


def test_interpreter_match_any_of_narrow_values_and_a_partial_elect() -> None:
    import tilelang_x as tilelang

    @T.prim_func
    def match(X: T.Tensor((64,), T.float16), Y: T.Tensor((64,), T.int64)):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding()
            Y[tx] = T.cast(T.match_any_sync(X[tx]), T.int64) + T.cast(T.match_any_sync(tx < 40), T.int64) * (1 << 32)

    x = torch.tensor([1.0, -0.0, 0.0, 2.0] * 16, dtype=torch.float16)
    y = torch.zeros(64, dtype=torch.int64)
    tilelang.compile(match, target="interp")(x, y)
    lane = torch.arange(64) % 32
    same_key = (1 << (lane % 4)) * sum(1 << (4 * k) for k in range(8))  # the lanes with the same key
    below = torch.tensor([0xFFFFFFFF] * 32 + [0xFF] * 8 + [0xFFFFFF00] * 24, dtype=torch.int64)
    assert torch.equal(y, same_key + below * (1 << 32))

    @T.prim_func
    def partial(X: T.Tensor((64,), T.int32)):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding()
            if tx % 2 == 0:
                X[tx] = T.shuffle_elect(32)  # E:partial-elect

    kernel = tilelang.compile(partial, target="interp")
    raises(TileLangError, "partial-elect", lambda: kernel(torch.zeros(64, dtype=torch.int32)), "all 32 lanes")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_match_any_of_narrow_values_compiles(arch: str) -> None:
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    @T.prim_func
    def main(H: T.Tensor((64,), T.float16), B: T.Tensor((64,), T.int8), Y: T.Tensor((64,), T.uint32)):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding()
            Y[tx] = T.match_any_sync(H[tx]) ^ T.match_any_sync(B[tx]) ^ T.match_any_sync(tx > 3)

    src, ctx = cuda_source(main, arch)
    assert "__match_any_sync(0xffffffffu, (float)(" in src and "__match_any_sync(0xffffffffu, (int)(B[tx]))" in src
    assert "tlx_elect" not in src
    if find_nvrtc() is None and find_nvcc() is None:
        pytest.skip("no CUDA compiler here")
    assert len(compile_cuda(src, arch, kernel_name=ctx.data["cuda.meta"].kernel_name).cubin) > 0


@pytest.mark.parametrize("arch,elect", [("sm_80", False), ("sm_90a", True)])
def test_cuda_shuffle_elect_is_elect_sync_on_sm90(arch: str, elect: bool) -> None:
    from tests.kernels import simt
    from tests.null.cuda_helpers import sass_text

    func = simt.warp_match_elect.get_ir()
    src = cuda_source(func, arch)[0]
    assert src.count("TLX_DEV bool tlx_elect_one()") == 1
    assert "if ((((tx >> 5) & 3) == 0) && tlx_elect_one()) {" in src
    sass = sass_text(func, arch)
    assert ("ELECT" in sass) is elect and "MATCH.ANY" in sass
