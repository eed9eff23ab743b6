"""Prologue loads of warp-specialized kernels (``hopper/pipeline._prologue_loads``, pass config
``tlx.prologue_loads``), checked without a GPU: FlashAttention's Q tile, copied before the loop,
is a TMA load the producer issues at the block's start on its own barrier; the consumers wait for it
before their first wgmma instead of copying it themselves and meeting at a named barrier."""

from __future__ import annotations

import pytest

from tests.kernels import attention
from tests.null.cuda_helpers import cuda_source, flash_attention_ir

OFF = {"tlx.prologue_loads": False}


def _parts(src: str) -> tuple[str, str]:
    """(producer, consumers) of a warp-specialized kernel's source."""
    split = src.index("} else {\n    TLX_SETMAXNREG_INC(")
    return src[src.index("if (tx >= 256) {"):split], src[split:]


@pytest.mark.parametrize("causal", [False, True])
def test_q_is_loaded_by_the_producer_before_its_loop(causal: bool) -> None:
    src, _ = cuda_source(flash_attention_ir(causal=causal), "sm_90a")
    producer, consumers = _parts(src)
    assert "tlx_mbar_init(tlx_pre_s + (0) * 8, 1);" in src
    loads = producer.index("tlx_mbar_expect_tx(tlx_pre_s + (0) * 8, 32768);")
    assert loads < producer.index("tlx_tma_load_4d(Q_shared_s") < producer.index("for (int k_p")
    assert producer.count("tlx_tma_load_4d(Q_shared_s") == 2  # two 64-column panels of 128 rows
    assert "Q_shared[" not in consumers and "tlx_named_bar_sync" not in consumers
    assert consumers.index("tlx_mbar_wait(tlx_pre_s + (0) * 8, 0);") < consumers.index("tlx_wgmma_ss_")


def test_off_keeps_the_consumers_copy_and_barrier() -> None:
    src, _ = cuda_source(flash_attention_ir(causal=False), "sm_90a", OFF)
    producer, consumers = _parts(src)
    assert "tlx_pre" not in src and "Q_shared_s" not in producer
    assert consumers.index("tlx_copy16(&Q_shared[") < consumers.index("tlx_named_bar_sync(1, 256);") < \
        consumers.index("tlx_wgmma_ss_")


def test_wgmma_reads_q_the_same_way_either_way() -> None:
    def reads(configs: dict[str, bool]) -> list[str]:
        src, _ = cuda_source(flash_attention_ir(causal=False), "sm_90a", configs)
        return [ln.strip() for ln in src.splitlines() if "tlx_wgmma_desc(Q_shared_s" in ln]

    assert reads({}) == reads(OFF) and reads({})


def test_clustered_kernel_keeps_the_consumers_copy() -> None:
    """Multicast kernels are left as they were (their producer serves the cluster's shared loads)."""
    func = attention.flash_attention.get_ir(1, 2, 512, 128, False, block_M=128, block_N=128, num_stages=2,
                                            threads=256, cluster=(2, 1, 1))
    src, _ = cuda_source(func, "sm_90a")
    assert "tlx_pre" not in src and "tlx_copy16(&Q_shared[" in src
