"""Guarded ``T.Pipelined`` loops on sm_90a (plugins/cuda/hopper/guard.py): a body wholly under
``if cond(k):`` (TileLang's block-sparse attention and GEMM) is warp-specialized, the producer and
the consumers each counting the iterations they take; a guard the producer cannot evaluate on its
own keeps the copies synchronous. Correctness against torch: the suite cases (interpreter here,
the H200 in tests/backend)."""

from __future__ import annotations

import logging

import pytest

import tilelang_x.language as T
from tests.kernels import attention, gemm
from tests.null.cuda_helpers import cuda_source, sass_ops


def _kernel_body(src: str) -> str:
    return src[src.index("__global__"):]


def test_blocksparse_attention_is_warp_specialized() -> None:
    func = attention.blocksparse_attention.get_ir(1, 2, 1024, 128, block_M=128, block_N=128, threads=256)
    body = _kernel_body(cuda_source(func, "sm_90a")[0])
    producer, consumer = body.split("} else {", 1)
    # the producer replays the loop that fills the local mask row, then issues only the blocks it keeps
    assert "block_mask[vj] = BlockMask[" in producer and "block_mask[vj] = BlockMask[" in consumer
    assert "if (block_mask[0 + k_p])" in producer and "tlx_tma_load_4d(K_shared_s" in producer
    assert "tlx_taken_p = tlx_taken_p + 1;" in producer
    # the consumers wait on the stage of the n-th block taken, not of block k
    assert "if (block_mask[0 + k_i])" in consumer
    assert "tlx_mbar_wait(tlx_full_s + (0 + (tlx_taken & 1)) * 8" in consumer
    assert "tlx_copy16(&K_shared" not in body  # no synchronous copy left


def test_blocksparse_gemm_reads_its_guard_from_the_mask_tensor() -> None:
    func = gemm.blocksparse_matmul.get_ir(256, 256, 512)
    body = _kernel_body(cuda_source(func, "sm_90a")[0])
    assert body.count("if (BlockMask[") == 2  # producer and consumers
    assert "tlx_pid" not in body  # not persistent: the trip count differs from tile to tile
    assert "TLX_WGMMA_WAIT(1)" not in body  # the in-flight group's release assumes every k is taken


def test_blocksparse_gemm_sass_takes_the_hopper_path() -> None:
    ops = sass_ops(gemm.blocksparse_matmul.get_ir(256, 256, 512), r"\b(HGMMA|UTMALDG|SYNCS|LDGSTS)\b")
    assert ops.get("HGMMA") and ops.get("UTMALDG") and ops.get("SYNCS") and not ops.get("LDGSTS"), ops


@T.prim_func
def _guard_in_shared(A: T.Tensor((256, 64), T.float16), B: T.Tensor((64, 256), T.float16),
                     Flags: T.Tensor((4,), T.int32), C: T.Tensor((128, 128), T.float16)):
    with T.Kernel(1, threads=256):
        A_s = T.alloc_shared((128, 64), T.float16)
        B_s = T.alloc_shared((64, 128), T.float16)
        F_s = T.alloc_shared((4,), T.int32)
        C_f = T.alloc_fragment((128, 128), T.float32)
        T.copy(Flags, F_s)
        T.clear(C_f)
        for k in T.Pipelined(2, num_stages=2):
            if F_s[k] != 0:
                T.copy(A[k * 128, 0], A_s)
                T.copy(B[0, k * 128], B_s)
                T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C)


def test_guard_the_producer_cannot_evaluate_keeps_copies_synchronous(caplog: pytest.LogCaptureFixture) -> None:
    # the guard reads shared memory the consumers fill: the producer warp would read it unfilled
    with caplog.at_level(logging.DEBUG, logger="tilelang_x.cuda.hopper"):
        body = _kernel_body(cuda_source(_guard_in_shared, "sm_90a")[0])
    assert "tlx_taken" not in body and "tlx_mbar_wait" not in body
    assert "the producer cannot evaluate the guard" in caplog.text


def test_sm80_lists_the_blocks_a_guard_keeps_then_pipelines_them() -> None:
    func = attention.blocksparse_attention.get_ir(1, 2, 1024, 128, block_M=128, block_N=128, threads=256)
    body = _kernel_body(cuda_source(func, "sm_80")[0])
    scan, loop = body.split("for (int k_j_i = 0; k_j_i < k_count; ++k_j_i)", 1)
    assert "k_taken[k_count] = 0 + k_scan;" in scan
    # the copies of the next kept block are issued asynchronously while this one computes
    assert "tlx_cp_async16(K_shared_s" in loop and "k_taken[0 + min((k_j_i + 1), (k_count - 1))]" in loop


def test_sm80_guard_on_what_the_loop_writes_keeps_copies_synchronous() -> None:
    body = _kernel_body(cuda_source(_guard_in_shared, "sm_80")[0])
    assert "k_taken[k_count]" in body  # F_s is shared memory the loop does not write: listed first
    body = _kernel_body(cuda_source(_guard_written_in_loop, "sm_80")[0])
    assert "_taken" not in body and "cp_async" not in body


@T.prim_func
def _guard_written_in_loop(A: T.Tensor((256, 64), T.float16), B: T.Tensor((64, 256), T.float16),
                           C: T.Tensor((128, 128), T.float16)):
    with T.Kernel(1, threads=128):
        A_s = T.alloc_shared((128, 64), T.float16)
        B_s = T.alloc_shared((64, 128), T.float16)
        C_f = T.alloc_fragment((128, 128), T.float32)
        budget = T.alloc_var(T.int32, init=1)
        T.clear(C_f)
        for k in T.Pipelined(2, num_stages=2):
            if budget > 0:
                T.copy(A[k * 128, 0], A_s)
                T.copy(B[0, k * 128], B_s)
                T.gemm(A_s, B_s, C_f)
                budget = budget - 1
        T.copy(C_f, C)
