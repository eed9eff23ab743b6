"""TMA loads of tiles (sm_90): which ``T.copy`` global → shared can be one or a few
``cp.async.bulk.tensor`` loads, the tensor maps they need, and the statements that issue them.

A copy qualifies when its global tensor is a kernel argument with dense rows whose byte stride is
a multiple of 16, its tile spans two dims of the tensor (the last one contiguous) and lands in a
2-d shared tile that has a panel layout (hopper/layout.py), or is one row landing in a 1-d tile
(unswizzled): one load per panel of W columns, box
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
from ..lir import U32, Evaluate, Intrin, SmemAddr
from .layout import PanelLayout, tma_layout

#: CUtensorMapDataType per element dtype name
TMA_DTYPE = {"uint8": 0, "int8": 0, "float8_e4m3": 0, "float8_e5m2": 0, "uint16": 1, "int16": 1,
             "uint32": 2, "int32": 3, "float16": 6, "float32": 7, "bfloat16": 9}


@dataclass(frozen=True, eq=False)
class TmaSpec:
    """One ``CUtensorMap`` kernel parameter: built at launch from ``args[arg]``."""

    var: E.Var
    arg: int
    dtype: str
    box: tuple[int, ...]  # innermost first
    swizzle: int  # CUtensorMapSwizzle


@dataclass(frozen=True)
class McSlice:
    """This CTA's share of a load multicast to the CTAs of ``mask`` (a ctaMask): the tile rows
    from ``row0`` on, as many as ``spec``'s box holds (hopper/multicast.py)."""

    spec: TmaSpec
    row0: E.Expr
    mask: E.Expr


@dataclass(frozen=True)
class TmaCopy:
    """A qualifying copy: its tile dims in the tensor, the shared layout and the map it uses."""

    op: Copy
    rows_dim: int
    layout: PanelLayout
    spec: TmaSpec

    @property
    def rows(self) -> int:
        """Rows of the shared tile (a 1-d tile is one row)."""
        return self.layout.shape[-2] if len(self.layout.shape) > 1 else 1

    def issue(self, dst_stage: E.Expr | None, dst_buf: Buffer, bar: E.Expr,
              mc: McSlice | None = None) -> list[Evaluate]:
        """One TMA load per panel into ``dst_buf`` (stage ``dst_stage`` when multi-buffered); with
        ``mc``, of this CTA's rows only, written to every CTA of its mask."""
        src = self.op.src
        lay = self.layout
        w = lay.panel
        out = []
        for p in range(lay.shape[-1] // w):
            idx: tuple[E.Expr, ...] = (E.const(0),) * (len(lay.shape) - 1) + (E.const(p * w),)
            if dst_stage is not None:
                idx = (dst_stage,) + idx
            dst: E.Expr = SmemAddr(dst_buf, idx, "async")
            if mc:  # whole 8-row swizzle atoms: row r of a panel starts r rows after its first
                dst = dst + E.cast(mc.row0 * (w * lay.elem_bytes), U32)
            coords = [s if d != len(src.starts) - 1 else s + p * w if p else s for d, s in enumerate(src.starts)]
            if mc:
                coords[self.rows_dim] = coords[self.rows_dim] + mc.row0
            coords = int32_coords(coords)
            if mc:
                fn, args = f"tlx_tma_load_mc_{len(coords)}d", (dst, mc.spec.var, bar, mc.mask)
            else:
                fn, args = f"tlx_tma_load_{len(coords)}d", (dst, self.spec.var, bar)
            out.append(Evaluate(Intrin(fn, (*args, *reversed(coords))), self.op.loc))
        return out


def int32_coords(coords: list[E.Expr]) -> list[E.Expr]:
    """Tensor-map coordinates as the int32 operands ``cp.async.bulk.tensor`` takes."""
    return [E.cast(c, dtypes.int32) if c.dtype != dtypes.int32 else c for c in coords]


def tile_dims(r: Region) -> list[int]:
    return [d for d, e in enumerate(r.extents) if E.as_int(e) != 1]


def tma_tensor(r: Region, params: tuple[Any, ...], one_row: bool = False) -> tuple[int, list[int]] | None:
    """(argument index, tile dims) when a tensor map can describe the global tensor of ``r`` and
    its tile: a kernel argument without explicit strides whose row byte stride is a multiple of 16,
    the tile spanning two dims, the last one contiguous (with ``one_row``, also a single row, whose
    rows dim is then the one before). Shared by TMA loads and stores."""
    b = r.buffer
    if b.scope != "global" or b.strides is not None or b.dtype.name not in TMA_DTYPE or not 1 <= b.ndim <= 5:
        return None
    arg = next((i for i, p in enumerate(params) if p is b), None)
    dims = tile_dims(r)
    if one_row and dims == [b.ndim - 1] and b.ndim >= 2:
        dims = [b.ndim - 2, b.ndim - 1]
    if arg is None or len(dims) != 2 or dims[1] != b.ndim - 1:
        return None
    if (divisor(b.shape[-1]) * b.dtype.bytes) % 16:
        return None  # a row stride TMA cannot describe
    return arg, dims


def tensor_map(specs: dict[tuple, TmaSpec], r: Region, arg: int, dims: list[int], inner: int, rows: int,
               swizzle: int) -> TmaSpec:
    """The map of ``r``'s tensor with box (``inner``, 1, .., ``rows`` at ``dims[0]``, .., 1)
    innermost first, made once per (argument, box, swizzle) in ``specs``."""
    b = r.buffer
    box = (inner,) + tuple(rows if d == dims[0] else 1 for d in reversed(range(b.ndim - 1)))
    key = (arg, box, swizzle)
    spec = specs.get(key)
    if spec is None:
        spec = specs[key] = TmaSpec(E.Var(f"{b.name}_tmap{len(specs)}", dtypes.uint64), arg, b.dtype.name, box,
                                    swizzle)
    return spec


def plan_tma(op: Copy, params: tuple[Any, ...], specs: dict[tuple, TmaSpec]) -> TmaCopy | None:
    """The TMA form of ``op`` or ``None``; maps are shared between copies through ``specs``."""
    src, dst = op.src, op.dst
    sb, db = src.buffer, dst.buffer
    if db.scope != "shared" or sb.dtype != db.dtype:
        return None
    found = tma_tensor(src, params, one_row=True)
    shape = db.static_shape()
    if found is None or shape is None or len(shape) not in (1, 2) or not dst.is_full():
        return None
    arg, dims = found
    tile = shape if len(shape) == 2 else (1, *shape)  # a 1-d tile (a row of lse) is one row
    if tuple(E.as_int(src.extents[d]) for d in dims) != tile:
        return None
    lay = tma_layout(shape, sb.dtype.bytes)
    if lay is None or tile[0] > 256:
        return None
    spec = tensor_map(specs, src, arg, dims, lay.panel, tile[0], lay.tma_swizzle)
    return TmaCopy(op, dims[0], lay, spec)


def tile_bytes(copies: list[TmaCopy]) -> int:
    return sum(math.prod(c.layout.shape) * c.layout.elem_bytes for c in copies)
