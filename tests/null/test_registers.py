# Kernel code is written as users write it (unused block variables included).
# ruff: noqa: F841
"""Register control without a GPU (frontend/registers.py, plugins/cuda/registers.py): where
setmaxnreg lands in the generated CUDA on sm_90a, that it is dropped on targets without it, the
per-kernel register split of the compiler's warp specialization, TileLang's manual wgmma calls,
and the errors (each at its line). The kernels run in the interpreter in the suite
(tests/kernels/register_control.py, ``regs_*`` cases)."""

from __future__ import annotations

import logging
import re

import pytest
import torch

import tilelang_x
import tilelang_x.language as T
from tests.kernels import register_control as R
from tests.null.cuda_helpers import cuda_source, sass_text
from tests.null.located import located_errors
from tilelang_x.core_ir.errors import NotSupportedError, TileLangSyntaxError, TileLangTypeError, VerificationError
from tilelang_x.core_ir.stmt import WarpSpecialize
from tilelang_x.core_ir.visit import walk

where, raises = located_errors(__file__)


def _region(src: str, head: str) -> str:
    """The body of the first ``if`` whose condition line is ``head`` (up to its closing brace)."""
    start = src.index(head)
    indent = len(src[:start]) - len(src[:start].rstrip(" "))
    end = src.index("\n" + " " * indent + "}", start)
    return src[start:end]


def _kernel(src: str) -> str:
    return src[src.index('extern "C" __global__'):]


@pytest.mark.parametrize("hints", [False, True])
def test_hand_specialized_kernel_sets_registers_in_its_regions(hints: bool) -> None:
    src = _kernel(cuda_source(R.gemm_ws_setmaxnreg.get_ir(256, 256, 192, hints=hints), "sm_90a")[0])
    assert "__launch_bounds__(384, 1)" in src  # setmaxnreg needs an entry register cap
    producer = _region(src, "if (tlx_ws_wg() == 2) {")
    consumers = _region(src, "if ((tlx_ws_wg() >= 0) && (tlx_ws_wg() <= 1)) {")
    assert producer.splitlines()[1].strip() == "TLX_SETMAXNREG_DEC(24);"
    assert consumers.splitlines()[1].strip() == "TLX_SETMAXNREG_INC(240);"
    assert src.count("TLX_SETMAXNREG") == 2


@pytest.mark.parametrize("kernel", ["regions", "branches", "thread_index", "split_hints"])
def test_setmaxnreg_reaches_the_sass(kernel: str) -> None:
    """ptxas keeps the instructions (it ignores them in a kernel without an entry register cap)."""
    func = {"regions": lambda: R.gemm_ws_setmaxnreg.get_ir(256, 256, 192),
            "branches": lambda: R.gemm_branch_specialized.get_ir(256, 256, 192),
            "thread_index": lambda: R.rows_by_warpgroup.get_ir(1000),
            "split_hints": lambda: R.gemm_split_hints.get_ir(256, 256, 256, producer=24, consumer=240)}[kernel]()
    ops = set(re.findall(r"(USETMAXREG\.\w+)", sass_text(func)))
    assert ops == {"USETMAXREG.DEALLOC", "USETMAXREG.TRY_ALLOC"}


def test_branches_on_the_thread_index_set_registers() -> None:
    src = _kernel(cuda_source(R.rows_by_warpgroup.get_ir(1000), "sm_90a")[0])
    assert "__launch_bounds__(384, 1)" in src
    then, otherwise = src.split("} else {")
    assert "if (256 <= tx) {\n    TLX_SETMAXNREG_DEC(24);" in then
    assert otherwise.lstrip().startswith("TLX_SETMAXNREG_INC(240);")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("kernel", ["ws_gemm", "thread_index"])
