"""T.alloc_buffer: TileLang's allocation by scope name maps to our scoped allocations."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tilelang_x import knobs
from tilelang_x.errors import TileLangSyntaxError


@tilelang.jit(out_idx=[-1])
def row_sums(m, n):
    @T.prim_func
    def main(X: T.Tensor((m, n), T.float32), Y: T.Tensor((m,), T.float32)):
        with T.Kernel(1, threads=128):
            tile = T.alloc_buffer((m, n), T.float32, scope="shared.dyn")
            acc = T.alloc_buffer((m, n), T.float32, scope="local.fragment")
            sums = T.alloc_buffer((m,), T.float32, scope="local.fragment")
            T.copy(X, tile)
            T.copy(tile, acc)
            T.reduce_sum(acc, sums, dim=1)
            T.copy(sums, Y)

    return main


def test_scopes_map_to_shared_and_fragment() -> None:
    text = row_sums.get_ir(16, 64).script()
    assert "T.alloc_shared((16, 64)" in text and text.count("T.alloc_fragment(") == 2, text
    x = torch.randn(16, 64)
    with knobs.scope(target_default="interp"):
        torch.testing.assert_close(row_sums(16, 64)(x), x.sum(1), atol=1e-5, rtol=1e-5)


def test_global_scope_is_refused() -> None:
    with pytest.raises(TileLangSyntaxError, match="T.alloc_buffer in 'global' memory is not supported"):
        @T.prim_func
        def main(X: T.Tensor((8,), T.float32)):
            with T.Kernel(1):
                T.alloc_buffer((8,), T.float32)
