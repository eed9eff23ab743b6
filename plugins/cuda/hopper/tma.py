"""TMA loads of tiles (sm_90): which ``T.copy`` global → shared can be one or a few
``cp.async.bulk.tensor`` loads, the tensor maps they need, and the statements that issue them.

A copy qualifies when its global tensor is a kernel argument with dense rows whose byte stride is
a multiple of 16, its tile spans two dims of the tensor (the last one contiguous) and lands in a
2-d shared tile that has a panel layout (hopper/layout.py): one load per panel of W columns, box
(W, 1, .., R, .., 1) innermost first. Out-of-range rows and columns are zero-filled by the copy
engine. The map itself is built on the host at launch from the tensor (runtime_tma.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Buffer, Region
from ....core_ir.tileops import Copy
from ..analysis import divisor
from ..lir import Evaluate, Intrin, SmemAddr
from .layout import TMA_SWIZZLE, PanelLayout, panel_layout

#: CUtensorMapDataType per element dtype name
TMA_DTYPE = {"uint8": 0, "int8": 0, "float8_e4m3": 0, "float8_e5m2": 0, "uint16": 1, "int16": 1,
             "float16": 6, "bfloat16": 9}


@dataclass(frozen=True, eq=False)
class TmaSpec:
    """One ``CUtensorMap`` kernel parameter: built at launch from ``args[arg]``."""

    var: E.Var
    arg: int
    dtype: str
    box: tuple[int, ...]  # innermost first
    swizzle: int  # CUtensorMapSwizzle


@dataclass(frozen=True)
class TmaCopy:
    """A qualifying copy: its tile dims in the tensor, the shared layout and the map it uses."""

    op: Copy
    rows_dim: int
    layout: PanelLayout
    spec: TmaSpec

    def issue(self, dst_stage: E.Expr | None, dst_buf: Buffer, bar: E.Expr) -> list[Evaluate]:
        """One TMA load per panel into ``dst_buf`` (stage ``dst_stage`` when multi-buffered)."""
        src = self.op.src
        lay = self.layout
        w = lay.panel
        out = []
        for p in range(lay.shape[-1] // w):
            idx: tuple[E.Expr, ...] = (E.const(0), E.const(p * w))
            if dst_stage is not None:
                idx = (dst_stage,) + idx
            dst = SmemAddr(dst_buf, idx, "async")
            coords = [s if d != len(src.starts) - 1 else s + p * w if p else s for d, s in enumerate(src.starts)]
            coords = [E.cast(c, dtypes.int32) if c.dtype != dtypes.int32 else c for c in coords]
            fn = f"tlx_tma_load_{len(coords)}d"
            out.append(Evaluate(Intrin(fn, (dst, self.spec.var, bar, *reversed(coords))), self.op.loc))
        return out


def tile_dims(r: Region) -> list[int]:
    return [d for d, e in enumerate(r.extents) if E.as_int(e) != 1]


def plan_tma(op: Copy, params: tuple[Any, ...], specs: dict[tuple, TmaSpec]) -> TmaCopy | None:
    """The TMA form of ``op`` or ``None``; maps are shared between copies through ``specs``."""
    src, dst = op.src, op.dst
    sb, db = src.buffer, dst.buffer
    if sb.scope != "global" or db.scope != "shared" or sb.dtype != db.dtype or sb.strides is not None:
        return None
    if sb.dtype.name not in TMA_DTYPE or not 1 <= sb.ndim <= 5 or not any(p is sb for p in params):
        return None
    shape = db.static_shape()
    if shape is None or len(shape) != 2 or not dst.is_full():
        return None
    dims = tile_dims(src)
    if len(dims) != 2 or dims[1] != sb.ndim - 1 or tuple(E.as_int(src.extents[d]) for d in dims) != shape:
        return None
    lay = panel_layout(shape, sb.dtype.bytes)
    if lay is None or shape[0] > 256:
        return None
    if (divisor(sb.shape[-1]) * sb.dtype.bytes) % 16:
        return None  # a row stride TMA cannot describe: keep cp.async
    box = [lay.panel] + [shape[0] if d == dims[0] else 1 for d in reversed(range(sb.ndim - 1))]
    arg = next(i for i, p in enumerate(params) if p is sb)
    key = (arg, tuple(box), lay.span)
    spec = specs.get(key)
    if spec is None:
        spec = specs[key] = TmaSpec(E.Var(f"{sb.name}_tmap{len(specs)}", dtypes.uint64), arg, sb.dtype.name,
                                    tuple(box), TMA_SWIZZLE[lay.span])
    return TmaCopy(op, dims[0], lay, spec)


def tile_bytes(copies: list[TmaCopy]) -> int:
    return sum(math.prod(c.layout.shape) * c.layout.elem_bytes for c in copies)
