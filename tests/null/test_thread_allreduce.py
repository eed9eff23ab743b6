# Kernel code is written as users write it (unused block and loop variables included).
# ruff: noqa: F841, B023
"""TVM's cross-thread reduction (``T.attr`` + ``T.comm_reducer`` + ``T.tvm_thread_allreduce``):
the interpreter against torch for TileLang's GEMV example forms and every reducer, the spellings
TileLang's examples use, the errors (each naming its line), and the CUDA code: shuffles within a
warp, a shared workspace across warps and along threadIdx.y / z, compiled for sm_80 and sm_90a."""

from __future__ import annotations

import math
import re

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import thread_allreduce as kernels
from tests.null.cuda_helpers import cuda_source
from tests.null.located import located_errors
from tilelang_x import knobs
from tilelang_x.core_ir.errors import NotSupportedError, TileLangSyntaxError, TileLangTypeError, VerificationError

where, raises = located_errors(__file__)


def _interp(run, *args):
    with knobs.scope(target_default="interp"):
        return run("cpu", *args)


# ---- the GEMV examples against torch ------------------------------------------------------------

@pytest.mark.parametrize("n_partition", [1, 4, 8])
@pytest.mark.parametrize("reduce_threads", [8, 16, 32, 64, 128])
def test_gemv_example_form_matches_torch(reduce_threads: int, n_partition: int) -> None:
    out, ref = _interp(kernels.run_gemv, 2, 19, 300, reduce_threads, n_partition)
    torch.testing.assert_close(out, ref, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize(("reduce_threads", "n_partition"), [(8, 8), (32, 4), (64, 1), (128, 2)])
def test_gemv_with_float16_accumulation(reduce_threads: int, n_partition: int) -> None:
    out, ref = _interp(kernels.run_gemv, 2, 16, 160, reduce_threads, n_partition, "float16")
    torch.testing.assert_close(out, ref, atol=6e-2, rtol=2e-2)


@pytest.mark.parametrize(("reduce_threads", "n_partition"), [(12, 3), (48, 2), (96, 1)])
def test_gemv_with_group_sizes_that_are_not_powers_of_two(reduce_threads: int, n_partition: int) -> None:
    out, ref = _interp(kernels.run_gemv, 2, 13, 250, reduce_threads, n_partition)
    torch.testing.assert_close(out, ref, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize(("N", "K", "block_n", "reduce_threads"), [(64, 512, 2, 32), (16, 1024, 4, 16),
                                                                    (8, 2048, 1, 128), (32, 512, 8, 8)])
def test_tilelang_splitk_gemv_vectorized_tvm_reduces_along_threadidx_y(N: int, K: int, block_n: int,
                                                                       reduce_threads: int) -> None:
    out, ref = _interp(kernels.run_splitk_gemv_tvm, N, K, block_n, reduce_threads)
    torch.testing.assert_close(out, ref, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize(("M", "K", "reduce_threads", "rows"), [(7, 20, 32, 2), (5, 300, 64, 4), (6, 50, 24, 1),
                                                                  (9, 9, 8, 8)])
def test_max_reducer_with_a_condition(M: int, K: int, reduce_threads: int, rows: int) -> None:
    out, ref = _interp(kernels.run_row_max, M, K, reduce_threads, rows)
    torch.testing.assert_close(out, ref, atol=0, rtol=0)


# ---- every reducer, every thread axis: each thread of a group gets the group's result ------------

_REDUCERS = {
    "sum": (lambda x, y: x + y, lambda t, a: t.sum(a)),
    "prod": (lambda x, y: x * y, lambda t, a: t.prod(a)),
    "max": (lambda x, y: T.max(x, y), lambda t, a: t.amax(a)),
    "min": (lambda x, y: T.min(x, y), lambda t, a: t.amin(a)),
    "bitand": (lambda x, y: x & y, None),
    "bitor": (lambda x, y: x | y, None),
    "bitxor": (lambda x, y: x ^ y, None),
}
_IDENTITY = {"sum": 0, "prod": 1, "max": -(2**31), "min": 2**31 - 1, "bitand": -1, "bitor": 0, "bitxor": 0}


def _groups_ir(kind: str, dtype, threads: tuple[int, ...], dim: int):
    """Thread t (linear index) reduces x[t] with the threads of its group along axis ``dim`` and
    writes y[t]; threads whose x is negative leave themselves out (the condition)."""
    n = math.prod(threads)
    combiner = _REDUCERS[kind][0]
    ident = T.min_value(dtype) if kind == "max" and dtype.is_float else \
        T.max_value(dtype) if kind == "min" and dtype.is_float else _IDENTITY[kind]

    @T.prim_func
    def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=threads) as bx:
            tx, ty, tz = T.get_thread_bindings()
            t = tx + ty * threads[0] + (tz * threads[0] * threads[1] if len(threads) > 2 else 0)
            red = T.alloc_local((1,), dtype)
            with T.attr(T.comm_reducer(combiner, [T.cast(ident, dtype)]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), X[t], X[t] >= 0, red[0], (tx, ty, tz)[dim],
                                                  dtype="handle"))
            Y[t] = red[0]

    return main


def _groups(kind: str, dtype, threads: tuple[int, ...], dim: int):
    return tilelang.compile(_groups_ir(kind, dtype, threads, dim), out_idx=[-1], target="interp")


def _reference(kind: str, x: torch.Tensor, threads: tuple[int, ...], dim: int) -> torch.Tensor:
    shape = tuple(reversed((tuple(threads) + (1, 1))[:3]))  # (z, y, x)
    axis = 2 - dim
    big = torch.finfo(torch.float32).max
    floats = {"sum": 0.0, "prod": 1.0, "max": -big, "min": big}  # T.min_value / T.max_value
    ident = torch.full_like(x, floats[kind] if x.dtype.is_floating_point else _IDENTITY[kind])
    g = torch.where(x >= 0, x, ident).reshape(shape)
    if _REDUCERS[kind][1] is not None:
        r = _REDUCERS[kind][1](g, axis)
    else:
        r = g.select(axis, 0)
        op = {"bitand": torch.bitwise_and, "bitor": torch.bitwise_or, "bitxor": torch.bitwise_xor}[kind]
        for i in range(1, g.shape[axis]):
            r = op(r, g.select(axis, i))
    return r.unsqueeze(axis).expand(shape).reshape(-1).to(x.dtype)


@pytest.mark.parametrize(("threads", "dim"), [((32,), 0), ((8, 4), 0), ((16, 3), 0), ((64, 2), 0), ((128,), 0),
                                              ((6, 5), 0), ((4, 8), 1), ((4, 6, 2), 1), ((2, 2, 8), 2),
                                              ((96,), 0)])
@pytest.mark.parametrize("kind", ["sum", "max", "min", "bitand", "bitor", "bitxor"])
def test_every_thread_of_a_group_gets_its_reduction(kind: str, threads: tuple[int, ...], dim: int) -> None:
    n = math.prod(threads)
    g = torch.Generator().manual_seed(n + dim)
    if kind.startswith("bit"):
        x = torch.randint(0, 2**30, (n,), generator=g, dtype=torch.int32)
        x[::7] = -1  # left out
        dtype, tol = T.int32, 0.0
    else:
        x = torch.randn(n, generator=g)
        dtype, tol = T.float32, 1e-5
    out = _groups(kind, dtype, threads, dim)(x)
    torch.testing.assert_close(out, _reference(kind, x, threads, dim), atol=tol, rtol=tol)


def test_product_reducer_of_integers() -> None:
    x = torch.tensor([1, 2, 3, -1, 2, 2, 1, 5] * 2, dtype=torch.int32)
    out = _groups("prod", T.int32, (8, 2), 0)(x)
    assert out.tolist() == [120] * 8 + [120] * 8


# ---- the spellings of TileLang's examples -------------------------------------------------------

@pytest.mark.parametrize("variant", ["cast", "float32", "bool", "bare", "handle_first", "thread_binding"])
def test_spellings_of_the_examples(variant: str) -> None:
    @T.prim_func
    def main(X: T.Tensor((4, 32), T.float32), Y: T.Tensor((4,), T.float32)):
        with T.Kernel(4, threads=32) as bx:
            tx = T.thread_binding(0, 32, thread="threadIdx.x") if variant == "thread_binding" else \
                T.get_thread_binding()
            red = T.alloc_local((1,), "float32")
            identity = {"cast": T.cast(0, "float32"), "float32": T.float32(0)}.get(variant, T.Cast("float32", 0))
            handle = T.reinterpret("handle", T.uint64(0)) if variant == "handle_first" else \
                T.reinterpret(T.uint64(0), dtype="handle")
            cond = T.bool(True) if variant == "bool" else True
            with T.attr(T.comm_reducer(lambda x0, y0: x0 + y0, [identity]), "reduce_scope", handle):
                if variant == "bare":
                    T.tvm_thread_allreduce(T.uint32(1), X[bx, tx], cond, red[0], tx, dtype="handle")
                else:
                    T.evaluate(T.tvm_thread_allreduce(T.uint32(1), X[bx, tx], cond, red[0], tx, dtype="handle"))
            if tx == 0:
                Y[bx] = red[0]

    x = torch.randn(4, 32)
    out = tilelang.compile(main, out_idx=[-1], target="interp")(x)
    torch.testing.assert_close(out, x.sum(1), atol=1e-5, rtol=1e-5)


# ---- errors ----------------------------------------------------------------------------------

def _kernel(body) -> None:
    @T.prim_func
    def main(X: T.Tensor((64,), T.float32), Y: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            red = T.alloc_local((1,), "float32")
            body(X, tx, red)
            Y[tx] = red[0]

    tilelang.compile(main, out_idx=[-1], target="interp")


def _ADD(x, y):  # noqa: N802 - a combiner, as the examples pass one
    return x + y


_NULL = 0


def test_attr_with_another_key() -> None:
    def body(X, tx, red):
        with T.attr(T.comm_reducer(_ADD, [T.float32(0)]), "pragma_unroll", 1):  # E:key
            pass

    raises(NotSupportedError, "key", lambda: _kernel(body), "pragma_unroll", "reduce_scope")


def test_attr_without_a_reducer() -> None:
    def body(X, tx, red):
        with T.attr(0, "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):  # E:node
            pass

    raises(TileLangSyntaxError, "node", lambda: _kernel(body), "T.comm_reducer")


def test_attr_without_an_allreduce() -> None:
    def body(X, tx, red):
        with T.attr(T.comm_reducer(_ADD, [T.float32(0)]), "reduce_scope", _NULL):  # E:empty
            red[0] = X[tx]

    raises(TileLangSyntaxError, "empty", lambda: _kernel(body), "no T.tvm_thread_allreduce")


def test_allreduce_outside_the_attr() -> None:
    def body(X, tx, red):
        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), X[tx], True, red[0], tx, dtype="handle"))  # E:outside

    raises(TileLangSyntaxError, "outside", lambda: _kernel(body), "outside", "reduce_scope")


