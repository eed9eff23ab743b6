"""The order in which a kernel's blocks are launched, chosen for L2 reuse (pass config
``tlx.block_order``, on by default; both paths).

The hardware starts blocks ``blockIdx.x`` fastest, so the blocks resident at once differ mostly in
their first grid index. TileLang's FlashAttention backward is written
``T.Kernel(heads, ceildiv(seq_len, block_M), batch)``: a wave of 132 blocks then spans all 32
heads, and every block reads (and adds dQ into) its own head's Q, dO and dQ, 128 MB for the wave
at B4 S4096 D128, twice the L2. Blocks of the same head but other key blocks share all of them.

For each grid axis the stage sums the bytes a block reads from global tensors whose reads do not
depend on that axis's block variable: what neighbours along that axis share (a tensor's per-block
footprint: its bytes over the extents of the axes its reads depend on; writes and atomics do not
count, see ``_reads``). When the
first axis shares nothing and another shares something, the kernel's grid and block variables
are permuted together so that the axis sharing most comes first: the block variables keep their
values, and only the hardware's order of the blocks changes (``T.get_block_binding`` and
``T.get_block_extent`` name the variables and extents, so they follow). H200 (session 15,
FlashAttention backward main kernel vs cuDNN's whole backward, in the same rounds): D128 0.88 →
0.95, causal 0.97 → 1.01, D64 0.93 → 1.00.

Left as written: a grid of one axis, a kernel whose accesses to global tensors the stage cannot
read (an index that loads, a pointer), a dynamic grid or tensor shape, a kernel rasterised in
panels (``T.use_swizzle`` or ``tlx.auto_rasterize``, rasterize.py), one with cluster operations or
``cluster_dims`` (a cluster's blocks are consecutive along x), one that prints or asserts (its
messages name ``blockIdx``), one with a ``T.call_extern`` (code that may read ``blockIdx``
itself), and a permutation that would put more than 65535 blocks on y or z.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ...core_ir import expr as E
from ...core_ir.buffer import Buffer, Region
from ...core_ir.stmt import Assert, Kernel, PrimFunc, Print, Store
from ...core_ir.tileops import Atomic, Copy
from ...core_ir.visit import rewrite, walk
from .cluster_sync import has_cluster_ops
from .perf_options import pass_configs
from .rasterize import block_remap

KEY = "tlx.block_order"
#: CUDA's limit on gridDim.y and gridDim.z
_MAX_YZ = 65535


def _reads(kernel: Kernel) -> dict[Buffer, set[int]] | None:
    """Per global tensor the kernel reads, the block axes its reads depend on; ``None`` when some
    access cannot be read (an index that loads a value, a pointer, a tile op other than a copy or
    an atomic on a global tensor). Writes and atomics are left out: blocks that update the same
    elements gain nothing from running together (atomics on one address serialise)."""
    axis = {id(v): i for i, v in enumerate(kernel.block_vars)}
    deps: dict[Buffer, set[int]] = {}
    seen: set[int] = set()  # the global regions of copies and atomics, read or not

    def read(b: Buffer, idx: tuple[E.Expr, ...]) -> bool:
        if any(isinstance(x, E.Element) for i in idx for x in walk(i)):
            return False
        found = deps.setdefault(b, set())
        for i in idx:
            found.update(axis[id(v)] for v in E.free_vars(i) if id(v) in axis)
        return True

    for n in walk(kernel.body):
        if isinstance(n, (Copy, Atomic)):
            srcs = [n.src] if isinstance(n, Copy) else [n.value] if isinstance(n.value, Region) else []
            for r in (*srcs, n.dst):
                seen.add(id(r))
            for r in srcs:
                if r.buffer.scope == "global" and not read(r.buffer, (*r.starts, *r.extents)):
                    return None
            continue
        b = getattr(n, "buffer", None)
        if not isinstance(b, Buffer) or b.scope != "global" or id(n) in seen:
            continue
        if isinstance(n, E.Load):
            if not read(b, n.indices):
                return None
        elif not isinstance(n, (Store, E.AtomicLoad, E.AtomicFetch)):
            return None
    return deps


def _footprint(b: Buffer, axes: set[int], grid: list[int]) -> float | None:
    shape = [E.as_int(d) for d in b.shape]
    if any(d is None for d in shape):
        return None
    return math.prod(shape) * b.dtype.bytes / math.prod(grid[a] for a in axes)  # type: ignore[arg-type]


def shared_bytes(kernel: Kernel) -> list[float] | None:
    """Per grid axis, the bytes of global tensors that blocks differing only along it both read
    (``None``: unknown)."""
    grid = [E.as_int(g) for g in kernel.grid]
    deps = _reads(kernel)
    if deps is None or any(g is None for g in grid):
        return None
    out = [0.0] * len(grid)
    for b, axes in deps.items():
        size = _footprint(b, axes, grid)  # type: ignore[arg-type]
        if size is None:
            return None
        for a in range(len(grid)):
            if a not in axes:
                out[a] += size
    return out


def chosen_order(kernel: Kernel) -> tuple[int, ...] | None:
    """The grid axes in launch order, or ``None`` to keep the kernel's."""
    if len(kernel.grid) < 2 or (E.as_int(kernel.grid[0]) or 0) < 2:
        return None
    shared = shared_bytes(kernel)
    if shared is None or shared[0] > 0:
        return None
    first = max(range(len(shared)), key=lambda a: (shared[a], -a))
    if shared[first] <= 0:
        return None
    order = (first, *(a for a in range(len(shared)) if a != first))
    if any((E.as_int(kernel.grid[a]) or 0) > _MAX_YZ for a in order[1:]):
        return None
    return order


def _eligible(kernel: Kernel, ctx: Any) -> bool:
    if kernel.ann().get("cluster_dims") is not None or has_cluster_ops(kernel.body):
        return False
    if block_remap(kernel, ctx) is not None:
        return False
    # an extern call runs code the compiler cannot read, which may read blockIdx itself
    return not any(isinstance(n, (Print, Assert, E.ExternCall)) for n in walk(kernel.body))


def block_order_stage(func: PrimFunc, ctx: Any) -> PrimFunc:
    """Stage: each kernel's grid axes permuted as ``chosen_order`` says."""
    if not bool(pass_configs(ctx).get(KEY, True)):
        return func

    def fn(n: Any) -> Any:
        if not isinstance(n, Kernel) or not _eligible(n, ctx):
            return None
        order = chosen_order(n)
        if order is None:
            return None
        return dataclasses.replace(n, grid=tuple(n.grid[a] for a in order),
                                   block_vars=tuple(n.block_vars[a] for a in order))

    body = rewrite(func.body, fn)
    return func if body is func.body else dataclasses.replace(func, body=body)
