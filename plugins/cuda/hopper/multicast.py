"""TMA multicast in the warp-specialized pipeline of a clustered kernel (sm_90a,
``T.Kernel(..., cluster_dims=...)``, pipeline.py ``_ws_kernel``).

A tile load whose source coordinates do not involve the block index of a clustered axis (nor does
the loop's trip count) loads the same tile in every CTA of the cluster along that axis: the ``cs``
CTAs of such a group each load ``rows / cs`` of its rows (a tensor map with that box) and write
them with ``.multicast::cluster`` into all of the group (ctaMask), each CTA's full barrier still
expecting the whole stage. Cluster coordinates come from ``%cluster_ctarank`` (x fastest).

Peers write into a CTA's stage buffers, so a stage is refilled only once the consumers of every CTA
it is multicast to have released it: every consumer thread arrives on the empty barrier of each
peer (the union of its groups, itself included) through ``mapa``, and an empty barrier counts one
arrival per consumer thread of each peer. (One arrival per warp, from its lanes in parallel behind a
branch on the lane, ran 3-4 % slower on the H200, 2026-11-30: GEMM 4096³ in (1,2,1) clusters 0.937
vs 0.969 of cuBLAS, 8192³ 0.968 vs 1.003. A stage that only wgmma reads is released once per
warpgroup and peer after lowering, predicated rather than branched: elected_release.py.)
A cluster barrier after the mbarrier inits keeps peers from signalling
uninitialised barriers; one at the end keeps a CTA from exiting while peers may still write into
its shared memory or arrive on its barriers.

Decided on the block indices as the pipeline stage sees them: a rasterized block order (codegen's
remap of ``blockIdx``, rasterize.py) makes sharing unprovable, and so does a slice that would not
keep whole 8-row swizzle atoms, unless the kernel is persistent: its walk over cluster tiles
(persistent.py) keeps cluster-mates' relative block indices in any block order. Switch: pass
config ``tlx.multicast`` (default on).
"""

from __future__ import annotations

import functools
import math
import operator
from dataclasses import dataclass
from typing import Any

from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.stmt import For, Kernel, Stmt
from ..cluster import launch_dims
from ..lir import Evaluate, Intrin
from ..perf_options import pass_configs
from ..rasterize import block_remap
from .config import log
from .tma import McSlice, TmaCopy, TmaSpec, tensor_map, tile_dims

KEY = "tlx.multicast"


def enabled(ctx: Any) -> bool:
    configs = pass_configs(ctx)
    return bool(configs.get(KEY, True))


@dataclass(frozen=True)
class Group:
    """The CTAs of a cluster of ``shape`` that differ from this one only along ``axes``."""

    shape: tuple[int, int, int]
    axes: tuple[int, ...]

    def stride(self, a: int) -> int:
        return math.prod(self.shape[:a])

    @property
    def size(self) -> int:
        return math.prod(self.shape[a] for a in self.axes)

    @property
    def pattern(self) -> int:
        """The ctaMask of the group of rank 0."""
        ranks = [0]
        for a in self.axes:
            ranks = [r + i * self.stride(a) for r in ranks for i in range(self.shape[a])]
        return sum(1 << r for r in ranks)

    def coord(self, a: int) -> E.Expr:
        return Intrin("tlx_cluster_coord", (E.const(self.stride(a)), E.const(self.shape[a])))

    def mask(self) -> E.Expr:
        """This CTA's group as a ctaMask: the pattern shifted to its first rank."""
        others = [self.coord(a) * self.stride(a) if a else self.coord(a) for a in range(3)
                  if a not in self.axes and self.shape[a] > 1]
        if not others:
            return E.const(self.pattern)
        return E.binary("<<", E.const(self.pattern), functools.reduce(lambda x, y: x + y, others))

    def index(self) -> E.Expr:
        """This CTA's position in its group (the first axis fastest)."""
        out = self.coord(self.axes[-1])
        for a in reversed(self.axes[:-1]):
            out = out * self.shape[a] + self.coord(a)
        return out


