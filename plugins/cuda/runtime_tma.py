"""Kernels with TMA tensor-map parameters (sm_90a): encoding the maps, and the ctypes launcher.

Each ``kind == "tmap"`` parameter is a 128-byte ``CUtensorMap`` encoded on the host with
``cuTensorMapEncodeTiled`` from the tensor's address, shape and strides (the box and swizzle come
from ``meta.tensor_maps``), cached per (address, shape, strides), and passed by value. A tensor
TMA cannot describe (address not 16-byte aligned, a stride not a multiple of 16 bytes, a
non-unit innermost stride) switches the call to the ``fallback`` launcher (the same kernel
compiled without TMA), with a debug log line, never a wrong answer.

``TmaMaps`` holds the per-kernel part (which parameter is which map, the switch to the fallback);
the compiled launcher (``_launcher.pyx``, parameter code ``C_TMAP``) calls its ``helper()``'s
``tma_map`` on a cache miss. ``TmaLauncher`` is the ctypes twin used when it is not built.
"""

from __future__ import annotations

import ctypes
import logging
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...core_ir.errors import ArgumentError
from . import driver
from .hopper.tma import TMA_DTYPE
from .runtime import _SCALAR_CODES, LoadedKernel, _conv, _current_device, _Helper

log = logging.getLogger("tilelang_x.cuda.tma")

_U64P = ctypes.POINTER(ctypes.c_uint64)
_U32P = ctypes.POINTER(ctypes.c_uint32)
L2_PROMOTION_128B = 2
_SLOT = 128


class TmaUnsupported(Exception):
    """The tensor cannot be described by a tensor map."""


def _encoder() -> Any:
    fn = driver.libcuda().cuTensorMapEncodeTiled
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, _U64P, _U64P, _U32P, _U32P,
                   ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def encode(t: Any, dtype: str, box: tuple[int, ...], swizzle: int) -> bytes:
    """The 128-byte tensor map of torch tensor ``t`` (raises ``TmaUnsupported``)."""
    rank, eb = t.dim(), t.element_size()
    shape, strides = tuple(t.shape), tuple(t.stride())
    if rank != len(box) or t.data_ptr() % 16 or (rank and strides[-1] != 1) or 0 in shape:
        raise TmaUnsupported(f"shape {shape}, strides {strides}, address {t.data_ptr():#x}")
    gstrides = [strides[d] * eb for d in reversed(range(rank - 1))]
    if any(s % 16 or s >= 1 << 40 for s in gstrides):
        raise TmaUnsupported(f"byte strides {gstrides} are not multiples of 16")
    raw = (ctypes.c_uint8 * (_SLOT + 64))()
    addr = (ctypes.addressof(raw) + 63) // 64 * 64
    code = _encoder()(
        ctypes.c_void_p(addr), TMA_DTYPE[dtype], rank, ctypes.c_void_p(t.data_ptr()),
        (ctypes.c_uint64 * rank)(*reversed(shape)), (ctypes.c_uint64 * max(1, rank - 1))(*gstrides),
        (ctypes.c_uint32 * rank)(*box), (ctypes.c_uint32 * rank)(*([1] * rank)), 0, swizzle, L2_PROMOTION_128B, 0)
    if code != driver.SUCCESS:
        raise TmaUnsupported(f"cuTensorMapEncodeTiled: {driver.error_name(code)}")
    return ctypes.string_at(addr, _SLOT)


class TmaMaps:
    """One kernel's tensor maps: the description of each ``tmap`` parameter and the fallback."""

    def __init__(self, kernel: LoadedKernel, fallback: Callable[[], Callable[..., None]] | None = None) -> None:
        self.kernel = kernel
        self.meta = meta = kernel.meta
        maps = iter(meta.tensor_maps)
        #: parameter position -> (tensor arg index, dtype name, box, swizzle)
        self.infos: dict[int, tuple[int, str, tuple[int, ...], int]] = {
            i: next(maps) for i, p in enumerate(meta.params) if p.kind == "tmap"}
        self._fallback_factory = fallback
        self._fallback: Callable[..., None] | None = None

    def encode_param(self, pos: int, t: Any) -> bytes | str:
        """The map of parameter ``pos`` for tensor ``t``, or why TMA cannot describe ``t``."""
        info = self.infos[pos]
        try:
            return encode(t, info[1], info[2], info[3])
        except TmaUnsupported as e:
            return str(e)

    def helper(self) -> _Helper:
        """The compiled launcher's helper: ``_Helper`` with ``tma_map`` and ``use_fallback``."""
        helper = _Helper(self.kernel)
        helper.tma_map = self.encode_param  # type: ignore[attr-defined]
        helper.use_fallback = self.use_fallback  # type: ignore[attr-defined]
        return helper

    def use_fallback(self, args: Sequence[Any], dims: Any, why: str) -> None:
        """Run this call on the launcher built without TMA (or say why there is none)."""
        if self._fallback_factory is None:
            raise ArgumentError(f"kernel '{self.meta.kernel_name}': a tensor cannot be described for TMA ({why})",
                                hint="pass contiguous 16-byte-aligned tensors, or compile with "
                                     "pass_configs={'tl.disable_tma_lower': True}")
        if self._fallback is None:
            log.debug("kernel '%s': TMA cannot describe a tensor (%s); using the cp.async build",
                      self.meta.kernel_name, why)
            self._fallback = self._fallback_factory()
        self._fallback(args, dims)


