"""Launches with attributes: cooperative grids (``T.sync_grid``) and programmatic dependent launch
(``T.pdl_sync``), see ``grid_sync.py``.

``LaunchEx(meta)`` stands in for ``cuLaunchKernel`` (the same arguments) in the ctypes launchers
and launches through ``cuLaunchKernelEx`` with ``CU_LAUNCH_ATTRIBUTE_COOPERATIVE`` when
``meta.cooperative`` and ``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`` when
``meta.pdl``. ``WithGridCounter`` wraps the launcher of a cooperative kernel: it checks that the
grid fits on the device at once (``cuOccupancyMaxActiveBlocksPerMultiprocessor`` × SMs) and
appends the grid-barrier counter of the calling device and stream to the arguments.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from typing import Any

from ...core_ir.errors import ArgumentError
from . import driver
from .meta import KernelMeta

__all__ = ["AppendedArgument", "LaunchEx", "WithGridCounter", "grid_counter", "launch_attributes"]


def launch_attributes(meta: KernelMeta) -> list[int]:
    """The ``CUlaunchAttributeID``s a launch of ``meta``'s kernel sets (each to 1)."""
    out = []
    if meta.cooperative:
        out.append(driver.LAUNCH_ATTR_COOPERATIVE)
    if meta.pdl:
        out.append(driver.LAUNCH_ATTR_PROGRAMMATIC_STREAM_SERIALIZATION)
    return out


class LaunchEx:
    """``cuLaunchKernel``'s signature, launched by ``cuLaunchKernelEx`` with ``meta``'s attributes."""

    def __init__(self, meta: KernelMeta) -> None:
        ids = launch_attributes(meta)
        self.attrs = (driver.LaunchAttribute * len(ids))()
        for a, i in zip(self.attrs, ids):
            a.id, a.value = i, 1
        self.launch = driver.launch_kernel_ex()

    def __call__(self, fn: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, smem: int, stream: Any,
                 params: Any, extra: Any) -> int:
        stream = stream.value if isinstance(stream, ctypes.c_void_p) else stream
        config = driver.launch_config((gx, gy, gz), (bx, by, bz), smem, stream or 0, self.attrs, len(self.attrs))
        return self.launch(ctypes.byref(config), fn if isinstance(fn, ctypes.c_void_p) else ctypes.c_void_p(fn),
                           params, extra)


#: (device, stream) -> the grid-barrier counter word of the cooperative kernels on that stream. They
#: run one after another and each leaves the counter's low bits zero (tlx_grid.h), so they share it.
_COUNTERS: dict[tuple[int, int], Any] = {}


def grid_counter(device: int, stream: int) -> Any:
    """The zero-initialised counter of ``T.sync_grid`` for the kernels of ``stream`` on ``device``."""
    counter = _COUNTERS.get((device, stream))
    if counter is None:
        import torch

        counter = _COUNTERS[(device, stream)] = torch.zeros(1, dtype=torch.int32, device=f"cuda:{device}")
    return counter


class AppendedArgument:
    """A launcher that appends one argument of the calling device and stream to every call's
    arguments (``extra``): the grid-barrier counter, stream-K's workspace. ``check`` may refuse
    the launch first."""

    def __init__(self, inner: Any, meta: KernelMeta) -> None:
        from .runtime import _stream_getter

        self.inner = inner
        self.meta = meta
        self.dim_names: tuple[str, ...] = inner.dim_names
        self.first = next((p.index for p in meta.params if p.kind == "buffer"), 0)
        self.get_stream = _stream_getter()

    def extra(self, device: int) -> Any:
        raise NotImplementedError

    def check(self, device: int, dims: Any) -> None:
        """Raise when the launch cannot run on ``device`` (nothing by default)."""

    def launch_on(self, device: int, args: Sequence[Any], dims: tuple[int, ...]) -> None:
        self.check(device, dims)
        self.inner.launch_on(device, (*args, self.extra(device)), dims)

    def __call__(self, args: Sequence[Any], dims: Any = ()) -> None:
        try:
            device = args[self.first].get_device()
        except (AttributeError, IndexError, TypeError):
            device = -1
        if device < 0:  # the inner launcher says what is wrong with the arguments
            self.inner(args, dims)
            return
        self.check(device, dims)
        self.inner((*args, self.extra(device)), dims)


class WithGridCounter(AppendedArgument):
    """The launcher of a cooperative kernel (see the module docstring)."""

    def __init__(self, inner: Any, kernel: Any, meta: KernelMeta) -> None:
        super().__init__(inner, meta)
        self.kernel = kernel
        self.capacity: dict[int, tuple[int, int]] = {}  # device -> (blocks per SM, SMs)

    def extra(self, device: int) -> Any:
        return grid_counter(device, self.get_stream(device))

    def check(self, device: int, dims: Any) -> None:
        meta = self.meta
        if isinstance(dims, Mapping):
            dims = {getattr(k, "name", k): v for k, v in dims.items()}
        grid = meta.grid(dims or ())
        blocks = grid[0] * grid[1] * grid[2]
        cap = self.capacity.get(device)
        if cap is None:
            fn, ctx = self.kernel.resolve(device)
            with driver.context(ctx):
                per_sm = driver.max_active_blocks_per_sm(fn, meta.num_threads, meta.smem_bytes)
            cap = self.capacity[device] = (per_sm, driver.device_attribute(device, driver.ATTR_MULTIPROCESSOR_COUNT))
        if blocks > cap[0] * cap[1]:
            raise ArgumentError(
                f"kernel '{meta.kernel_name}' calls T.sync_grid(), so all its blocks must run at once, but its grid "
                f"{grid} has {blocks} blocks and at most {cap[0] * cap[1]} fit on cuda:{device} ({cap[0]} per SM "
                f"on {cap[1]} SMs)", loc=meta.loc,
                hint="use fewer blocks (each may loop over several tiles), or fewer threads, registers or shared "
                "memory per block so that more fit on an SM")