def test_allreduce_of_two_values() -> None:
    def body(X, tx, red):
        with T.attr(T.comm_reducer(_ADD, [T.float32(0)]), "reduce_scope", _NULL):
            T.tvm_thread_allreduce(T.uint32(2), X[tx], X[tx], True, red[0], red[0], tx)  # E:count

    raises(NotSupportedError, "count", lambda: _kernel(body), "only one")


def test_allreduce_over_something_that_is_not_a_thread_index() -> None:
    def body(X, tx, red):
        with T.attr(T.comm_reducer(_ADD, [T.float32(0)]), "reduce_scope", _NULL):
            T.tvm_thread_allreduce(T.uint32(1), X[tx], True, red[0], tx + 1)  # E:thread

    raises(TileLangSyntaxError, "thread", lambda: _kernel(body), "not a thread index", "T.get_thread_binding")


def test_allreduce_over_two_thread_axes() -> None:
    def body(X, tx, red):
        with T.attr(T.comm_reducer(_ADD, [T.float32(0)]), "reduce_scope", _NULL):
            T.tvm_thread_allreduce(T.uint32(1), X[tx], True, red[0], tx, tx)  # E:axes

    raises(NotSupportedError, "axes", lambda: _kernel(body), "2 thread axes")


def test_allreduce_into_a_global_buffer() -> None:
    def body(X, tx, red):
        with T.attr(T.comm_reducer(_ADD, [T.float32(0)]), "reduce_scope", _NULL):
            T.tvm_thread_allreduce(T.uint32(1), X[tx], True, X[0], tx)  # E:out

    raises(TileLangSyntaxError, "out", lambda: _kernel(body), "T.alloc_local")


