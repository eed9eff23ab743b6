"""Thread-block clusters: ``T.Kernel(..., cluster_dims=(cx, cy, cz))``.

On sm_90a the kernel is declared with ``__cluster_dims__(cx, cy, cz)``, so an ordinary
``cuLaunchKernel`` launches the grid as clusters of ``cx·cy·cz`` blocks; the grid must be a
multiple of the cluster shape in every dimension (checked here at compile time for a static grid,
by ``KernelMeta.grid`` at launch for a grid over dynamic dims). Clusters change what a kernel
computes only through cluster features (the Hopper pipeline's TMA multicast,
hopper/multicast.py; the kernel's own cluster barriers and ranks, cluster_sync.py, which refuses
clusters of several blocks there), so targets without clusters (sm_80..sm_90) ignore the request.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from ...core_ir import expr as E
from ...core_ir.errors import BackendNotImplementedError, TileLangError
from ...core_ir.stmt import Kernel

log = logging.getLogger("tilelang_x.cuda.cluster")

#: the portable cluster size limit (larger clusters need a non-portable opt-in at launch)
MAX_CTAS = 8
_AXES = "xyz"


def requested(kernel: Kernel) -> tuple[int, int, int] | None:
    """The kernel's ``cluster_dims`` as three ints, or ``None`` when it asks for no cluster."""
    dims = kernel.ann().get("cluster_dims")
    if dims is None:
        return None
    vals = [int(d) for d in dims] + [1] * (3 - len(dims))
    return vals[0], vals[1], vals[2]


def supports_clusters(arch: str | None) -> bool:
    return arch == "sm_90a"


def launch_dims(kernel: Kernel, arch: str | None) -> tuple[int, int, int] | None:
    """The cluster shape to declare, or ``None`` (no request, a 1×1×1 one, or a target without
    clusters, which ignores it)."""
    dims = requested(kernel)
    if dims is None or dims == (1, 1, 1):
        return None
    if not supports_clusters(arch):
        log.debug("%s: T.Kernel(cluster_dims=%s) ignored on %s (no thread-block clusters; the kernel uses no "
                  "cluster features there)", kernel.loc, dims, arch)
        return None
    return dims


def grid_problem(grid: tuple[int, ...], dims: tuple[int, int, int]) -> str | None:
    """Why ``grid`` cannot be launched in clusters of ``dims`` blocks, or ``None``."""
    for ax, g, c in zip(_AXES, tuple(grid) + (1,) * (3 - len(grid)), dims):
        if g % c:
            return f"grid dimension {ax} is {g}, not a multiple of the cluster's {c}"
    return None


def check(kernel: Kernel, arch: str | None) -> None:
    """Compile-time checks of a cluster request on a target with clusters: at most ``MAX_CTAS``
    blocks, and a static grid divisible by the cluster shape."""
    dims = launch_dims(kernel, arch)
    if dims is None:
        return
    if math.prod(dims) > MAX_CTAS:
        raise BackendNotImplementedError(
            f"T.Kernel(cluster_dims={dims}) asks for clusters of {math.prod(dims)} blocks; at most {MAX_CTAS} are "
            "supported", loc=kernel.loc, hint=f"use cluster_dims whose product is at most {MAX_CTAS}, e.g. (2, 1, 1)")
    grid = [E.as_int(g) for g in kernel.grid]
    if any(g is None for g in grid):
        return  # checked at launch (KernelMeta.grid)
    problem = grid_problem(tuple(g for g in grid if g is not None), dims)
    if problem:
        raise TileLangError(
            f"T.Kernel grid {tuple(grid)} cannot be launched in clusters of {dims} blocks: {problem}",
            loc=kernel.loc, hint="choose cluster_dims that divide the grid in every dimension (or a grid that is a "
            "multiple of them, e.g. by changing the block size)")


def flattened(annotations: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
    """The annotations with the cluster reshaped to ``(size, 1, 1)``: for a kernel whose grid
    became one-dimensional (the persistent form) while its size stays a multiple of the cluster's."""
    ann = dict(annotations)
    dims = ann.get("cluster_dims")
    if dims is None:
        return annotations
    return tuple((k, (math.prod(int(d) for d in dims), 1, 1) if k == "cluster_dims" else v) for k, v in annotations)