@dataclass(frozen=True)
class Multicast:
    """The multicast loads of one pipeline, by destination tile: this CTA's slice and its group."""

    slices: dict[Buffer, McSlice]
    groups: dict[Buffer, Group]

    def _groups(self, plans: tuple[TmaCopy, ...]) -> list[Group]:
        return list(dict.fromkeys(self.groups[p.op.dst.buffer] for p in plans if p.op.dst.buffer in self.groups))

    def empty_count(self, plans: tuple[TmaCopy, ...], consumers: int) -> int:
        """Arrivals per phase of the empty barrier of ``plans``: one per consumer thread of each CTA
        that multicasts into them (this one included)."""
        groups = self._groups(plans)
        if not groups:
            return consumers
        return consumers * bin(functools.reduce(operator.or_, (g.pattern for g in groups))).count("1")

    def release(self, bar: E.Expr, plans: tuple[TmaCopy, ...]) -> Stmt:
        """The consumers' release of the stage of ``plans`` whose empty barrier is ``bar``."""
        groups = self._groups(plans)
        if not groups:
            return Evaluate(Intrin("tlx_mbar_arrive", (bar,)))
        peers = functools.reduce(lambda a, b: E.binary("|", a, b), [g.mask() for g in groups])
        return Evaluate(Intrin("tlx_mbar_arrive_peers", (bar, peers, E.const(math.prod(groups[0].shape)))))


def _axes_free_of(exprs: list[E.Expr], kernel: Kernel, axes: list[int]) -> list[int]:
    """The axes among ``axes`` whose block index none of ``exprs`` mentions."""
    used = {id(v) for e in exprs for v in E.free_vars(e)}
    return [a for a in axes if id(kernel.block_vars[a]) not in used]


def _slice(p: TmaCopy, group: Group, specs: dict[tuple, TmaSpec]) -> McSlice | None:
    rows = p.rows
    if rows % group.size or (rows // group.size) % 8:
        log.debug("T.copy at line %s: %d rows do not split into %d slices of whole 8-row swizzle atoms: no multicast",
                  getattr(p.op.loc, "line", "?"), rows, group.size)
        return None
    part = rows // group.size
    spec = tensor_map(specs, p.op.src, p.spec.arg, tile_dims(p.op.src), p.layout.panel, part, p.spec.swizzle)
    return McSlice(spec, group.index() * part, group.mask())


def plan_multicast(kernel: Kernel, loop: For, plans: list[TmaCopy], specs: dict[tuple, TmaSpec],
                   ctx: Any, persistent: bool = False) -> Multicast | None:
    """The multicast form of the warp-specialized loop ``loop`` of ``kernel``, or ``None``; adds
    the slices' tensor maps to ``specs``. ``persistent``: the kernel walks its tiles in cluster
    tiles (persistent.py), which keeps cluster-mates' block indices whatever the block order."""
    shape = launch_dims(kernel, getattr(getattr(ctx, "target", None), "arch", None))
    if shape is None or not enabled(ctx):
        return None
    if not persistent and block_remap(kernel, ctx) is not None:
        log.debug("%s: rasterized block order: no TMA multicast (sharing is not provable)", kernel.loc)
        return None
    bounds = [loop.extent] + ([loop.start] if loop.start is not None else [])
    clustered = [a for a in range(min(3, len(kernel.block_vars))) if shape[a] > 1]
    uniform = _axes_free_of(bounds, kernel, clustered)
    slices: dict[Buffer, McSlice] = {}
    groups: dict[Buffer, Group] = {}
    for p in plans:
        axes = tuple(_axes_free_of(list(p.op.src.starts), kernel, uniform))
        if not axes:
            continue
        group = Group(shape, axes)
        mc = _slice(p, group, specs)
        if mc is not None:
            slices[p.op.dst.buffer] = mc
            groups[p.op.dst.buffer] = group
    return Multicast(slices, groups) if slices else None
