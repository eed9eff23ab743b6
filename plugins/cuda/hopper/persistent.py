"""Persistent grid for the warp-specialized Hopper kernel (default for gemm-only loops, clustered or
not; ``pass_configs={"tlx.persistent": bool}`` forces it, config.py).

The grid becomes one block per SM (``tlx_pid``; ``P`` = ``gridDim.x`` blocks, which the runtime
sets from the SM count of the device it loads the kernel on); each block walks tiles
``pid, pid + P, ...`` and the original block indices are recomputed from the tile index, through
the panel order of ``rasterize.block_remap`` when the kernel has one (``T.use_swizzle`` or the
automatic one), so that the blocks running together share their A and B panels in L2 as the
remapped grid's do. The producer and the consumers count k-iterations across tiles
(``g = j * n + k``), so the stage ring and its barrier phases run on from one tile to the next and
the producer loads the next tile while the consumers run the epilogue.
In a clustered kernel (2-D grid, ``cluster_dims`` (cx, cy, 1)) each cluster walks tiles of
cx × cy blocks, cluster ``pid / (cx * cy)`` with stride ``P / (cx * cy)``, and the block of rank
``r`` (``%cluster_ctarank``, which is ``pid % (cx * cy)`` on the one-dimensional grid) takes the
block ``(r % cx, r / cx)`` of it: cluster-mates keep the block indices of the clustered grid
relative to each other, so TMA multicast (multicast.py) shares what it shares there. The panel
order of a rasterized grid then applies to the clusters' tiles. Clustered kernels of other grids
(one- or three-dimensional, or clustered along z) are not made persistent.
Needs a static grid and a k-loop whose trip count does not depend on the block indices.

Stream-K (``StreamK``, ``tlx.stream_k``): the ``T mod P`` tiles left after ``T // P`` whole waves
would keep ``P - T mod P`` blocks idle for a whole tile. Their ``R = (T mod P) * n`` k-iterations
are split between ``Q`` blocks instead: block ``b < Q`` walks iterations ``[b * R / Q, (b + 1) * R / Q)``
of the tail as segments. When the tail holds more than half a wave, ``Q = P`` (at most two segments
per block, as each holds fewer than ``n``); else each tail tile is cut in ``s = min(4, P / (T mod P))``
equal parts, ``Q = s * (T mod P)``, one segment per block, all starting together. A segment that
starts inside a tile (its block's first) leaves its partial sum in the block's workspace slot and
flags it; the segment that starts the tile waits for the flags of the blocks after it that cover
the rest of the tile, adds their slots and runs the epilogue. A block flags its partial before its
own wait, so every wait ends while the blocks of one wave are resident: the grid is at most one
block per SM (``runtime``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.stmt import For, Kernel, Seq, Stmt
from ....core_ir.tile_order import panel_order
from ..lir import Decl

#: SMs of the H100 / H200 SXM: the grid in the launch metadata; the runtime launches one block
#: per SM of the device it loads the kernel on (``runtime.load``), which ``stride`` reads
DEFAULT_SMS = 132


@dataclass(frozen=True)
class Persistent:
    pid: E.Var
    j: E.Var
    tiles_here: E.Expr
    #: the grid of the launch metadata (``DEFAULT_SMS`` or fewer); ``runtime.load`` replaces it
    grid: int
    #: the original grid's block indices of tile ``j``: each tile loop declares them at its top
    block_of: dict[E.Var, E.Expr]
    #: their extents (the original grid)
    extents: dict[E.Var, int]
    #: the blocks' count at launch (``gridDim.x``, bound by codegen): the tile stride
    stride: E.Var
    #: the tiles all blocks walk (the original grid's size)
    total: int
    #: blocks per cluster: the grid is a multiple of it
    cluster_size: int = 1
    stream_k: StreamK | None = None

    @property
    def stride_range(self) -> tuple[int, int]:
        """The bounds of ``stride`` (the launch's block count) for range analyses."""
        return self.cluster_size, self.total

    def counter(self, n: E.Expr, k: E.Expr) -> E.Expr:
        """The iteration number across this block's tiles."""
        return self.stream_k.off + k if self.stream_k else self.j * n + k

    def wrap(self, stmts: list[Stmt], loc: object = None) -> Stmt:
        """The tile loop around ``stmts``, which declares the tile's block indices first: declared
        once per tile, rather than an expression at every use, they are not recomputed in each
        epilogue chunk (the raster remap divides)."""
        stmts = [*(Decl(v, e, None, (0, self.extents[v] - 1)) for v, e in self.block_of.items()), *stmts]
        if self.stream_k:
            return self.stream_k.loops(self.j, stmts, loc)
        return For(self.j, self.tiles_here, "serial", Seq(tuple(stmts)), None, (), loc)  # type: ignore[arg-type]


@dataclass(frozen=True)
class StreamK:
    """The stream-K walk (module docstring) as one tile loop: whole tiles ``j < whole_tiles``, then
    the tail's segments ``j = dp .. dp + segments - 1`` (``whole_tiles`` is ``dp`` whenever there
    are segments). The loop declares ``decls``: tile ``j``'s index, its segment's k-iterations
    ``[k0, k0 + length)`` and the block's iterations before it (``off``, the stage ring's counter).
    A whole tile's ``length`` is ``n``; the k-loops run ``length`` iterations from ``k0`` for every
    tile (a copy with the constant trip count for whole tiles measured no faster on the H200)."""

    tile: E.Var
    off: E.Var
    k0: E.Var
    length: E.Var
    #: the block's values the walk needs (``tlx_sk_dp``, ``_rest``, ``_lo``...), before the loop
    prelude: tuple[Decl, ...]
    decls: tuple[Decl, ...]
    whole_tiles: E.Expr
    dp: E.Expr
    segments: E.Expr
    #: the iteration count of a whole tile's k-loop
    n: int
    #: the last block whose segment covers part of a tile this block's segment starts
    last_peer: E.Expr

    @property
    def partial(self) -> E.Expr:
        """The segment starts inside its tile: its sum goes to the block's workspace slot."""
        return E.binary(">", self.k0, 0)

    @property
    def owner(self) -> E.Expr:
        """The segment starts its tile but does not end it: it adds the slots of the blocks
        ``pid + 1 ..= last_peer`` before the epilogue."""
        return E.binary("and", E.binary("==", self.k0, 0), E.binary("<", self.length, E.const(self.n)))

    def loops(self, j: E.Var, stmts: list[Stmt], loc: object) -> Stmt:
        loop = For(j, self.whole_tiles + self.segments, "serial", Seq((*self.decls, *stmts)), None, (), loc)  # type: ignore[arg-type]
        return Seq((*self.prelude, loop))

    def segment(self, start: E.Expr) -> tuple[E.Expr, E.Expr]:
        """The first iteration and the trip count of the tile's segment of a k-loop from ``start``."""
        return start + self.k0, self.length


#: the most parts a tail tile is split in when the tail holds at most half a wave (its owner adds
#: the others' partial sums, 128 KB each at 128×256)
MAX_PARTS = 4

#: the fewest k-iterations a tail block must be spared for the tail to be split unasked (auto_stream_k)
AUTO_MIN_SAVED = 24

#: iterations per tile the stream-K index math takes in 32-bit ints (``P * P * n < 2**31``)
STREAM_K_MAX_ITERS = (2**31 - 1) // (DEFAULT_SMS * DEFAULT_SMS)


def _stream_k(pid: E.Var, j: E.Var, blocks: E.Var, total: int, n: int, even: bool = True) -> StreamK:
    """The walk with the tail's k-iterations split between ``tail_blocks`` blocks: all of them,
    evenly, when the tail holds more than half a wave (each block then walks more than ``n / 2``
    iterations of it, in at most two segments; without ``even`` such a tail runs as whole tiles,
    as does one whose parts would spare fewer than ``AUTO_MIN_SAVED`` iterations); else each tail
    tile in ``parts`` equal parts (up to ``MAX_PARTS``) on blocks of their own, which then start
    their part together."""
    def sel(c: E.Expr, a: E.Expr | int, b: E.Expr | int) -> E.Expr:
        return E.select(c, E.convert(a), E.convert(b))

    prelude: list[Decl] = []

    def let(name: str, value: E.Expr | int, hi: int = 2**31 - 1) -> E.Var:
        """A per-block value, declared once before the tile loop."""
        v = E.Var(f"tlx_sk_{name}", dtypes.int32)
        prelude.append(Decl(v, E.convert(value), None, (0, hi)))
        return v

    dp = let("dp", E.const(total) // blocks, total)
    rest = let("rest", E.const(total) - dp * blocks, total)
    parts = E.binary("min", E.const(min(MAX_PARTS, n)), blocks // E.binary("max", rest, E.const(1)))
    half = E.binary(">", rest * 2, blocks)
    if not even:  # as auto_stream_k, on the launch's block count: else the tail runs as whole tiles
        saved = E.const(n) - (E.const(n) + parts - 1) // parts
        half = E.binary("or", half, E.binary("<", saved, E.const(AUTO_MIN_SAVED)))
    half = E.binary("!=", let("whole_only" if not even else "even", sel(half, 1, 0), 1), 0)
    tail_blocks = let("tail_blocks", sel(half, blocks if even else 0, rest * parts), total)
    per = E.binary("max", tail_blocks, E.const(1))
    tail = rest * n
    lo = let("lo", pid * tail // per)
    hi = let("hi", (pid + 1) * tail // per)
    t0 = let("t0", lo // n)
    whole_tiles = let("whole", dp if even else sel(half, _tiles_walked(pid, blocks, total), dp), total)
    segments = let("segments", sel(E.binary("<", pid, tail_blocks), (hi - 1) // n - t0 + 1, 0), total)
    t = t0 + (j - dp)  # the tail tile of segment j - dp
    names = ("tlx_sk_tile", "tlx_sk_k0", "tlx_sk_len", "tlx_sk_off")
    tile_v, k0_v, len_v, off_v = fields = tuple(E.Var(nm, dtypes.int32) for nm in names)
    ranges = ((0, total - 1), (0, n - 1), (1, n), (0, total * n))

    def decls(values: tuple[E.Expr | int, ...]) -> tuple[Decl, ...]:
        return tuple(Decl(v, E.convert(x), None, r) for v, x, r in zip(fields, values, ranges))

    is_whole = E.binary("<", j, whole_tiles)
    k0 = sel(E.binary("and", E.unary("not", is_whole), E.binary("==", j, dp)), lo - t0 * n, 0)
    fields_of_j = decls((sel(is_whole, pid + j * blocks, dp * blocks + t), k0,
                         sel(is_whole, n, E.binary("min", hi - t * n, E.const(n)) - k0_v),
                         sel(is_whole, j * n, dp * n + t * n + k0_v - lo)))
    last_peer = ((tile_v - dp * blocks + 1) * n * tail_blocks - 1) // E.binary("max", tail, E.const(1))
    return StreamK(tile_v, off_v, k0_v, len_v, tuple(prelude), fields_of_j, whole_tiles, dp, segments, n,
                   last_peer)


def auto_stream_k(total: int, iters: int, sms: int = DEFAULT_SMS) -> bool:
    """Whether a kernel that does not ask gets the tail split in parts: its last wave holds at most
    half the SMs and the split saves each tail block at least ``AUTO_MIN_SAVED`` of its
    tile's k-iterations (``iters - ceil(iters / parts)``), which pays for the fixup. H200
    (2026-11-30, ``bench/variants.py``, L2 flushed): 64 iterations in halves (1536×4096×4096)
    +12-14 %, in quarters (1152×4096×4096) +25 %; 32 in quarters (1152×4096×2048) +8 %, in halves
    (1536×4096×2048) +2 % flushed but -3 % back to back; 16 in halves (1536×4096×1024) -10 %;
    a tail of exactly half the SMs, 64 iterations in halves (2304×2816×4096, session 7) +14 %."""
    rest = total % sms
    if not 0 < 2 * rest <= sms:
        return False
    parts = min(MAX_PARTS, iters, sms // rest)
    return iters - -(-iters // parts) >= AUTO_MIN_SAVED


def plan_persistent(kernel: Kernel, n: E.Expr, start: E.Expr, sms: int = DEFAULT_SMS,
                    raster: tuple[int, bool] | None = None,
                    cluster: tuple[int, int, int] | None = None, stream_k: bool | None = False) -> Persistent | None:
    """The persistent form of ``kernel`` (``raster``: the (panel, column-wise) block order of
    ``rasterize.block_remap``, applied to the tile index; ``cluster``: the launch's cluster shape;
    ``stream_k``: split the tail in stream-K segments, for a constant trip count ``n`` and no
    cluster; ``None``: only a tail of at most half the SMs, in parts, when ``auto_stream_k``
    says it pays), or ``None`` when it does not apply."""
    dims = [E.as_int(g) for g in kernel.grid]
    if not dims or any(d is None or d < 1 for d in dims):
        return None
    block = {id(v) for v in kernel.block_vars}
    if any(id(v) in block for e in (n, start) for v in E.free_vars(e)):
        return None
    pid, j = E.Var("tlx_pid", dtypes.int32), E.Var("tlx_tile_j", dtypes.int32)
    blocks = E.Var("tlx_blocks", dtypes.int32)
    if cluster is not None and math.prod(cluster) > 1:
        return _clustered(kernel, pid, j, blocks, sms, raster, cluster)
    total = math.prod(d for d in dims if d is not None)
    grid = min(total, sms)
    if grid == total:  # one tile per block: nothing to gain
        return None
    iters = E.as_int(n)
    sk: StreamK | None = None
    tile: E.Expr = pid + j * blocks
    tiles_here = _tiles_walked(pid, blocks, total)
    if stream_k is None and (iters is None or not auto_stream_k(total, iters, sms)):
        stream_k = False
    if stream_k is not False and iters is not None and 1 < iters <= STREAM_K_MAX_ITERS:
        sk = _stream_k(pid, j, blocks, total, iters, even=bool(stream_k))
        tile, tiles_here = sk.tile, sk.whole_tiles + sk.segments
    block_of: dict[E.Var, E.Expr] = {}
    if raster is not None and len(dims) == 2:
        block_of = _rasterized(kernel, tile, dims[0], dims[1], *raster)  # type: ignore[arg-type]
    else:
        stride = 1
        for v, d in zip(kernel.block_vars, dims):
            assert d is not None
            idx = tile // stride if stride > 1 else tile
            block_of[v] = idx % d if stride * d < total else idx
            stride *= d
    extents = {v: d for v, d in zip(kernel.block_vars, dims) if v in block_of}
    return Persistent(pid, j, tiles_here, grid, block_of, extents, blocks, total, stream_k=sk)  # type: ignore[arg-type]


def _clustered(kernel: Kernel, pid: E.Var, j: E.Var, blocks: E.Var, sms: int, raster: tuple[int, bool] | None,
               cluster: tuple[int, int, int]) -> Persistent | None:
    """The persistent walk over cluster tiles (module docstring) of a kernel with a static grid."""
    cx, cy, cz = cluster
    dims = [E.as_int(g) for g in kernel.grid]
    if len(dims) != 2 or cz != 1:
        return None
    gx, gy = dims
    assert gx is not None and gy is not None and gx % cx == 0 and gy % cy == 0  # check_cluster ran before
    size, ctiles = cx * cy, (gx // cx) * (gy // cy)
    grid = min(ctiles, sms // size) * size
    if grid == gx * gy:
        return None
    cid, clusters = pid // size, blocks // size
    ctile = cid + j * clusters
    bx, by = kernel.block_vars
    if raster is not None:
        panel, column = raster
        walk = _rasterized(kernel, ctile, gx // cx, gy // cy, max(1, panel // (cx if column else cy)), column)
        cbx, cby = walk[bx], walk[by]
    else:
        cbx, cby = ctile % (gx // cx), ctile // (gx // cx)
    rank = pid % size
    # the rank's place (rank % cx, rank / cx), written without the operations one dimension of 1 makes void
    x_in = E.const(0) if cx == 1 else rank if cy == 1 else rank % cx
    y_in = E.const(0) if cy == 1 else rank if cx == 1 else rank // cx
    block_of = {bx: cbx * cx + x_in, by: cby * cy + y_in}
    tiles_here = _tiles_walked(cid, clusters, ctiles)
    return Persistent(pid, j, tiles_here, grid, block_of, {bx: gx, by: gy}, blocks, gx * gy, size)


def _tiles_walked(first: E.Expr, stride: E.Expr, total: int) -> E.Expr:
    """How many of the tiles ``first, first + stride, ...`` are below ``total``."""
    return (E.const(total - 1) - first) // stride + 1


def _rasterized(kernel: Kernel, tile: E.Expr, gx: int, gy: int, panel: int, column: bool) -> dict[E.Var, E.Expr]:
    """(bx, by) of ``tile`` in the panel order codegen emits for ``blockIdx`` (``core_ir.tile_order.panel_order``)."""
    bx, by = kernel.block_vars
    x, y = panel_order(tile, E.const(gx), E.const(gy), panel, column)
    return {bx: x, by: y}
