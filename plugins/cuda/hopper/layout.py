"""Layouts of the Hopper path.

``PanelLayout``: a shared tile (rows R × cols C, C contiguous) stored as C/W column panels of W
columns, each panel R rows of W·elem bytes with the 128/64/32-byte XOR swizzle of backends.md A5.
This is exactly what one TMA load with box (W, R) writes, and what a wgmma shared-memory
descriptor describes (K-major: SBO = 8 rows; MN-major: LBO = panel stride, SBO = 8 rows).
Leading dims (a pipeline's stage index) stack whole tiles.

``wgmma_c_fragment`` / ``wgmma_a_fragment``: the accumulator and register-A layouts of
m64nNk16 (A6): thread t of warpgroup, warp w = t/32, g = lane/4, q = lane%4; register v holds
row 16w + g + 8·((v>>1)&1), col 8·(v>>2) + 2q + (v&1).

``swapped_c_fragment``: the accumulator of C = A·B computed as Cᵀ = Bᵀ·Aᵀ (``swapped_row``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ....core_ir import expr as E
from ..layout import Digit, Fragment, SharedLayout

#: descriptor / TMA swizzle code per swizzle span in bytes
DESC_MODE = {128: 1, 64: 2, 32: 3}
TMA_SWIZZLE = {128: 3, 64: 2, 32: 1}
#: bytes a TMA load's shared-memory destination is aligned to (swizzled ones: 1024, by the codegen)
TMA_ALIGN = 128


@dataclass(frozen=True)
class PanelLayout(SharedLayout):
    """See the module docstring; ``panel`` is W (columns per panel)."""

    panel: int = 0

    @property
    def span(self) -> int:
        """Swizzle span in bytes (W · elem bytes)."""
        return self.panel * self.elem_bytes

    @property
    def tma_swizzle(self) -> int:
        """The ``CUtensorMapSwizzle`` a TMA load writes this layout with."""
        return 0 if self.swizzle == "none" else TMA_SWIZZLE[self.span]

    def offset(self, indices: tuple[E.Expr, ...]) -> E.Expr:
        if self.swizzle == "none":
            return SharedLayout.offset(self, indices)
        rows, cols, w = self.shape[-2], self.shape[-1], self.panel
        lead: E.Expr = E.const(0)
        for i, ext in zip(indices[:-2], self.shape[:-2]):
            lead = lead * ext + i
        r, c = indices[-2], indices[-1]
        ce = 16 // self.elem_bytes
        nchunk = w // ce
        inner = c % w if cols != w else c
        chunk = inner // ce
        phys = E.binary("^", chunk, (r // (8 // nchunk)) % nchunk if nchunk != 8 else r % 8)
        out = r * w + phys * ce + inner % ce
        if cols != w:
            out = (c // w) * (rows * w) + out
        return lead * (rows * cols) + out if len(indices) > 2 else out


def panel_layout(shape: tuple[int, ...], elem_bytes: int) -> PanelLayout | None:
    """The Hopper layout of a shared tile, or ``None`` when it has none (rows not a multiple of 8,
    a row narrower than 32 bytes or not a multiple of the swizzle span, or 8-byte elements)."""
    if len(shape) < 2 or elem_bytes not in (1, 2, 4):
        return None
    rows, row_bytes = shape[-2], shape[-1] * elem_bytes
    if rows % 8:
        return None
    span = 128 if row_bytes % 128 == 0 else row_bytes if row_bytes in (32, 64) else 0
    if not span:
        return None
    return PanelLayout(tuple(shape), elem_bytes, {128: "sw128", 64: "sw64", 32: "sw32"}[span],
                       span // elem_bytes)


def linear_layout(shape: tuple[int, ...], elem_bytes: int) -> PanelLayout | None:
    """The unswizzled row-major layout one TMA box fills, for a tile that ``panel_layout`` does
    not take: rows not a multiple of 8 (a row of scales), or rows too narrow for a swizzle span
    (``T.gemm_sp``'s metadata, 16 bytes a row); never a wgmma operand, whose tiles are swizzled
    panels. ``None`` when a box cannot hold a row (not a multiple of 16 bytes, or more than 256
    elements), or when the tile is not a multiple of 128 bytes (its stages would not all start
    where TMA can write: ``TMA_ALIGN``). A 1-d tile is one row."""
    rows, cols = shape[-2:] if len(shape) >= 2 else (1, shape[0]) if shape else (0, 0)
    if not rows or (cols * elem_bytes) % 16 or cols > 256 or (rows * cols * elem_bytes) % TMA_ALIGN:
        return None
    return PanelLayout(tuple(shape), elem_bytes, "none", cols)


def tma_layout(shape: tuple[int, ...], elem_bytes: int) -> PanelLayout | None:
    """The layout a TMA load writes a tile of ``shape`` in: swizzled panels, else linear rows."""
    return panel_layout(shape, elem_bytes) or linear_layout(shape, elem_bytes)


def _strip(dim: tuple[Digit, ...]) -> tuple[Digit, ...]:
    return tuple(d for d in dim if d.extent != 1)


def wgmma_c_fragment(m: int, n: int, wgm: int, wgn: int, origin: str = "") -> Fragment:
    """Accumulator of an M×N tile over wgm×wgn warpgroups (each 64·mi rows × n/wgn cols);
    slot = mi·(nn/2) + ni·4 + h·2 + e."""
    mi, nn = m // (64 * wgm), n // wgn
    rows = (Digit(wgm, "T", 128 * wgn), Digit(mi, "L", nn // 2), Digit(4, "T", 32), Digit(2, "L", 2),
            Digit(8, "T", 4))
    cols = (Digit(wgn, "T", 128), Digit(nn // 8, "L", 4), Digit(4, "T", 1), Digit(2, "L", 1))
    return Fragment((_strip(rows), _strip(cols)), (), 128 * wgm * wgn, origin)


def wgmma_a_fragment(m: int, k: int, wgm: int, wgn: int, origin: str = "") -> Fragment:
    """Register A operand (M×K) over wgm×wgn warpgroups (warpgroups along N hold copies);
    slot = ((mi·KI + ki)·2 + kh)·4 + h·2 + e: 8 halves = the 4 registers of one k16 step."""
    mi, ki = m // (64 * wgm), k // 16
    rows = (Digit(wgm, "T", 128 * wgn), Digit(mi, "L", ki * 8), Digit(4, "T", 32), Digit(2, "L", 2),
            Digit(8, "T", 4))
    cols = (Digit(ki, "L", 8), Digit(2, "L", 4), Digit(4, "T", 1), Digit(2, "L", 1))
    rep = (Digit(wgn, "T", 128),) if wgn > 1 else ()
    return Fragment((_strip(rows), _strip(cols)), rep, 128 * wgm * wgn, origin)


def swapped_row(w: E.Expr, g: E.Expr, mi: int, h: int, mi_n: int) -> E.Expr:
    """The C column (within a warpgroup's 64·mi_n) that row 16w + g + 8h of m64 block ``mi`` of a
    swapped gemm's wgmma computes. The rows are permuted so that a thread's own columns are adjacent
    (h: bit 0; with an even ``mi_n``, mi % 2: bit 1): its gather of Bᵀ reads them with one 8- or
    16-byte load per k (4 bytes for 8-bit types), and the epilogue stores them together. The other
    bits are chosen so that the loads of a quarter warp (a half warp, without pairs) hit 8 different
    16-byte chunks of a 128-byte swizzled row (k = q and q + 4): g % 2 is bit 4."""
    if mi_n % 2:
        return mi * 64 + 32 * (w // 2) + 16 * (g % 2) + 8 * (w % 2) + 4 * (g // 4) + 2 * ((g // 2) % 2) + h
    return (mi // 2) * 128 + 32 * w + 16 * (g % 2) + 4 * (g // 2) + 2 * (mi % 2) + h


def swapped_c_fragment(m: int, n: int, wgm: int, wgn: int, origin: str = "") -> Fragment:
    """Accumulator of an M×N tile computed as Cᵀ = Bᵀ·Aᵀ: the wgmma's D is N×M (rows permuted by
    ``swapped_row``) over wgm×wgn warpgroups, wgm along N; slot = mi·(mm/2) + mj·4 + h·2 + e."""
    mi_n, mm = n // (64 * wgm), m // wgn
    if mi_n % 2:
        low = (Digit(mi_n, "L", mm // 2), Digit(2, "T", 64), Digit(2, "T", 4), Digit(2, "T", 32), Digit(2, "T", 16),
               Digit(2, "T", 8), Digit(2, "L", 2))
    else:
        low = (Digit(mi_n // 2, "L", mm), Digit(4, "T", 32), Digit(2, "T", 4), Digit(4, "T", 8),
               Digit(2, "L", mm // 2), Digit(2, "L", 2))
    d_rows = (Digit(wgm, "T", 128 * wgn), *low)
    d_cols = (Digit(wgn, "T", 128), Digit(mm // 8, "L", 4), Digit(4, "T", 1), Digit(2, "L", 1))
    return Fragment((_strip(d_cols), _strip(d_rows)), (), 128 * wgm * wgn, origin)
