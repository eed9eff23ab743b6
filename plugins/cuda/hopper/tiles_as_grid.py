"""A kernel written as TileLang's persistent GEMMs are — ``T.Kernel(blocks)`` around one
``T.Persistent`` walk of a tile domain — back as a grid over that domain (sm_90a, before the
pipeline stage; pass config ``tlx.tiles_as_grid``, on).

The compiler's own persistent form (persistent.py: one block per SM, a rasterized tile order,
warp specialization with the producer loading the next tile during the epilogue, stream-K for a
short last wave) starts from a grid of tiles; a ``T.Pipelined`` loop inside a user's tile loop is
only pipelined. Turning the walk into the grid it walks lets the kernel take that form. It is the
same computation when the tiles are independent, which is checked on the loop body: every buffer
the kernel allocates outside the loop and the body both writes and reads is wholly written in the
iteration before it is read (``T.clear`` of the accumulator, the copies that fill the shared tiles,
a whole-tile epilogue copy). The walk must be the kernel's whole body after its allocations, its
block index the kernel's only block variable, its wave size the kernel's grid (not clustered), and
the body may not read the block index or the wave counter outside the tile's number, nor ``break``.
Where the body reads the tile's coordinates as sums of them, the grid has the domain's shape and the
compiler orders its tiles; otherwise it is a grid of tile numbers in the user's order. A domain of
dynamic size gives a grid sized at launch; an empty one still launches one block (the launcher's
floor), whose accesses the bounds checks of the dynamic extents keep in range, as in any grid over
a dynamic size.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Region
from ....core_ir.simplify import as_linear, simplify
from ....core_ir.stmt import Alloc, Annotate, For, If, Jump, Kernel, PrimFunc, Seq, Stmt, Store, While
from ....core_ir.tile_order import PERSISTENT_WALK, PersistentWalk
from ....core_ir.tileops import Copy, Fill, Gemm, Reduce, TileOp, same_extent
from ....core_ir.visit import buffers_used, flat_seq, rewrite, walk
from ..layout_inference import find_kernel
from ..perf_options import pass_configs
from .config import log

KEY = "tlx.tiles_as_grid"


def _whole(r: Region) -> bool:
    return all(E.as_int(s) == 0 for s in r.starts) and len(r.extents) == len(r.buffer.shape) and \
        all(same_extent(a, b) for a, b in zip(r.extents, r.buffer.shape))


def _loads(*nodes: Any) -> set[int]:
    return {id(n.buffer) for node in nodes if node is not None for n in walk(node) if isinstance(n, E.Load)}


class _Defined:
    """Whether each kernel-level buffer the body reads was wholly written earlier in the same
    iteration (``ok`` turns false at the first read that is not)."""

    def __init__(self, tracked: set[int]) -> None:
        self.tracked, self.ok = tracked, True

    def read(self, ids: set[int], defined: set[int]) -> None:
        if ids & self.tracked - defined:
            self.ok = False

    def op(self, op: TileOp, defined: set[int]) -> None:
        self.read(_loads(*(i for r in op.regions() for i in (*r.starts, *r.extents))), defined)
        if isinstance(op, Fill):
            reads, writes = [], [op.dst]
            self.read(_loads(op.value), defined)
        elif isinstance(op, Copy):
            reads, writes = [op.src], [op.dst]
        elif isinstance(op, Gemm):
            reads, writes = [op.A, op.B, *(() if op.clear_accum else (op.C,))], [op.C]
        elif isinstance(op, Reduce):
            reads, writes = [op.src, *(() if op.clear else (op.dst,))], [op.dst]
        else:
            reads, writes = list(op.regions()), []
        self.read({id(r.buffer) for r in reads}, defined)
        defined.update(id(r.buffer) for r in writes if _whole(r))

    def seq(self, body: Stmt, defined: set[int]) -> None:
        for s in flat_seq(body):
            if not self.ok:
                return
            if isinstance(s, TileOp):
                self.op(s, defined)
            elif isinstance(s, Store):
                self.read(_loads(*s.indices, s.value), defined)
                if all(E.as_int(d) == 1 for d in s.buffer.shape):
                    defined.add(id(s.buffer))
            elif isinstance(s, For):
                self.read(_loads(s.extent, s.start), defined)
                self._parallel_store(s, defined) or self.seq(s.body, set(defined))
            elif isinstance(s, If):
                self.read(_loads(s.cond), defined)
                self.seq(s.then, set(defined))
                if s.otherwise is not None:
                    self.seq(s.otherwise, set(defined))
            elif isinstance(s, (Jump, While, Kernel)):
                self.ok = False
            elif not isinstance(s, (Alloc, Annotate)):
                self.read(_loads(s), defined)

    def _parallel_store(self, loop: For, defined: set[int]) -> bool:
        """``for i, j in T.Parallel(*buf.shape): buf[i, j] = value`` (one store of the whole
        buffer at the loop variables): checked and recorded; ``False`` for any other loop."""
        loops = [loop]
        while loops[-1].kind == "parallel" and isinstance(loops[-1].body, For):
            loops.append(loops[-1].body)
        store = loops[-1].body
        if any(x.kind != "parallel" or x.start is not None for x in loops) or not isinstance(store, Store):
            return False
        if len(store.indices) != len(loops) or not all(i is x.var for i, x in zip(store.indices, loops)) or \
                not all(same_extent(x.extent, d) for x, d in zip(loops, store.buffer.shape)):
            return False
        self.read(_loads(store.value), defined)
        defined.add(id(store.buffer))
        return True


def _writes(body: Stmt) -> set[int]:
    """The buffers (ids) ``body`` stores to or names in a tile op. Wider than
    ``pipelining.written_buffers`` (stores and tile ops' ``dst`` / ``C``) on purpose: a buffer left
    out here counts as never written, so as the same in every tile, and is not checked."""
    out: set[int] = set()
    for n in walk(body):
        if isinstance(n, Store):
            out.add(id(n.buffer))
        elif isinstance(n, TileOp):
            out.update(id(r.buffer) for r in n.regions())
    return out


def _tile_number(block: E.Var, wave: E.Var, wave_size: E.Expr, tile: E.Var) -> Any:
    """A ``rewrite`` function that puts ``tile`` for the tile's number, ``block + wave *
    wave_size``, where the body reads it: as the frontend wrote it or as the simplifier left it
    (under a division, say), spread over a linear index (``block * 64 + wave * 64 * P``), or under
    a modulo that reduced the wave's coefficient (``(block + wave * 4) % 128`` for ``P`` = 132).
    A read of the block index or the wave in any other form is left, and refuses the grid."""
    number = block + wave * wave_size
    keys = {number.structural_key(), simplify(number).structural_key()}
    size = E.as_int(wave_size)

    def in_tiles(e: E.Expr, modulus: int | None) -> E.Expr | None:
        """``e``, linear in the block index and the wave, over ``tile`` (modulo ``modulus``)."""
        linear = as_linear(e)
        if size is None or linear is None:
            return None
        terms, const = linear
        coeff = {id(atom): k for k, atom in terms}
        a, b = coeff.get(id(block), 0), coeff.get(id(wave), 0)
        rest = [(k, atom) for k, atom in terms if atom is not block and atom is not wave]
        # under ``% modulus`` the wave's coefficient only has to agree modulo it
        off = b - a * size
        if a == 0 or (off % modulus if modulus else off) != 0 or any(_uses(atom, block, wave) for _, atom in rest):
            return None
        out: E.Expr = tile * a
        for k, atom in rest:
            out = out + atom * k
        return out + const if const else out

    def fn(n: Any) -> Any:
        if not isinstance(n, E.Expr) or isinstance(n, E.Var) or not _uses(n, block, wave):
            return None
        if n.structural_key() in keys:
            return tile
        modulus = E.as_int(n.b) if isinstance(n, E.BinOp) and n.op == "%" else None
        if modulus is not None and modulus > 0:
            inner = in_tiles(n.a, modulus)
            return None if inner is None else E.binary("%", inner, n.b)
        return in_tiles(n, None)

    return fn


def _uses(node: Any, *vs: E.Var) -> bool:
    return any(any(x is v for v in vs) for x in walk(node))


def _coordinates(tile: E.Var, coords: list[E.Expr], grid: tuple[E.Var, ...]) -> Any:
    """A ``rewrite`` function that puts the grid's block indices for the tile's coordinates
    (``coords``, expressions of ``tile``) where the body reads them, or ``None`` when the
    coordinates cannot be told apart. A read is found in its linear form: the simplifier spreads
    ``by * 128`` over the terms of ``by``, so each coordinate is known by a term of its own, and a
    read is ``sum(a_i * coord_i) + rest`` when subtracting that leaves nothing of ``tile``."""
    forms = [as_linear(c) for c in coords]
    if any(f is None for f in forms):
        return None
    keys = [{atom.structural_key(): k for k, atom in f[0] if _uses(atom, tile)} for f in forms]  # type: ignore[index]
    marks = []
    for i, own in enumerate(keys):
        others = set().union(*(k for j, k in enumerate(keys) if j != i))
        mark = next((key for key in own if key not in others), None)
        if mark is None:
            return None
        marks.append((mark, own[mark]))

    def fn(n: Any) -> Any:
        if not isinstance(n, E.Expr) or isinstance(n, E.Var) or n.dtype.kind != "int" or not _uses(n, tile):
            return None
        linear = as_linear(n)
        if linear is None:
            return None
        coeff = {atom.structural_key(): k for k, atom in linear[0]}
        scales = []
        for key, k in marks:
            a, left = divmod(coeff.get(key, 0), k)
            if left:
                return None
            scales.append(a)
        if not any(scales):
            return None
        rest = simplify(n - sum((c * a for c, a in zip(coords, scales) if a), E.const(0)))
        if _uses(rest, tile):
            return None
        out = sum((v * a for v, a in zip(grid, scales) if a), E.const(0))
        return simplify(out + rest)

    return fn


def _as_grid(kernel: Kernel) -> Kernel | None:
    stmts = flat_seq(kernel.body)
    if not stmts or len(kernel.block_vars) != 1 or not isinstance(stmts[-1], For):
        return None
    loop = stmts[-1]
    pw = loop.ann().get(PERSISTENT_WALK)
    if not isinstance(pw, PersistentWalk) or not all(isinstance(s, (Alloc, Annotate)) for s in stmts[:-1]):
        return None
    block = kernel.block_vars[0]
    # a cluster shape fits the user's grid, not necessarily the domain
    if pw.index is not block or not pw.wave_size.same_as(kernel.grid[0]) or kernel.ann().get("cluster_dims"):
        return None
    tile = E.Var("tlx_tile", dtypes.int32, loop.loc)
    number = _tile_number(block, loop.var, pw.wave_size, tile)
    body = rewrite(loop.body, number)
    if _uses(body, block, loop.var) or any(b.base is not None for b in buffers_used(body)):
        return None
    allocated = [s.buffer for s in stmts[:-1] if isinstance(s, Alloc) and s.buffer.scope != "global"]
    written = _writes(body)
    check = _Defined({id(b) for b in allocated if id(b) in written})
    check.seq(body, set())
    if not check.ok:
        return None
    # a grid of the domain's shape when the body reads the coordinates, so the backend may choose
    # the tiles' order; else a grid of tile numbers, walked in the user's order
    if len(pw.domain) > 1:
        grid = tuple(E.Var(name, dtypes.int32, loop.loc) for name in pw.names)
        fn = _coordinates(tile, [simplify(rewrite(c, number)) for c in pw.coords], grid)
        by_coords = rewrite(body, fn) if fn is not None else body
        if fn is not None and not _uses(by_coords, tile):
            return dataclasses.replace(kernel, grid=pw.domain, block_vars=grid, body=Seq((*stmts[:-1], by_coords)))
    tiles = pw.domain[0]
    for d in pw.domain[1:]:
        tiles = tiles * d
    return dataclasses.replace(kernel, grid=(simplify(tiles),), block_vars=(tile,), body=Seq((*stmts[:-1], body)))


def tiles_as_grid_stage(func: PrimFunc, ctx: Any) -> PrimFunc:
    """Stage: the kernel's ``T.Persistent`` walk as a grid over its domain (module docstring)."""
    if not pass_configs(ctx).get(KEY, True):
        return func
    kernel = find_kernel(func.body)
    found = _as_grid(kernel) if kernel is not None else None
    if found is None:
        return func
    log.debug("kernel at line %s: its T.Persistent walk runs as a %s grid", getattr(kernel.loc, "line", "?"),
              " x ".join(map(str, found.grid)))
    return dataclasses.replace(func, body=rewrite(func.body, lambda n: found if n is kernel else None))

