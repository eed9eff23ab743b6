"""``ThreadAllreduce`` on the interpreter's per-thread lanes (lane = linear thread index, x
fastest): the lanes are viewed as the block's (z, y, x) grid and combined along the reduced
axis in the order ``core_ir.allreduce`` fixes, so results match the CUDA backend bit for bit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tilelang_x.core_ir.allreduce import WARP, ThreadAllreduce, accumulator_dtype
from tilelang_x.core_ir.errors import TileLangError

from . import numerics
from .runtime import MASK

Fn = Callable[[list], Any]
_COMBINE: dict[str, Callable[[Any, Any], Any]] = {
    "sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
    "bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor,
}


def allreduce_fn(s: ThreadAllreduce, fv: Fn, fc: Fn, fi: Fn, threads: tuple[int, ...]) -> Fn:
    """The closure computing, for every lane, the reduction of its group (in ``s.value``'s
    accumulator dtype); ``fv``, ``fc``, ``fi`` compute the value, condition and identity."""
    x, y, z = (tuple(threads) + (1, 1))[:3]
    n = x * y * z
    src, acc = s.value.dtype, accumulator_dtype(s.value.dtype)
    combine = _COMBINE[s.kind]
    axis = 2 - s.dim
    order = s.order

    def serial(g: np.ndarray) -> np.ndarray:
        out = g[..., 0]
        for i in range(1, g.shape[-1]):
            out = combine(out, g[..., i])
        return out[..., None]

    def reduce_groups(g: np.ndarray) -> np.ndarray:
        """``g``'s last axis (the groups) reduced, kept as an axis of extent 1."""
        if order == "serial":
            return serial(g)
        lanes = np.arange(min(g.shape[-1], WARP))
        if order == "warps":
            g = g.reshape(*g.shape[:-1], -1, WARP)
        m = len(lanes) // 2
        while m:
            g = combine(g, g[..., lanes ^ m])
            m //= 2
        return g[..., :1] if order == "butterfly" else serial(g[..., 0])

    def run(env: list) -> np.ndarray:
        mask = env[MASK]
        if mask is not None and not np.all(mask):
            raise TileLangError("T.tvm_thread_allreduce is executed by only some threads of the block",
                                loc=s.loc, hint="every thread of the block takes part; threads that should not "
                                                "contribute pass False as its condition")
        v = np.broadcast_to(np.asarray(fv(env)), (n,))
        c = np.broadcast_to(np.asarray(fc(env)), (n,))
        v = np.asarray(numerics.convert(np.where(c, v, fi(env)), acc, src))
        g = np.moveaxis(v.reshape(z, y, x), axis, -1)
        r = np.broadcast_to(reduce_groups(g), g.shape)
        return np.ascontiguousarray(np.moveaxis(r, -1, axis)).reshape(n)

    return run
