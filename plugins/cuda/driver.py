"""The CUDA driver API, reached through ``ctypes`` at run time, and its errors in plain words.

Nothing here is imported when the plugin loads: ``libcuda()`` opens ``libcuda.so.1`` (the
driver's library, present wherever a GPU driver is installed; the CUDA toolkit is not needed)
the first time a kernel is loaded. ``CudaError`` carries the driver's error name and what to do
about it.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

from ...core_ir.errors import TileLangError
from ...core_ir.source import SourceLoc

# CUresult values named in hints (cuda.h, enum cudaError_enum).
SUCCESS = 0
INVALID_VALUE = 1
OUT_OF_MEMORY = 2
NOT_INITIALIZED = 3
NO_DEVICE = 100
INVALID_DEVICE = 101
INVALID_IMAGE = 200
INVALID_CONTEXT = 201
NO_BINARY_FOR_GPU = 209
INVALID_PTX = 218
UNSUPPORTED_PTX_VERSION = 222
INVALID_HANDLE = 400
NOT_FOUND = 500
ILLEGAL_ADDRESS = 700
LAUNCH_OUT_OF_RESOURCES = 701
LAUNCH_TIMEOUT = 702
ASSERT = 710
ILLEGAL_INSTRUCTION = 715
MISALIGNED_ADDRESS = 716
LAUNCH_FAILED = 719
SYSTEM_DRIVER_MISMATCH = 803
COMPAT_NOT_SUPPORTED_ON_DEVICE = 804

# CUdevice_attribute / CUfunction_attribute values used by the runtime.
ATTR_MAX_THREADS_PER_BLOCK = 1
ATTR_MAX_SHARED_MEMORY_PER_BLOCK = 8
ATTR_MULTIPROCESSOR_COUNT = 16
ATTR_L2_CACHE_SIZE = 38
ATTR_COMPUTE_CAPABILITY_MAJOR = 75
ATTR_COMPUTE_CAPABILITY_MINOR = 76
ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
FUNC_ATTR_MAX_THREADS_PER_BLOCK = 0
FUNC_ATTR_SHARED_SIZE_BYTES = 1
FUNC_ATTR_NUM_REGS = 4
FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

_STICKY = "the CUDA context is now unusable: every later CUDA call in this process fails, so restart it"

_HINTS: dict[int, str] = {
    INVALID_VALUE: "a launch argument is out of range (grid, block or shared-memory size)",
    OUT_OF_MEMORY: "the GPU is out of memory: free tensors or use smaller problems",
    NOT_INITIALIZED: "the CUDA driver is not initialised: create a CUDA tensor with torch first",
    NO_DEVICE: "no CUDA GPU is visible: check nvidia-smi and CUDA_VISIBLE_DEVICES",
    INVALID_DEVICE: "the device index does not name a visible GPU",
    INVALID_IMAGE: "the cubin is damaged or not for this GPU: clear the cache (TILELANG_X_CACHE_DIR) and recompile",
    INVALID_CONTEXT: "no CUDA context is current on this thread: run any torch CUDA operation on the device first",
    NO_BINARY_FOR_GPU: "the kernel was compiled for another GPU architecture: compile for this GPU "
    "(target='cuda' detects it; or name it, e.g. target='cuda:sm_90a')",
    INVALID_PTX: "the driver cannot compile this PTX: ship a cubin instead",
    UNSUPPORTED_PTX_VERSION: "the PTX is newer than the driver understands: compile to a cubin, or use an NVRTC "
    "no newer than the driver (pip install 'nvidia-cuda-nvrtc==<driver CUDA version>.*')",
    INVALID_HANDLE: "a stale CUDA handle (module, function or stream) was used",
    NOT_FOUND: "the kernel's entry symbol is not in the cubin (mismatched source and launch metadata)",
    ILLEGAL_ADDRESS: "the kernel read or wrote memory outside its tensors (run it with target='interp' to find the "
    "out-of-bounds index); " + _STICKY,
    LAUNCH_OUT_OF_RESOURCES: "the block needs more registers than the GPU has for it: use fewer threads per block "
    "or smaller tiles",
    LAUNCH_TIMEOUT: "the kernel ran too long (display watchdog): " + _STICKY,
    ASSERT: "a device-side assertion failed; " + _STICKY,
    ILLEGAL_INSTRUCTION: "the kernel executed an illegal instruction (compiled for another architecture?); " + _STICKY,
    MISALIGNED_ADDRESS: "a tensor's data pointer is not aligned enough for the kernel's vector accesses (a slice "
    "or view at an odd offset: pass a .contiguous() copy); " + _STICKY,
    LAUNCH_FAILED: "the kernel faulted; " + _STICKY,
    SYSTEM_DRIVER_MISMATCH: "the CUDA driver library and the kernel driver differ in version: reinstall the driver",
    COMPAT_NOT_SUPPORTED_ON_DEVICE: "the CUDA forward-compatibility library is not supported on this GPU",
}


class CudaError(TileLangError):
    """A CUDA driver call failed; ``code`` is the ``CUresult`` and ``name`` its enum name."""

    def __init__(self, message: str, code: int = 0, name: str = "", hint: str | None = None,
                 loc: SourceLoc | None = None) -> None:
        self.code = code
        self.name = name
        super().__init__(message, loc=loc, hint=hint)


class CudaNotAvailableError(CudaError):
    """No CUDA driver library on this machine (or it cannot be initialised)."""


def error_name(code: int) -> str:
    """``CUDA_ERROR_...`` for a ``CUresult`` (asks the driver when it is loaded)."""
    lib = _LIB
    if lib is not None:
        ptr = ctypes.c_char_p()
        if lib.cuGetErrorName(code, ctypes.byref(ptr)) == SUCCESS and ptr.value:
            return ptr.value.decode()
    return f"CUDA error {code}"


def error_string(code: int) -> str:
    """The driver's one-line description of a ``CUresult`` (empty when unknown)."""
    lib = _LIB
    if lib is not None:
        ptr = ctypes.c_char_p()
        if lib.cuGetErrorString(code, ctypes.byref(ptr)) == SUCCESS and ptr.value:
            return ptr.value.decode()
    return ""