def test_combiner_that_is_not_a_binary_op() -> None:
    def body(X, tx, red):
        with T.attr(T.comm_reducer(lambda x, y: x + y * 2, [T.float32(0)]), "reduce_scope", _NULL):  # E:combiner
            T.tvm_thread_allreduce(T.uint32(1), X[tx], True, red[0], tx)

    raises(NotSupportedError, "combiner", lambda: _kernel(body), "not one of", "T.max(x, y)")


def test_multi_value_reducer() -> None:
    def body(X, tx, red):
        with T.attr(T.comm_reducer(lambda x0, x1, y0, y1: (x0 + y0, x1 + y1), [0.0, 0.0]),  # E:multi
                    "reduce_scope", _NULL):
            T.tvm_thread_allreduce(T.uint32(1), X[tx], True, red[0], tx)

    raises(NotSupportedError, "multi", lambda: _kernel(body), "single-value")


def test_bitwise_reducer_of_floats() -> None:
    def body(X, tx, red):
        with T.attr(T.comm_reducer(lambda x, y: x | y, [T.int32(0)]), "reduce_scope", _NULL):
            T.tvm_thread_allreduce(T.uint32(1), X[tx], True, red[0], tx)  # E:bits

    raises(TileLangTypeError, "bits", lambda: _kernel(body), "integer")


