"""A fragment two loops need in different thread layouts goes through shared memory between them
(``plugins/cuda/layout_exchange.py``) instead of failing layout inference: TileLang's MLA decode with
32-key blocks on the sm_80 path. The GPU runs it against torch as the suite case
``mla_decode_32_key_blocks`` (target ``cuda:sm_90``)."""

from __future__ import annotations

import logging

import pytest

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
