"""The arguments of ``T.ptr`` parameters: a tensor, or on CUDA an integer device address, turned
into a tensor of the shape, dtype and strides that ``T.make_tensor`` gave the parameter.

A tensor argument lends its memory from its first element: it must have the made dtype, be on the
kernel's device and hold the made tensor within its storage (the error names the line of the
``T.make_tensor`` when it does not). The result is a view of that storage
(``torch.as_strided`` / ``numpy.lib.stride_tricks.as_strided``), so the backend sees an ordinary
tensor argument and a write lands in the caller's memory. An integer address (TileLang's
``x.data_ptr()``) is taken on trust, for CUDA targets only: the driver says which GPU owns it, and
the view over it is made there through the CUDA array interface.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .core_ir.errors import ArgumentError

__all__ = ["pointer_value"]


def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = [1] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        strides[axis] = strides[axis + 1] * shape[axis + 1]
    return tuple(strides)


def _extent(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    """The elements from the first to one past the last that the tensor reaches."""
    if not all(shape):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


class _DeviceMemory:
    """``nbytes`` bytes at CUDA address ``addr``, as the CUDA array interface describes them."""

    def __init__(self, addr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,), "typestr": "|u1", "data": (addr, False), "version": 2, "strides": None,
        }


def _device_view(address: int, nbytes: int, fail: Callable[[str, str], ArgumentError]) -> Any:
    """A uint8 torch tensor over ``nbytes`` at CUDA ``address``, on the GPU that owns it."""
    import torch

    from .plugins.cuda.driver import pointer_device

    device = pointer_device(address)
    if device is None:
        raise fail(f"{address:#x} is not an address of CUDA device memory",
                   "pass `x.data_ptr()` of a CUDA tensor, or the tensor itself")
    with torch.cuda.device(device):
        return torch.as_tensor(_DeviceMemory(address, nbytes), device=torch.device("cuda", device))


def pointer_value(
    arg: Any,
    shape: tuple[int, ...],
    strides: tuple[int, ...] | None,
    dtype: Any,
    device_type: str,
    fail: Callable[[str, str], ArgumentError],
) -> Any:
    """The tensor of ``shape`` / ``strides`` (elements; ``None``: row-major) and IR ``dtype`` over
    the memory ``arg`` points to; ``fail(message, hint)`` makes the error to raise."""
    from .args import arg_dtype, torch_dtype

    strides = strides if strides is not None else _row_major(shape)
    need = _extent(shape, strides)
    torch = sys.modules.get("torch")
    if isinstance(arg, int) and not isinstance(arg, bool):
        if device_type != "cuda":
            raise fail(f"got the integer address {arg:#x}, but target device {device_type!r} takes tensors only",
                       "pass the tensor itself (its memory is used from its first element)")
        raw = _device_view(arg, need * dtype.bytes, fail)
        return raw.view(torch_dtype(dtype)).as_strided(shape, strides)
    if torch is not None and isinstance(arg, torch.Tensor):
        have = arg.untyped_storage().nbytes() // max(arg.element_size(), 1) - arg.storage_offset()
        device = arg.device.type
    elif type(arg).__module__ == "numpy" and type(arg).__name__ == "ndarray":
        if not arg.flags.c_contiguous:
            raise fail("is a numpy array that is not contiguous", "pass `numpy.ascontiguousarray(...)`")
        have, device = arg.size, "cpu"
    else:
        raise fail(f"expected a tensor or an integer address, got {type(arg).__name__}",
                   "pass a torch tensor (or, on CUDA, its `.data_ptr()`)")
    got = arg_dtype(arg.dtype)
    if got != dtype:
        raise fail(f"T.make_tensor made a {dtype} tensor over it, but the argument has dtype {arg.dtype}",
                   "pass a tensor of that dtype (`.view(...)` reinterprets one without copying)")
    if device != device_type:
        raise fail(f"is on device {device!r}, but the kernel runs on {device_type!r}",
                   f"move it with `.to('{device_type}')`")
    if need > have:
        raise fail(
            f"the tensor made over it (shape {list(shape)}, strides {list(strides)}) reaches {need} elements, "
            f"but the argument's memory holds {have} from its first element",
            "pass a larger tensor, or make a smaller one over it")
    if torch is not None and isinstance(arg, torch.Tensor):
        return torch.as_strided(arg, shape, strides, arg.storage_offset())
    import numpy as np

    flat = arg.reshape(-1)
    return np.lib.stride_tricks.as_strided(flat, shape, [s * flat.itemsize for s in strides])
