"""A fragment two loops need in different thread layouts goes through shared memory between them
(``plugins/cuda/layout_exchange.py``) instead of failing layout inference: TileLang's MLA decode with
32-key blocks on the sm_80 path. The GPU runs it against torch as the suite case
``mla_decode_32_key_blocks`` (target ``cuda:sm_90``)."""

from __future__ import annotations

import logging

import pytest
import torch

import tilelang_x
import tilelang_x.language as T
from tests.kernels import attention
from tests.null.cuda_helpers import cuda_source, sass_text
from tilelang_x.core_ir.kernel_parts import kernel_parts


def _attend(block_N: int):
    return kernel_parts(attention.mla_decode.get_ir(2, 128, 1024, block_N=block_N, num_split=2))[0]


def test_row_statistics_are_exchanged_between_the_score_and_output_layouts(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="tilelang_x.cuda.layout"):
        source, _ = cuda_source(_attend(32), "sm_80")
    assert "`scores_max` is needed in two thread layouts" in caplog.text
    assert "scores_max_exchange0" in source and "scores_max_as0" in source
    sass_text(_attend(32), "sm_80")  # and it compiles


@pytest.mark.parametrize("arch, block_N", [("sm_90a", 32), ("sm_80", 64)])
def test_no_exchange_where_the_layouts_agree(arch: str, block_N: int) -> None:
    source, _ = cuda_source(_attend(block_N), arch)
    assert "_exchange" not in source


def _weighted_heads():
    """A small fragment copied in first (which chooses its own layout) and read by a later loop per
    head, broadcast over the rows: the loop needs it in another layout. The loop writes the tile
    through a reshape, as TileLang's DeepSeek v3.2 indexer does its gemm accumulator."""

    @T.prim_func
    def main(X: T.Tensor((64, 32), T.float32), W: T.Tensor((2, 16), T.float32), Out: T.Tensor((64, 2), T.float32)):
        with T.Kernel(1, threads=128):
            s = T.alloc_fragment((64, 32), T.float32)
            s_heads = T.reshape(s, (64, 2, 16))
            w = T.alloc_fragment((2, 16), T.float32)
            scores = T.alloc_fragment((64, 2), T.float32)
            T.copy(W, w)
            for n, g, h in T.Parallel(64, 2, 16):
                s_heads[n, g, h] = X[n, g * 16 + h] * w[g, h]
            T.reduce_sum(s_heads, scores, dim=-1, clear=True)
            T.copy(scores, Out)

    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_an_exchanged_copy_takes_the_layout_of_the_loop_after_it(arch: str) -> None:
    x, w = torch.randn(64, 32), torch.randn(2, 16)
    out = tilelang_x.compile(_weighted_heads(), target="interp", out_idx=[-1])(x, w)
    torch.testing.assert_close(out, (x.reshape(64, 2, 16) * w).sum(-1))
    source, ctx = cuda_source(_weighted_heads(), arch)
    layouts = {b.name: lay for b, lay in ctx.data["cuda.layouts"].items()}
    # one exchange: the copy from shared into `w_as0` follows the loop instead of choosing first
    assert "w_exchange0" in source and "w_as0" in layouts and "w_as0_as1" not in layouts
    # the loop laid out `s_heads`, and `s` (whose registers it reads) with it
    assert layouts["s"].num_local == layouts["s_heads"].num_local and "s_heads[" not in source
    sass_text(_weighted_heads(), arch)  # and it compiles
