"""TileLang's buffer type names on T.macro parameters, bare and with a shape, evaluated as Python
evaluates them (this module has no ``from __future__ import annotations``)."""

import torch

import tilelang_x
import tilelang_x.language as T


def _row_sums_twice():
    @T.macro
    def accumulate(src: T.SharedTensor, acc: T.LocalTensor, scratch: T.SharedBuffer((4, 32), T.float32),
                   rows: T.FragmentBuffer((4,), T.float32)):
        T.copy(src, scratch)
        T.reduce_sum(scratch, rows, dim=1)
        for i in T.Parallel(4):
            acc[i] = acc[i] + rows[i]

    @T.prim_func
    def main(X: T.Tensor((4, 32), T.float32), Y: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32):
            X_s = T.alloc_shared((4, 32), T.float32)
            scratch = T.alloc_shared((4, 32), T.float32)
            rows = T.alloc_fragment((4,), T.float32)
            acc = T.alloc_fragment((4,), T.float32)
            T.copy(X, X_s)
            T.clear(acc)
            accumulate(X_s, acc, scratch, rows)
            accumulate(X_s, acc, scratch, rows)
            T.copy(acc, Y)

    return main


def test_shared_tensor_and_local_tensor_are_accepted_on_macro_parameters() -> None:
    x = torch.randn(4, 32)
    y = tilelang_x.compile(_row_sums_twice(), out_idx=[-1], target="interp")(x)
    torch.testing.assert_close(y, 2 * x.sum(1), atol=1e-5, rtol=1e-5)
    assert T.SharedTensor((4,), T.float32).scope == "shared" and T.LocalTensor((4,), T.float32).scope == "local"