def test_targets_without_setmaxnreg_drop_it(arch: str, kernel: str, caplog: pytest.LogCaptureFixture) -> None:
    func = R.gemm_ws_setmaxnreg.get_ir(256, 256, 192) if kernel == "ws_gemm" else R.rows_by_warpgroup.get_ir(1000)
    with caplog.at_level(logging.DEBUG, logger="tilelang_x.cuda.registers"):
        src = cuda_source(func, arch)[0]
    assert "SETMAXNREG" not in src and "setmaxnreg" not in src
    assert "__launch_bounds__(384)" in src
    assert any("no setmaxnreg on this target" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(("options", "split"), [
    ({}, (40, 232)),  # tlx.producer_regs' default; the consumers get what is left
    ({"producer": 24}, (24, 240)),
    ({"consumer": 200}, (40, 200)),
    ({"producer": 24, "consumer": 232}, (24, 232)),
    ({"producer": 24, "consumer": 240, "no_realloc": True}, None),
])
def test_hints_set_the_split_of_the_compilers_warp_specialization(options: dict, split: tuple | None) -> None:
    src, ctx = cuda_source(R.gemm_split_hints.get_ir(256, 256, 256, **options), "sm_90a")
    src = _kernel(src)
    assert ctx.data["cuda.ws"]["consumers"] == 256 and "__launch_bounds__(384, 1)" in src
    if split is None:
        assert "SETMAXNREG" not in src
        return
    assert f"TLX_SETMAXNREG_DEC({split[0]});" in _region(src, "if (tx >= 256) {")
    assert src.split("} else {", 1)[1].lstrip().startswith(f"TLX_SETMAXNREG_INC({split[1]});")
    assert (ctx.data["cuda.ws"]["producer_regs"], ctx.data["cuda.ws"]["consumer_regs"]) == split


def test_hints_win_over_the_pass_config() -> None:
    func = R.gemm_split_hints.get_ir(256, 256, 256, consumer=224)
    src = cuda_source(func, "sm_90a", {"tlx.producer_regs": 24})[0]
    assert "TLX_SETMAXNREG_DEC(24);" in src and "TLX_SETMAXNREG_INC(224);" in src


def test_one_consumer_warpgroup_moves_no_registers() -> None:
    """A block of 256 threads starts with the most registers a thread can hold."""
    src, ctx = cuda_source(R.gemm_split_hints.get_ir(256, 256, 256, block_M=64, threads=128, producer=24,
                                                              consumer=240), "sm_90a")
    assert ctx.data["cuda.ws"]["consumers"] == 128 and "SETMAXNREG" not in _kernel(src)


def test_hints_have_no_effect_without_the_compilers_warp_specialization() -> None:
    src = cuda_source(R.gemm_split_hints.get_ir(256, 256, 256, producer=24, consumer=240), "sm_80")[0]
    assert "SETMAXNREG" not in src and "__launch_bounds__(256)" in src


def test_a_kernel_that_sets_registers_itself_is_not_warp_specialized() -> None:
    @T.prim_func
    def main(A: T.Tensor((256, 256), T.float16), B: T.Tensor((256, 256), T.float16),
             C: T.Tensor((256, 256), T.float16)):
        with T.Kernel(2, 2, threads=256) as (bx, by):
            T.inc_max_nreg(240)
            A_s = T.alloc_shared((128, 64), T.float16)
            B_s = T.alloc_shared((64, 128), T.float16)
            C_l = T.alloc_fragment((128, 128), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 128, bx * 128])

    src, ctx = cuda_source(main, "sm_90a")
    assert "cuda.ws" not in ctx.data and _kernel(src).count("TLX_SETMAXNREG_INC(240);") == 1


def test_manual_wgmma_calls_emit_nothing() -> None:
    plain = cuda_source(R.gemm_ws_setmaxnreg.get_ir(200, 136, 320), "sm_90a")[0]
    manual = cuda_source(R.gemm_ws_setmaxnreg.get_ir(200, 136, 320, manual_wgmma=True), "sm_90a")[0]
    assert manual == plain


def _one_region_kernel(call: object) -> object:
    @T.prim_func
    def main(A: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=256) as bx:
            with T.ws(1):
                T.fill(A, 1.0)
            with T.ws(0):
                call()

    return main


def test_register_calls_are_checked_at_their_line() -> None:
    raises(TileLangSyntaxError, "odd", lambda: _one_region_kernel(lambda: T.dec_max_nreg(20)),  # E:odd
           "T.dec_max_nreg(20): setmaxnreg takes a multiple of 8 from 24 to 256")
    raises(TileLangSyntaxError, "big", lambda: _one_region_kernel(lambda: T.inc_max_nreg(264)),  # E:big
           "multiple of 8 from 24 to 256")
    raises(TileLangSyntaxError, "is_inc", lambda: _one_region_kernel(lambda: T.set_max_nreg(240, 2)),  # E:is_inc
           "is_inc is neither 0 nor 1")
    raises(TileLangSyntaxError, "count_type",
           lambda: _one_region_kernel(lambda: T.annotate_consumer_reg_alloc("240")),  # E:count_type
           "must be a Python int")
    raises(TileLangSyntaxError, "wait",
           lambda: _one_region_kernel(lambda: T.warpgroup_wait(-1)),  # E:wait
           "cannot be negative", "T.warpgroup_wait(0)")
    raises(TileLangTypeError, "fence",
           lambda: _one_region_kernel(lambda: T.warpgroup_fence_operand(1.0)),  # E:fence
           "is not a fragment or local buffer")


def test_kernel_level_hint_in_a_kernel_specialized_by_hand_is_refused() -> None:
    def build() -> object:
        @T.prim_func
        def main(A: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=256) as bx:
                T.annotate_producer_reg_dealloc(24)  # E:loose_hint
                with T.ws(1):
                    T.fill(A, 1.0)
                with T.ws(0):
                    T.inc_max_nreg(240)

        return main

    raises(TileLangSyntaxError, "loose_hint", build, "specializes its warpgroups by hand", "T.dec_max_nreg(24)")


def test_register_split_the_block_cannot_hold_is_refused() -> None:
    def split(producer: int, consumer: int) -> None:
        cuda_source(R.gemm_split_hints.get_ir(256, 256, 256, producer=producer, consumer=consumer), "sm_90a")

    with pytest.raises(TileLangSyntaxError, match="more than the 64512 a block of 384 threads starts with") as info:
        split(24, 256)
    assert "register_control.py" in str(info.value) and "give the consumers at most 240" in str(info.value)
    with pytest.raises(TileLangSyntaxError, match="starts with 168 registers per thread"):
        split(24, 160)


