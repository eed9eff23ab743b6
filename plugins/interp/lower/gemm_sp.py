"""``T.gemm_sp(A_sparse, E, B, C)``: A is rebuilt from its kept values and metadata (the format of
``core_ir.tileops.GemmSp``), then multiplied as ``T.gemm`` multiplies (float32, rounded once to C).
Metadata that names the same column twice for a group (0b0000, 0b0101, 0b1010, 0b1111, which
``mma.sp`` leaves undefined) raises ``ArgumentError`` unless both kept values are zero (the zero
rows a tile reads past the end of a tensor)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tilelang_x.core_ir.errors import ArgumentError
from tilelang_x.core_ir.tileops import SPARSE_META_DTYPES, GemmSp

from . import Executor, LowerContext, reject_in_parallel
from .gemm import accumulate, as_2d

if TYPE_CHECKING:
    from ..runtime import Frame


def decompress(values: np.ndarray, meta: np.ndarray, per: int) -> np.ndarray:
    """The dense [M, K] matrix of ``values`` [M, K/2] and ``meta`` [M, K/per] (``per`` columns per
    metadata element)."""
    rows, half = values.shape
    bits = (meta.astype(np.int64) & ((1 << per) - 1))[..., None] >> (4 * np.arange(per // 4))
    nibbles = (bits & 0xF).reshape(rows, half // 2)
    first, second = nibbles & 3, nibbles >> 2
    kept = values.reshape(rows, half // 2, 2)
    same = (first == second) & (kept != 0).any(-1)
    if same.any():
        row, group = (int(x) for x in np.argwhere(same)[0])
        raise ArgumentError(
            f"T.gemm_sp: metadata E names column {int(first[row, group])} twice for row {row} of the tile, columns "
            f"{4 * group}..{4 * group + 3} (the two kept values of a group sit in different columns)",
            hint="build A_sparse and E with tilelang.utils.sparse.compress")
    dense = np.zeros((rows, half // 2, 4), values.dtype)
    np.put_along_axis(dense, first[..., None], kept[..., :1], axis=-1)
    np.put_along_axis(dense, second[..., None], kept[..., 1:], axis=-1)
    return dense.reshape(rows, half * 2)


def lower(op: GemmSp, ctx: LowerContext) -> Executor:
    A, E, B, C = op.A, op.E, op.B, op.C
    per = SPARSE_META_DTYPES[E.buffer.dtype.name]
    trans_a, trans_b, clear = op.trans_A, op.trans_B, op.clear_accum

    def gemm_sp(rt: Frame) -> None:
        reject_in_parallel(rt, "T.gemm_sp")
        a = as_2d(rt.read(A), "A_sparse")
        b = as_2d(rt.read(B), "B")
        dense = decompress(a.T if trans_a else a, as_2d(rt.read(E), "E"), per)
        prod = np.matmul(dense.astype(np.float32), (b.T if trans_b else b).astype(np.float32))
        accumulate(rt, C, prod, clear, "T.gemm_sp")

    return gemm_sp
