"""``T.copy``: element-wise copy between any two scopes, with dtype conversion.

The source and destination regions may differ in rank; dimensions of extent 1 are ignored
(a ``[1, 64]`` slice of a global tensor fills a ``[64]`` fragment). A global region that is
partially outside its tensor is *guarded*, as TileLang's generated code is: the outside part of a
source reads as zero, the outside part of a destination is not written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilelang_x.core_ir.errors import ShapeMismatchError
from tilelang_x.core_ir.tileops import Copy

from . import Executor, LowerContext, reject_in_parallel

if TYPE_CHECKING:
    from ..runtime import Frame


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(n for n in shape if n != 1)


def lower(op: Copy, ctx: LowerContext) -> Executor:
    src, dst = op.src, op.dst
    src_dt = src.buffer.dtype

    def copy(rt: Frame) -> None:
        reject_in_parallel(rt, "T.copy")
        values = rt.read(src)
        _, dst_ext = rt.bounds(dst)
        if _squeezed(values.shape) != _squeezed(dst_ext):
            raise ShapeMismatchError(
                f"T.copy shape mismatch: source `{src.buffer.name}` region {list(values.shape)} vs "
                f"destination `{dst.buffer.name}` region {list(dst_ext)}",
                hint="make both regions the same size (dimensions of extent 1 are ignored)",
            )
        rt.write(dst, values.reshape(dst_ext), src_dt)

    return copy