class TmaLauncher:
    """``launcher(args, dims=())`` for a kernel with tensor-map parameters (ctypes)."""

    def __init__(self, kernel: LoadedKernel, maps: TmaMaps, launch: Callable[..., int] | None = None) -> None:
        self.kernel = kernel
        self._launch = launch or driver.libcuda().cuLaunchKernel  # runtime_ex.LaunchEx: with attributes
        self.meta = meta = kernel.meta
        self.maps = maps
        n = max(1, len(meta.params))
        self._raw = (ctypes.c_uint8 * (_SLOT * n + 64))()
        base = (ctypes.addressof(self._raw) + 63) // 64 * 64
        self._addr = [base + _SLOT * i for i in range(n)]
        self._ptrs = (ctypes.c_void_p * n)(*self._addr)
        self._items: list[tuple[str, int, Any]] = []
        for p in meta.params:
            if p.kind in ("tmap", "buffer"):
                self._items.append((p.kind, p.index, None))
            else:
                code = _SCALAR_CODES.get(p.dtype)
                if code is None:
                    raise ArgumentError(f"kernel parameter '{p.name}' has dtype {p.dtype}, which cannot be passed")
                self._items.append((p.kind, p.index, _conv(code)))
        self._bufs = [p.index for p in meta.params if p.kind in ("buffer", "tmap")]
        self._align = [p.align_mask for p in meta.params]
        self._cache: dict[tuple, bytes] = {}
        self._helper = _Helper(kernel)
        self._grid_fn = None if meta.grid_static is not None else meta.grid
        self.dim_names: tuple[str, ...] = tuple(meta.dims)

    def _map(self, pos: int, t: Any) -> bytes:
        key = (pos, t.data_ptr(), tuple(t.shape), tuple(t.stride()))
        m = self._cache.get(key)
        if m is None:
            got = self.maps.encode_param(pos, t)
            if isinstance(got, str):
                raise TmaUnsupported(got)
            if len(self._cache) >= 256:
                self._cache.clear()
            m = self._cache[key] = got
        return m

    def launch_on(self, device: int, args: Sequence[Any], dims: tuple[int, ...]) -> None:
        """Launch with ``dims`` ordered like ``dim_names`` (this launcher reads the device anyway)."""
        self(args, dims)

    def __call__(self, args: Sequence[Any], dims: Sequence[int] | Mapping[str, int] | None = ()) -> None:
        if not dims:
            dims = ()
        elif isinstance(dims, Mapping):
            dims = self._helper.dims_list(dims)
        try:
            dev = args[self._bufs[0]].get_device() if self._bufs else _current_device()
            for i, (kind, idx, extra) in enumerate(self._items):
                at = self._addr[i]
                if kind == "tmap":
                    ctypes.memmove(at, self._map(i, args[idx]), _SLOT)
                elif kind == "buffer":
                    ptr = args[idx].data_ptr()
                    if ptr & self._align[i]:  # not aligned for the kernel's vector accesses
                        self._helper.diagnose(args, dims)
                    ctypes.c_uint64.from_address(at).value = ptr
                else:
                    ctypes.c_uint64.from_address(at).value = extra(dims[idx] if kind == "dim" else args[idx])
        except TmaUnsupported as e:
            self.maps.use_fallback(args, dims, str(e))
            return
        except (AttributeError, TypeError, ValueError, OverflowError, IndexError, struct.error):
            self._helper.diagnose(args, dims)
            raise
        if dev < 0:
            self._helper.diagnose(args, dims)
        gx, gy, gz = self.meta.grid(dims) if self._grid_fn is not None else self.meta.grid_static  # type: ignore[misc]
        fn, ctx = self.kernel.resolve(dev)
        lib = driver.libcuda()
        stream = self._helper.get_stream(dev)
        cur = ctypes.c_void_p()
        lib.cuCtxGetCurrent(ctypes.byref(cur))
        switch = (cur.value or 0) != ctx
        if switch:
            lib.cuCtxPushCurrent_v2(ctypes.c_void_p(ctx))
        bx, by, bz = self.meta.block
        res = self._launch(ctypes.c_void_p(fn), gx, gy, gz, bx, by, bz, self.meta.smem_bytes,
                           ctypes.c_void_p(stream), self._ptrs, None)
        if switch:
            lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
        if res != 0:
            self._helper.launch_error(res, dev, (gx, gy, gz))
