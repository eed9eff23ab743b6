"""The launch order of a kernel's blocks chosen for L2 reuse (plugins/cuda/block_order.py)."""

from __future__ import annotations

import re

import pytest

import tilelang_x.language as T
from tests.kernels import attention, attention_bwd, reductions
from tests.null.cuda_helpers import cuda_source
from tilelang_x.core_ir.stmt import Kernel
from tilelang_x.core_ir.visit import walk
from tilelang_x.plugins.cuda.block_order import chosen_order, shared_bytes


def _mapping(func, arch: str = "sm_90a", configs: dict[str, bool] | None = None) -> dict[str, str]:
    src, _ = cuda_source(func, arch, configs)
    body = src.split("__global__")[1]
    return dict(re.findall(r"const int (b[xyz]) = blockIdx\.([xyz]);", body))


def _kernel(func) -> Kernel:
    return next(n for n in walk(func.body) if isinstance(n, Kernel))


def _bwd(causal: bool = False):
    return attention_bwd.flash_bwd.get_ir(2, 8, 1024, 64, causal, block_M=64, block_N=64, num_stages=2, threads=128)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_flash_attention_backward_runs_the_key_blocks_of_a_head_together(arch: str) -> None:
    # T.Kernel(heads, seq / block_M, batch): blocks of one head and batch, any key block, read the
    # same Q, dO, lse and Delta; blocks of other heads read nothing in common
    k = _kernel(_bwd())
    shared = shared_bytes(k)
    assert shared is not None and shared[0] == 0 and shared[2] == 0
    assert shared[1] == 2 * 1024 * 64 * 2 + 2 * 1024 * 4  # Q and dO (fp16), lse and Delta (fp32) of a head
    assert chosen_order(k) == (1, 0, 2)
    assert _mapping(_bwd(), arch) == {"by": "x", "bx": "y", "bz": "z"}
    assert _mapping(_bwd(True), arch) == {"by": "x", "bx": "y", "bz": "z"}


def test_the_switch_keeps_the_written_order() -> None:
    assert _mapping(_bwd(), configs={"tlx.block_order": False}) == {"bx": "x", "by": "y", "bz": "z"}


def test_kernels_whose_first_axis_shares_reads_keep_their_order() -> None:
    # FlashAttention forward: the query blocks of a head share K and V
    fwd = attention.flash_attention.get_ir(2, 8, 1024, 64, False, block_M=64, block_N=64)
    assert chosen_order(_kernel(fwd)) is None
    assert _mapping(fwd) == {"bx": "x", "by": "y", "bz": "z"}


def test_blocks_adding_into_the_same_elements_are_not_brought_together() -> None:
    # column sums: the blocks of a column add into the same S, and share no read
    k = _kernel(reductions.column_sum.get_ir(4096, 512))
    assert shared_bytes(k) == [0.0, 0.0]
    assert chosen_order(k) is None


def _head_major(loads_index: bool):
    @T.prim_func
    def main(X: T.Tensor((8, 64, 256), T.float32), idx: T.Tensor((8,), T.int32), Y: T.Tensor((8, 64, 256), T.float32)):
        with T.Kernel(8, 4, threads=128) as (bx, by):
            t = T.alloc_fragment((16, 256), T.float32)
            h = idx[bx] if loads_index else bx
            T.copy(X[h, by * 16, 0], t)
            T.copy(t, Y[bx, by * 16, 0])

    return main


def test_an_index_that_loads_leaves_the_order_alone() -> None:
    assert chosen_order(_kernel(_head_major(False))) is None  # bx: nothing shared; by: nothing either
    assert shared_bytes(_kernel(_head_major(True))) is None


def _shared_by_rows(extern: bool):
    @T.prim_func
    def main(X: T.Tensor((8, 64, 256), T.float32), Y: T.Tensor((8, 4, 64, 256), T.float32)):
        with T.Kernel(8, 4, threads=128) as (bx, by):
            t = T.alloc_fragment((64, 256), T.float32)
            T.copy(X[bx, 0:64, 0:256], t)  # blocks of one `bx` read the same X[bx]
            if extern:
                T.evaluate(T.call_extern("void", "__syncwarp"))
            T.copy(t, Y[bx, by, 0:64, 0:256])

    return main


def test_an_extern_call_keeps_the_order() -> None:
    assert _mapping(_shared_by_rows(False)) == {"by": "x", "bx": "y"}
    # the extern function may read blockIdx itself
    assert _mapping(_shared_by_rows(True)) == {"bx": "x", "by": "y"}