def make_error(code: int, what: str, hint: str | None = None) -> CudaError:
    """A ``CudaError`` for ``CUresult`` ``code`` returned by ``what`` (e.g. ``"cuLaunchKernel(gemm)"``)."""
    name = error_name(code)
    desc = error_string(code)
    msg = f"{what} failed: {name}" + (f" ({desc})" if desc else "")
    return CudaError(msg, code=code, name=name, hint=hint or _HINTS.get(code))


def check(code: int, what: str, hint: str | None = None) -> None:
    """Raise ``CudaError`` unless ``code`` is ``CUDA_SUCCESS``."""
    if code != SUCCESS:
        raise make_error(code, what, hint)


# --- finding and opening libcuda -----------------------------------------------------------------

_LIB: ctypes.CDLL | None = None
_LOCK = threading.Lock()

_SEARCH_DIRS = (
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/lib/wsl/lib",
    "/usr/local/cuda/compat",
)

_c = ctypes
_P = _c.c_void_p
_PP = _c.POINTER(_c.c_void_p)
_I = _c.c_int
_U = _c.c_uint

# Exported symbol -> (argtypes). Every function returns CUresult (int).
_PROTOTYPES: dict[str, tuple[Any, ...]] = {
    "cuInit": (_U,),
    "cuDriverGetVersion": (_c.POINTER(_I),),
    "cuGetErrorName": (_I, _c.POINTER(_c.c_char_p)),
    "cuGetErrorString": (_I, _c.POINTER(_c.c_char_p)),
    "cuDeviceGet": (_c.POINTER(_I), _I),
    "cuDeviceGetCount": (_c.POINTER(_I),),
    "cuDeviceGetAttribute": (_c.POINTER(_I), _I, _I),
    "cuDeviceGetName": (_c.c_char_p, _I, _I),
    "cuDevicePrimaryCtxRetain": (_PP, _I),
    "cuDevicePrimaryCtxRelease_v2": (_I,),
    "cuCtxGetCurrent": (_PP,),
    "cuCtxSetCurrent": (_P,),
    "cuCtxPushCurrent_v2": (_P,),
    "cuCtxPopCurrent_v2": (_PP,),
    "cuCtxGetDevice": (_c.POINTER(_I),),
    "cuCtxSynchronize": (),
    "cuModuleLoadData": (_PP, _c.c_char_p),
    "cuModuleUnload": (_P,),
    "cuModuleGetFunction": (_PP, _P, _c.c_char_p),
    "cuFuncGetAttribute": (_c.POINTER(_I), _I, _P),
    "cuFuncSetAttribute": (_P, _I, _I),
    "cuLaunchKernel": (_P, _U, _U, _U, _U, _U, _U, _U, _P, _PP, _PP),
    "cuStreamSynchronize": (_P,),
    "cuPointerGetAttribute": (_P, _I, _c.c_uint64),
}