def test_allreduce_under_a_per_thread_condition() -> None:
    def build():
        @T.prim_func
        def main(X: T.Tensor((64,), T.float32), Y: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64) as bx:
                tx = T.get_thread_binding()
                red = T.alloc_local((1,), "float32")
                with T.attr(T.comm_reducer(_ADD, [T.float32(0)]), "reduce_scope", _NULL):
                    if tx < 32:
                        T.tvm_thread_allreduce(T.uint32(1), X[tx], True, red[0], tx)  # E:divergent
                Y[tx] = red[0]

        tilelang.compile(main, out_idx=[-1], target="interp")

    raises(VerificationError, "divergent", build, "every thread of the block")


# ---- CUDA code -------------------------------------------------------------------------------

def _allreduce_code(func) -> tuple[str, str]:
    src = cuda_source(func, "sm_80")[0]
    start = src.index("// allreduce")
    return src, src[start:src.index("\n  }\n", start)]


@pytest.mark.parametrize(("reduce_threads", "n_partition"), [(8, 4), (16, 1), (32, 8)])
def test_cuda_reduces_within_a_warp_by_shuffles_of_the_group_width(reduce_threads: int, n_partition: int) -> None:
    _, code = _allreduce_code(kernels.gemv_allreduce.get_ir(2, 64, 256, reduce_threads, n_partition))
    widths = {int(w) for w in re.findall(r"__shfl_xor_sync\([^;]*, (\d+)\)\)?;", code)}
    assert widths == {reduce_threads}
    assert code.count("__shfl_xor_sync") == int(math.log2(reduce_threads))
    assert "__syncthreads" not in code and "allreduce_ws" not in code