def test_the_interpreter_ignores_register_control() -> None:
    a = torch.randn(128, 64).half()
    b = torch.randn(64, 128).half()
    with tilelang_x.knobs.scope(target_default="interp"):
        c = R.gemm_ws_setmaxnreg(128, 128, 64, num_stages=2)(a, b)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=1e-2, rtol=1e-2)


def test_descriptor_names_point_to_t_gemm() -> None:
    with pytest.raises(NotSupportedError, match="T.alloc_wgmma_desc is not supported") as info:
        T.alloc_wgmma_desc  # noqa: B018
    assert "T.gemm" in str(info.value)


def test_branch_on_whole_warpgroups_is_a_region() -> None:
    """FlashAttention-3's spelling: ``if tx < 128:`` producer ``else:`` consumers, with tile ops and
    barriers in the branches, is the T.ws(0) / T.ws(1, 2) pair."""
    src = _kernel(cuda_source(R.gemm_branch_specialized.get_ir(256, 256, 192), "sm_90a")[0])
    assert _region(src, "if (tlx_ws_wg() == 0) {").splitlines()[1].strip() == "TLX_SETMAXNREG_DEC(24);"
    consumers = _region(src, "if ((tlx_ws_wg() >= 1) && (tlx_ws_wg() <= 2)) {")
    assert consumers.splitlines()[1].strip() == "TLX_SETMAXNREG_INC(240);" and "tlx_wgmma" in consumers


def _branches(cond: object, second: object = None) -> object:
    @T.prim_func
    def main(A: T.Tensor((3, 128), T.float32)):
        with T.Kernel(1, threads=384) as bx:
            tx = T.get_thread_binding()
            if cond(tx):
                T.fill(A[0, :], 1.0)
            elif second is not None and second(tx):
                T.fill(A[1, :], 2.0)
            else:
                T.fill(A[2, :], 3.0)

    return main


def test_elif_chain_on_warpgroups_makes_one_region_per_branch() -> None:
    func = _branches(lambda tx: tx >= 256, lambda tx: tx // 128 == 0)
    assert [n.ids for n in walk(func.body) if isinstance(n, WarpSpecialize)] == [(2,), (0,), (1,)]
    a = torch.zeros(3, 128)
    tilelang_x.compile(func, target="interp")(a)
    assert torch.equal(a, torch.tensor([1.0, 2.0, 3.0]).repeat_interleave(128).reshape(3, 128))


def test_branch_that_splits_a_warpgroup_stays_per_thread() -> None:
    with pytest.raises(VerificationError, match="T.fill"):
        tilelang_x.compile(_branches(lambda tx: tx < 64), target="interp")


def test_setmaxnreg_for_part_of_a_warpgroup_is_refused() -> None:
    def split_branch() -> object:
        @T.prim_func
        def main(A: T.Tensor((256,), T.float32)):
            with T.Kernel(1, threads=256) as bx:
                tx = T.get_thread_binding()
                if tx < 64:
                    T.dec_max_nreg(24)  # E:split
                A[tx] = 1.0

        return main

    def partial_block() -> object:
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64) as bx:
                T.inc_max_nreg(240)
                T.fill(A, 1.0)

        return main

    raises(TileLangSyntaxError, "split", split_branch, "T.dec_max_nreg(24) under `if", "splits warpgroup 0",
           "if tx < 128:")
    with pytest.raises(TileLangSyntaxError, match=r"T.inc_max_nreg\(240\): setmaxnreg runs on whole warpgroups"):
        partial_block()


def _split_by_hand(consumers: int, consumer_regs: int) -> object:
    @T.prim_func
    def main(A: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128 * (consumers + 1)) as bx:
            with T.ws(consumers):
                T.dec_max_nreg(24)
                T.fill(A, 1.0)
            with T.ws(*range(consumers)):
                T.inc_max_nreg(consumer_regs)  # E:by_hand

    return main


@pytest.mark.parametrize(("consumers", "regs", "words"), [
    (3, 240, ("the warpgroups' registers per thread (240, 240, 240, 24) need 95232 registers, more than the "
              "65536 a block of 512 threads starts with (128 each)", "an increase would wait forever")),
    (2, 232, ()),  # 24 + 232 + 232 fits the 168 x 3 a block of 384 threads starts with

    (2, 160, ("a block of 384 threads starts with 168 registers per thread", "raise to at least 168")),
])
def test_setmaxnreg_by_hand_is_checked_on_sm90a(consumers: int, regs: int, words: tuple) -> None:
    func = _split_by_hand(consumers, regs)
    if not words:
        assert "TLX_SETMAXNREG_INC(232);" in cuda_source(func, "sm_90a")[0]
        return
    raises(TileLangSyntaxError, "by_hand", lambda: cuda_source(func, "sm_90a"), *words)
    assert "SETMAXNREG" not in cuda_source(func, "sm_80")[0]  # dropped there: nothing to refuse
