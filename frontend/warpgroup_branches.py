"""Branches on whole warpgroups as ``T.ws`` regions.

FlashAttention-3-style TileLang kernels specialize their warpgroups with an ``if`` on the thread
index rather than ``T.ws``::

    tx = T.get_thread_binding()
    if tx < 128:            # producer warpgroup
        T.dec_max_nreg(24)
        ...T.tma_copy, T.barrier_arrive...
    else:                   # consumer warpgroups
        T.inc_max_nreg(240)
        ...T.barrier_wait, T.gemm...

A branch that holds what only a region may hold (tile ops, ``T.Parallel`` loops, barrier
operations) on a condition that takes each warpgroup (128 threads) of a one-dimensional block
whole means the region of those warpgroups: when a ``T.Kernel`` closes, such an ``if`` (and an
``elif`` chain of them) becomes one ``WarpSpecialize`` per branch, for the warpgroups whose
threads take it. Other branches on the thread index keep their per-thread meaning.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core_ir.evaluate import evaluate
from ..core_ir.expr import Expr, ThreadIndex
from ..core_ir.stmt import For, If, Seq, Stmt, WarpSpecialize
from ..core_ir.tileops import TileOp
from ..core_ir.verify_ws import BARRIER_OPS, WARPGROUP
from ..core_ir.visit import map_fields, walk

__all__ = ["branches_to_regions", "threads_taking"]


def branches_to_regions(body: Stmt, threads: tuple[int, ...]) -> Stmt:
    """``body`` (of a kernel of ``threads``) with its ``if``s on whole warpgroups that hold region
    work as ``T.ws`` regions (see the module docstring)."""
    if len(threads) != 1 or threads[0] % WARPGROUP or any(isinstance(n, WarpSpecialize) for n in walk(body)):
        return body  # no whole warpgroups, or a kernel written with T.ws that keeps its own regions
    return _convert(body, tuple(range(threads[0] // WARPGROUP)))


def _convert(s: Any, everyone: tuple[int, ...]) -> Any:
    """``s`` with its outermost ``if``s on whole warpgroups that hold region work as regions."""
    if isinstance(s, tuple):
        items = tuple(_convert(v, everyone) for v in s)
        return s if all(a is b for a, b in zip(items, s)) else items
    if not isinstance(s, Stmt):
        return s
    if isinstance(s, If) and _region_work(s):
        then = _takers(s, everyone)
        if then is not None and 0 < len(then) < len(everyone):
            return Seq(tuple(_regions(s, everyone)), s.loc)
    return map_fields(s, lambda v: _convert(v, everyone))


def threads_taking(cond: Expr, tids: np.ndarray) -> np.ndarray | None:
    """Whether each thread of (x) index ``tids`` makes ``cond`` true, or ``None`` when ``cond``
    reads more than the thread index."""
    try:
        return np.broadcast_to(np.asarray(evaluate(cond, {ThreadIndex(0): tids}), dtype=bool), tids.shape)
    except (KeyError, TypeError, ZeroDivisionError):
        return None


def _takers(s: If, ids: tuple[int, ...]) -> tuple[int, ...] | None:
    """The warpgroups among ``ids`` whose threads all take the ``then`` branch of ``s``, when its
    condition reads only the thread index and takes each of them whole (else ``None``)."""
    taken = threads_taking(s.cond, np.arange(ids[0] * WARPGROUP, (ids[-1] + 1) * WARPGROUP))
    if taken is None:
        return None
    per_group = taken.reshape(len(ids), WARPGROUP)
    if not (per_group.all(axis=1) | ~per_group.any(axis=1)).all():
        return None
    return tuple(g for g, row in zip(ids, per_group) if row[0])


def _region_work(s: Stmt) -> bool:
    """Whether ``s`` holds what only the threads of a region may run together."""
    return any(isinstance(n, (TileOp, *BARRIER_OPS)) or isinstance(n, For) and n.kind == "parallel" for n in walk(s))


def _regions(s: Stmt | None, ids: tuple[int, ...]) -> list[Stmt]:
    """``s``, run by warpgroups ``ids``, as regions: an ``if`` on whole warpgroups splits them."""
    if s is None or not ids:
        return []
    if isinstance(s, If):
        then = _takers(s, ids)
        if then is not None:
            rest = tuple(g for g in ids if g not in then)
            return _regions(s.then, then) + _regions(s.otherwise, rest)
    return [WarpSpecialize(ids, s, s.loc)]