def test_cuda_masks_the_lanes_of_a_partial_warp() -> None:
    src, code = _allreduce_code(kernels.gemv_allreduce.get_ir(2, 48, 256, 16, 3))  # 48 threads: the second warp has 16
    assert "65535u" in code
    src, code = _allreduce_code(kernels.gemv_allreduce.get_ir(2, 16, 256, 8, 1))  # 8 threads
    assert "__shfl_xor_sync(255u" in code


@pytest.mark.parametrize(("reduce_threads", "n_partition"), [(64, 4), (128, 1)])
def test_cuda_reduces_across_warps_through_shared_memory(reduce_threads: int, n_partition: int) -> None:
    _, code = _allreduce_code(kernels.gemv_allreduce.get_ir(2, 64, 256, reduce_threads, n_partition))
    assert code.count("__shfl_xor_sync") == 5 and code.count("__syncthreads();") == 2
    assert "allreduce_ws" in code


def test_cuda_reduces_along_threadidx_y_through_shared_memory() -> None:
    _, code = _allreduce_code(kernels.splitk_gemv_tvm.get_ir(64, 512, 2, 32))
    assert "__shfl_xor_sync" not in code and code.count("__syncthreads();") == 2 and "allreduce_ws" in code


def _compile_cases() -> dict[str, object]:
    return {
        "gemv_shuffle": lambda: kernels.gemv_allreduce.get_ir(2, 64, 256, 16, 4),
        "gemv_shuffle_fp16_acc": lambda: kernels.gemv_allreduce.get_ir(2, 64, 256, 32, 2, accum_dtype=T.float16),
        "gemv_partial_warp": lambda: kernels.gemv_allreduce.get_ir(2, 48, 256, 16, 3),
        "gemv_warps": lambda: kernels.gemv_allreduce.get_ir(2, 64, 256, 128, 2),
        "gemv_odd_group": lambda: kernels.gemv_allreduce.get_ir(2, 64, 256, 48, 2),
        "splitk_gemv_tvm_y": lambda: kernels.splitk_gemv_tvm.get_ir(64, 512, 2, 32),
        "row_max": lambda: kernels.row_max_allreduce.get_ir(7, 300, 64, 2),
    }


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", sorted(_compile_cases()))
def test_cuda_allreduce_compiles(name: str, arch: str) -> None:
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    if find_nvrtc() is None and find_nvcc() is None:
        pytest.skip("no CUDA compiler here (install nvidia-cuda-nvrtc or nvcc)")
    source, ctx = cuda_source(_compile_cases()[name](), arch)
    assert len(compile_cuda(source, arch, kernel_name=ctx.data["cuda.meta"].kernel_name).cubin) > 0


@pytest.mark.parametrize(("threads", "dim"), [((4, 6, 2), 1), ((2, 2, 8), 2), ((64, 2), 0), ((8, 3), 0)])
@pytest.mark.parametrize(("kind", "dtype"), [("sum", T.float16), ("max", T.bfloat16), ("bitxor", T.int8),
                                             ("bitand", T.uint32), ("min", T.int64), ("prod", T.float64),
                                             ("sum", T.uint64)])
def test_cuda_allreduce_of_every_width_and_axis_compiles(kind: str, dtype, threads: tuple[int, ...], dim: int) -> None:
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    if find_nvrtc() is None and find_nvcc() is None:
        pytest.skip("no CUDA compiler here (install nvidia-cuda-nvrtc or nvcc)")
    source, ctx = cuda_source(_groups_ir(kind, dtype, threads, dim), "sm_80")
    assert len(compile_cuda(source, "sm_80", kernel_name=ctx.data["cuda.meta"].kernel_name).cubin) > 0