#: ``CUpointer_attribute``: the ordinal of the device that owns an address.
POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9


def _candidates() -> list[str]:
    from tilelang_x import knobs

    names: list[str] = []
    override = knobs.runtime.libcuda
    if override:
        names.append(override)
    names.append("libcuda.so.1")
    names.extend(os.path.join(d, "libcuda.so.1") for d in _SEARCH_DIRS)
    names.append("libcuda.so")
    return names


def _open() -> ctypes.CDLL:
    tried: list[str] = []
    lib: ctypes.CDLL | None = None
    for name in _candidates():
        if os.sep in name and not os.path.exists(name):
            continue
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError as e:
            tried.append(f"{name}: {e}")
    if lib is None:
        raise CudaNotAvailableError(
            "the CUDA driver library libcuda.so.1 was not found",
            hint="install the NVIDIA GPU driver, or point TILELANG_X_LIBCUDA at libcuda.so.1"
            + ("; tried " + "; ".join(tried[:3]) if tried else ""),
        )
    for sym, argtypes in _PROTOTYPES.items():
        fn = getattr(lib, sym, None)
        if fn is None:
            raise CudaNotAvailableError(
                f"the CUDA driver library has no {sym}: the driver is too old",
                hint="install an NVIDIA driver for CUDA 12 or newer",
            )
        fn.argtypes = list(argtypes)
        fn.restype = _c.c_int
    return lib


def libcuda() -> ctypes.CDLL:
    """The driver library, opened and ``cuInit``-ed once per process.

    Raises ``CudaNotAvailableError`` when there is no driver or no GPU.
    """
    global _LIB
    lib = _LIB
    if lib is not None:
        return lib
    with _LOCK:
        if _LIB is None:
            lib = _open()
            code = lib.cuInit(0)
            if code != SUCCESS:
                _LIB = lib  # so error_name can ask the driver
                err = make_error(code, "cuInit")
                _LIB = None
                raise CudaNotAvailableError(str(err.message), code=code, name=err.name, hint=err.hint)
            _LIB = lib
    assert _LIB is not None
    return _LIB


def function_address(name: str) -> int:
    """The address of driver function ``name`` (for the compiled launcher)."""
    return ctypes.cast(getattr(libcuda(), name), ctypes.c_void_p).value or 0


def driver_version() -> tuple[int, int]:
    """The CUDA version the installed driver supports, e.g. ``(13, 0)``."""
    v = _c.c_int()
    check(libcuda().cuDriverGetVersion(_c.byref(v)), "cuDriverGetVersion")
    return v.value // 1000, (v.value % 1000) // 10


def device_attribute(device: int, attr: int) -> int:
    """``cuDeviceGetAttribute`` for device ordinal ``device``."""
    lib = libcuda()
    dev = _c.c_int()
    check(lib.cuDeviceGet(_c.byref(dev), device), f"cuDeviceGet({device})", hint=_HINTS[INVALID_DEVICE])
    out = _c.c_int()
    check(lib.cuDeviceGetAttribute(_c.byref(out), attr, dev), "cuDeviceGetAttribute")
    return out.value


def pointer_device(address: int) -> int | None:
    """The ordinal of the GPU whose memory ``address`` is in, or ``None`` when the driver knows no
    allocation there."""
    ordinal = _c.c_int(-1)
    code = libcuda().cuPointerGetAttribute(_c.byref(ordinal), POINTER_ATTRIBUTE_DEVICE_ORDINAL, address)
    return ordinal.value if code == 0 and ordinal.value >= 0 else None


def device_arch(device: int) -> str:
    """``sm_XY`` of device ``device`` (without the ``a`` suffix)."""
    major = device_attribute(device, ATTR_COMPUTE_CAPABILITY_MAJOR)
    minor = device_attribute(device, ATTR_COMPUTE_CAPABILITY_MINOR)
    return f"sm_{major}{minor}"


class _LaunchConfig(ctypes.Structure):
    """``CUlaunchConfig`` (cuda.h), without launch attributes: a kernel compiled with
    ``__cluster_dims__`` carries its cluster shape."""

    _fields_ = [("grid", _c.c_uint * 3), ("block", _c.c_uint * 3), ("shared_mem_bytes", _c.c_uint),
                ("stream", _c.c_void_p), ("attrs", _c.c_void_p), ("num_attrs", _c.c_uint)]


