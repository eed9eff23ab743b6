"""A tile that a T.Pipelined loop loads in stages, used outside the loop: a T.clear before it
clears every stage (and keeps sm_90a off TMA and warp specialization, whose loads would race the
clear); any other use is a BackendNotImplementedError, not an undeclared stage buffer."""

from __future__ import annotations

import pytest

import tilelang_x.language as T
from tests.kernels import gemm
from tests.null.cuda_helpers import cuda_source
from tilelang_x.core_ir.errors import BackendNotImplementedError


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_clear_before_the_loop_clears_every_stage(arch: str) -> None:
    source, _ = cuda_source(gemm.matmul_short_k_steps.get_ir(128, 128, 96, 24, num_stages=3), arch)
    body = source.split('extern "C"')[-1]
    assert "B_s_1" not in body and "tlx_tma_load" not in body and "tlx_cp_async16" in body
    clears = [line for line in body.splitlines() if line.strip().startswith("B_s[") and "= tlx_f2h(0.0f)" in line]
    assert len(clears) == 3  # one per stage


def _read_after_the_loop():
    @T.prim_func
    def kernel(A: T.Tensor((256, 64), T.float16), B: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[k * 64, 0], A_s)
                for i, j in T.Parallel(64, 64):
                    acc[i, j] += A_s[i, j]
            T.copy(A_s, B)  # the use
    return kernel


def test_other_uses_outside_the_loop_are_rejected() -> None:
    with pytest.raises(BackendNotImplementedError, match="also used outside it") as info:
        cuda_source(_read_after_the_loop(), "sm_80")
    assert "num_stages=1" in info.value.hint
    assert info.value.loc is not None
