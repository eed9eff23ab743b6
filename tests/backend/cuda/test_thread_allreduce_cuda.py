"""TVM's cross-thread reduction on the GPU: TileLang's GEMV examples (shuffles of the group's width
within a warp, a shared workspace across warps and along threadIdx.y) and a max reducer with a
condition, against torch."""

from __future__ import annotations

import pytest
import torch

from tests.kernels import thread_allreduce as kernels


@pytest.mark.parametrize("n_partition", [1, 4, 8])
@pytest.mark.parametrize("reduce_threads", [8, 16, 32, 64, 128])
def test_gemv_example_form(reduce_threads: int, n_partition: int) -> None:
    out, ref = kernels.run_gemv("cuda", 3, 37, 1000, reduce_threads, n_partition)
    torch.testing.assert_close(out, ref, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize(("reduce_threads", "n_partition"), [(8, 8), (32, 4), (64, 1), (128, 2)])
def test_gemv_with_float16_accumulation(reduce_threads: int, n_partition: int) -> None:
    out, ref = kernels.run_gemv("cuda", 2, 16, 160, reduce_threads, n_partition, "float16")
    torch.testing.assert_close(out, ref, atol=6e-2, rtol=2e-2)


@pytest.mark.parametrize(("reduce_threads", "n_partition"), [(12, 3), (48, 2), (96, 1), (16, 3)])
def test_gemv_with_groups_that_are_not_powers_of_two_or_partial_warps(reduce_threads: int, n_partition: int) -> None:
    out, ref = kernels.run_gemv("cuda", 2, 13, 250, reduce_threads, n_partition)
    torch.testing.assert_close(out, ref, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize(("N", "K", "block_n", "reduce_threads"), [(64, 512, 2, 32), (16, 1024, 4, 16),
                                                                    (8, 2048, 1, 128), (32, 512, 8, 8)])
def test_tilelang_splitk_gemv_vectorized_tvm(N: int, K: int, block_n: int, reduce_threads: int) -> None:
    out, ref = kernels.run_splitk_gemv_tvm("cuda", N, K, block_n, reduce_threads)
    torch.testing.assert_close(out, ref, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize(("M", "K", "reduce_threads", "rows"), [(7, 20, 32, 2), (5, 300, 64, 4), (6, 50, 24, 1),
                                                                  (9, 9, 8, 8)])
def test_max_reducer_with_a_condition(M: int, K: int, reduce_threads: int, rows: int) -> None:
    out, ref = kernels.run_row_max("cuda", M, K, reduce_threads, rows)
    torch.testing.assert_close(out, ref, atol=0, rtol=0)