#: ``CUlaunchAttributeID`` values (cuda.h) of the attributes tilelang-x sets.
LAUNCH_ATTR_COOPERATIVE = 2
LAUNCH_ATTR_PROGRAMMATIC_STREAM_SERIALIZATION = 6


class LaunchAttribute(ctypes.Structure):
    """``CUlaunchAttribute`` (cuda.h): an id padded to 8 bytes, then a 64-byte value union, of which
    the attributes used here read the first ``int``."""

    _fields_ = [("id", _c.c_uint), ("pad", _c.c_char * 4), ("value", _c.c_int), ("rest", _c.c_char * 60)]


def launch_config(grid: tuple[int, int, int], block: tuple[int, int, int], smem: int, stream: int,
                  attrs: Any, num_attrs: int) -> _LaunchConfig:
    """A ``CUlaunchConfig`` with ``num_attrs`` launch attributes at ``attrs``."""
    return _LaunchConfig((_c.c_uint * 3)(*grid), (_c.c_uint * 3)(*block), smem, _c.c_void_p(stream),
                         _c.cast(attrs, _c.c_void_p), num_attrs)


def launch_kernel_ex() -> Any:
    """``cuLaunchKernelEx`` (CUDA 12+), for launches with attributes."""
    fn = getattr(libcuda(), "cuLaunchKernelEx", None)
    if fn is None:
        raise CudaNotAvailableError("the CUDA driver library has no cuLaunchKernelEx: the driver is too old",
                                    hint="install an NVIDIA driver for CUDA 12 or newer")
    fn.argtypes = [_c.POINTER(_LaunchConfig), _P, _PP, _PP]
    fn.restype = _c.c_int
    return fn


def max_active_blocks_per_sm(function: int, threads: int, smem: int) -> int:
    """``cuOccupancyMaxActiveBlocksPerMultiprocessor``: how many blocks of ``function`` (``threads``
    threads, ``smem`` bytes of dynamic shared memory) one SM of the current context's device holds."""
    fn = libcuda().cuOccupancyMaxActiveBlocksPerMultiprocessor
    fn.argtypes = [_c.POINTER(_I), _P, _I, _c.c_size_t]
    out = _c.c_int()
    check(fn(_c.byref(out), _c.c_void_p(function), threads, smem), "cuOccupancyMaxActiveBlocksPerMultiprocessor")
    return out.value


def max_active_clusters(function: int, grid: tuple[int, int, int], block: tuple[int, int, int], smem: int) -> int:
    """``cuOccupancyMaxActiveClusters``: how many clusters of ``function`` (with the cluster shape
    it was compiled with) fit on the current context's device at once; 0 when the driver cannot say."""
    fn = getattr(libcuda(), "cuOccupancyMaxActiveClusters", None)
    if fn is None:  # a driver before CUDA 12
        return 0
    config = _LaunchConfig((_c.c_uint * 3)(*grid), (_c.c_uint * 3)(*block), smem, None, None, 0)
    out = _c.c_int()
    check(fn(_c.byref(out), _c.c_void_p(function), _c.byref(config)), "cuOccupancyMaxActiveClusters")
    return out.value


def primary_context(device: int) -> int:
    """The primary context of ``device`` (the one torch uses), retained for the process's life."""
    lib = libcuda()
    dev = _c.c_int()
    check(lib.cuDeviceGet(_c.byref(dev), device), f"cuDeviceGet({device})", hint=_HINTS[INVALID_DEVICE])
    ctx = _c.c_void_p()
    check(lib.cuDevicePrimaryCtxRetain(_c.byref(ctx), dev), f"cuDevicePrimaryCtxRetain({device})")
    return ctx.value or 0


def current_context() -> int:
    """The context current on this thread (0 when none)."""
    ctx = _c.c_void_p()
    check(libcuda().cuCtxGetCurrent(_c.byref(ctx)), "cuCtxGetCurrent")
    return ctx.value or 0


class context:  # noqa: N801 - used as a context manager like a function
    """``with context(ctx):`` makes ``ctx`` current on this thread for the block (no-op when it is)."""

    __slots__ = ("ctx", "pushed")

    def __init__(self, ctx: int) -> None:
        self.ctx = ctx
        self.pushed = False

    def __enter__(self) -> None:
        if current_context() != self.ctx:
            check(libcuda().cuCtxPushCurrent_v2(_c.c_void_p(self.ctx)), "cuCtxPushCurrent")
            self.pushed = True

    def __exit__(self, *exc: object) -> None:
        if self.pushed:
            old = _c.c_void_p()
            libcuda().cuCtxPopCurrent_v2(_c.byref(old))
