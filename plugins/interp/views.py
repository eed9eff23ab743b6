"""Views (``T.view``, ``T.reshape``) in the interpreter: numpy views of their base's array.

A view has no statement; when its base's array is bound (a parameter at launch, an ``Alloc`` when
it runs) the arrays of the base's views are bound too, as numpy views of the same memory, so a
write through one is read through the other. A buffer allocated inside ``T.Parallel`` keeps its
lane axes in front (``lead``); the view reinterprets each lane's elements.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tilelang_x.core_ir.buffer import Buffer
from tilelang_x.core_ir.errors import ArgumentError, BackendNotImplementedError

from . import numerics


def check_view(v: Buffer) -> None:
    """Reject what the interpreter cannot reinterpret: bfloat16 and float8 live in float32 arrays
    (``numerics``), so their bits are not in memory to be read as another dtype."""
    base = v.storage
    if v.dtype != base.dtype and (numerics.is_narrow(v.dtype) or numerics.is_narrow(base.dtype)):
        raise BackendNotImplementedError(
            f"the interpreter cannot view {base.dtype} `{base.name}` as {v.dtype} (`{v.name}`): it keeps "
            "bfloat16 and float8 values in float32 arrays, not their bits", loc=v.loc,
            hint="run on CUDA, or pass the data as integers (tensor.view(torch.int16) / torch.uint8) and view those")


def reinterpret(arr: np.ndarray, lead: int, shape: tuple[int, ...], dt: np.dtype, v: Buffer) -> np.ndarray:
    """``arr``'s memory, after its ``lead`` lane axes, as ``shape`` of storage dtype ``dt``."""
    if not arr.flags.c_contiguous:
        raise ArgumentError(
            f"`{v.storage.name}` is not contiguous, so view `{v.name}` (at {v.loc}) cannot alias it",
            hint="pass a contiguous tensor (tensor.contiguous())")
    flat = arr.reshape(arr.shape[:lead] + (-1,))
    if flat.dtype != dt:
        flat = flat.view(dt)
    return flat.reshape(arr.shape[:lead] + shape)


def view_binder(comp: Any, buf: Buffer, lead: int) -> Callable[[list], None] | None:
    """A function that binds the arrays of ``buf``'s views once ``buf``'s array is in its slot
    (``None`` when ``buf`` has no views)."""
    views = comp.views.get(buf)
    if not views:
        return None
    plans = []
    for v in views:
        check_view(v)
        fshape = [comp.expr(d, v.loc) for d in v.shape]
        plans.append((comp.buffer_slot(v), fshape, numerics.storage_dtype(v.dtype), v))
    bk = comp.buffer_slot(buf)

    def bind(env: list) -> None:
        arr = env[bk]
        for slot, fshape, dt, v in plans:
            env[slot] = reinterpret(arr, lead, tuple(int(f(env)) for f in fshape), dt, v)

    return bind
