"""Loading cubins and launching kernels on torch's current CUDA stream.

``load(binary, meta)`` returns a launcher ``launcher(args, dims=())`` (see ``meta.py`` for what
``args`` and ``dims`` hold). The module is loaded lazily, once per device, into that device's
primary context (the one torch uses); the tensors' device picks it, so one compiled kernel runs
on every GPU of the machine. The launch goes on ``torch.cuda.current_stream(device)``.

Two launchers with the same behaviour: the compiled one from ``_launcher.pyx`` (built at install
when Cython and a C compiler are present; about 1-2 µs of host time per call) and a ``ctypes`` one
(always there, a few µs slower). ``TILELANG_X_LAUNCHER=ctypes|cython|auto`` picks.

Per call the launcher checks only what is cheap (every tensor on one CUDA device, contiguous);
shapes and dtypes are the kernel object's job. Anything wrong raises ``ArgumentError``; a failed
launch raises ``driver.CudaError`` naming the CUDA error and what to do.
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import struct
import sys
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...core_ir.errors import ArgumentError
from . import driver
from .compile import CudaBinary
from .grid_program import Program, grid_program
from .meta import DEFAULT_SMEM_LIMIT, SK_FLAG_BYTES, SK_FLAG_WORDS, KernelMeta, make_grid_fn
from .runtime_ex import AppendedArgument, LaunchEx, WithGridCounter, launch_attributes

log = logging.getLogger("tilelang_x.cuda.runtime")

# Parameter codes shared with _launcher.pyx.
C_PTR, C_I8, C_I16, C_I32, C_I64, C_F32, C_F64, C_F16, C_BF16, C_U64, C_TMAP = range(11)

_SCALAR_CODES: dict[str, int] = {
    "bool": C_I8, "int8": C_I8, "uint8": C_I8, "int16": C_I16, "uint16": C_I16, "int32": C_I32,
    "uint32": C_I32, "int64": C_I64, "uint64": C_U64, "float32": C_F32, "float64": C_F64,
    "float16": C_F16, "bfloat16": C_BF16,
}


def half_bits(x: Any) -> int:
    """The IEEE half bits of ``x`` (for float16 scalar parameters)."""
    return struct.unpack("<H", struct.pack("<e", float(x)))[0]


def bf16_bits(x: Any) -> int:
    """The bfloat16 bits of ``x``, rounded to nearest even."""
    bits = struct.unpack("<I", struct.pack("<f", float(x)))[0]
    if (bits & 0x7F800000) == 0x7F800000 and (bits & 0x007FFFFF):
        return ((bits >> 16) | 0x40) & 0xFFFF
    bits += 0x7FFF + ((bits >> 16) & 1)
    return (bits >> 16) & 0xFFFF


# --- per-device modules ---------------------------------------------------------------------------


def _unload(modules: dict[int, tuple[int, int, int]]) -> None:
    if sys.is_finalizing() or driver._LIB is None:
        return
    lib = driver._LIB
    for ctx, module, _fn in modules.values():
        try:
            with driver.context(ctx):
                lib.cuModuleUnload(ctypes.c_void_p(module))
        except driver.CudaError:
            pass
    modules.clear()


class LoadedKernel:
    """A cubin and its launch metadata; loads the module into each device's context on demand."""

    def __init__(self, binary: CudaBinary, meta: KernelMeta) -> None:
        if binary.kernel_name != meta.kernel_name:
            raise ArgumentError(
                f"the cubin holds kernel '{binary.kernel_name}' but the launch metadata names '{meta.kernel_name}'"
            )
        self.binary = binary
        self.meta = meta
        self._modules: dict[int, tuple[int, int, int]] = {}  # device -> (ctx, module, function)
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _unload, self._modules)

    def resolve(self, device: int) -> tuple[int, int]:
        """``(CUfunction, CUcontext)`` for ``device``, loading the module there the first time."""
        entry = self._modules.get(device)
        if entry is None:
            with self._lock:
                entry = self._modules.get(device)
                if entry is None:
                    entry = self._load(device)
                    self._modules[device] = entry
        return entry[2], entry[0]

    def attributes(self, device: int) -> dict[str, int]:
        """Registers per thread, static shared memory and the most threads per block on ``device``."""
        fn, ctx = self.resolve(device)
        lib = driver.libcuda()
        out: dict[str, int] = {}
        for key, attr in (
            ("num_regs", driver.FUNC_ATTR_NUM_REGS),
            ("static_smem", driver.FUNC_ATTR_SHARED_SIZE_BYTES),
            ("max_threads", driver.FUNC_ATTR_MAX_THREADS_PER_BLOCK),
        ):
            v = ctypes.c_int()
            driver.check(lib.cuFuncGetAttribute(ctypes.byref(v), attr, ctypes.c_void_p(fn)), "cuFuncGetAttribute")
            out[key] = v.value
        return out

    def _device_desc(self, device: int) -> str:
        try:
            name = ctypes.create_string_buffer(256)
            dev = ctypes.c_int()
            lib = driver.libcuda()
            lib.cuDeviceGet(ctypes.byref(dev), device)
            lib.cuDeviceGetName(name, 256, dev)
            return f"cuda:{device} ({name.value.decode()}, {driver.device_arch(device)})"
        except driver.CudaError:
            return f"cuda:{device}"

    def _load(self, device: int) -> tuple[int, int, int]:
        lib = driver.libcuda()
        meta = self.meta
        name = meta.kernel_name
        ctx = driver.primary_context(device)
        with driver.context(ctx):
            module = ctypes.c_void_p()
            code = lib.cuModuleLoadData(ctypes.byref(module), self.binary.cubin)
            if code != driver.SUCCESS:
                hint = None
                if code in (driver.NO_BINARY_FOR_GPU, driver.INVALID_IMAGE):
                    hint = (
                        f"the kernel was compiled for {self.binary.arch} and cannot run on "
                        f"{self._device_desc(device)}: compile it for that GPU (target='cuda' detects it)"
                    )
                raise driver.make_error(code, f"loading kernel '{name}' on cuda:{device} (cuModuleLoadData)", hint)
            fn = ctypes.c_void_p()
            code = lib.cuModuleGetFunction(ctypes.byref(fn), module, name.encode())
            if code != driver.SUCCESS:
                lib.cuModuleUnload(module)
                raise driver.make_error(code, f"finding kernel '{name}' in its cubin (cuModuleGetFunction)")
            entry = (ctx, module.value or 0, fn.value or 0)
            try:
                self._check_resources(device, entry)
            except BaseException:
                lib.cuModuleUnload(module)
                raise
        return entry

    def _check_resources(self, device: int, entry: tuple[int, int, int]) -> None:
        lib = driver.libcuda()
        meta = self.meta
        name = meta.kernel_name
        fn = ctypes.c_void_p(entry[2])

        def fattr(attr: int) -> int:
            v = ctypes.c_int()
            driver.check(lib.cuFuncGetAttribute(ctypes.byref(v), attr, fn), "cuFuncGetAttribute")
            return v.value

        max_threads = fattr(driver.FUNC_ATTR_MAX_THREADS_PER_BLOCK)
        if meta.num_threads > max_threads:
            regs = fattr(driver.FUNC_ATTR_NUM_REGS)
            raise driver.CudaError(
                f"kernel '{name}' asks for {meta.num_threads} threads per block, but at most {max_threads} fit on "
                f"{self._device_desc(device)} (it uses {regs} registers per thread)",
                hint="use fewer threads per block (threads=...) or smaller tiles",
            )
        static = fattr(driver.FUNC_ATTR_SHARED_SIZE_BYTES)
        total = meta.smem_bytes + static
        if total > DEFAULT_SMEM_LIMIT or meta.smem_bytes > DEFAULT_SMEM_LIMIT - static:
            limit = driver.device_attribute(device, driver.ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            if total > limit:
                tiles = ", ".join(f"`{tile}` {size / 1024:.1f} KB" for tile, size in meta.smem_tiles[:4])
                raise driver.CudaError(
                    f"kernel '{name}' needs {total / 1024:.1f} KB shared memory, the GPU allows {limit / 1024:.1f} KB "
                    f"({self._device_desc(device)})" + (f"; its largest shared tiles: {tiles}" if tiles else ""),
                    hint="reduce block sizes or num_stages (a pipelined tile takes num_stages times its size); "
                         "tiles never live at the same time already share bytes (pass config tlx.merge_shared)",
                    loc=meta.loc,
                )
            code = lib.cuFuncSetAttribute(fn, driver.FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES, meta.smem_bytes)
            driver.check(code, f"allowing kernel '{name}' {meta.smem_bytes} bytes of dynamic shared memory "
                               "(cuFuncSetAttribute)")


# --- the launch plan and error paths shared by both launchers ------------------------------------


class _Plan:
    """What each C parameter is read from, precomputed once per kernel. ``buf_args``: the
    positions in ``args`` of the tensors (buffers and TMA tensor maps); ``grid_program``: the
    dynamic grid as an integer program for the compiled launcher (``None``: call ``grid_fn``)."""

    def __init__(self, meta: KernelMeta) -> None:
        codes: list[int] = []
        from_dims: list[int] = []
        index: list[int] = []
        buf_args: list[int] = []
        #: per C parameter, the low address bits that must be zero (a buffer's vector accesses)
        self.align_masks = [p.align_mask for p in meta.params]
        for p in meta.params:
            if p.kind in ("buffer", "tmap"):
                codes.append(C_PTR if p.kind == "buffer" else C_TMAP)
                buf_args.append(p.index)
            elif p.kind in ("scalar", "dim"):
                code = _SCALAR_CODES.get(p.dtype)
                if code is None:
                    raise ArgumentError(f"kernel parameter '{p.name}' has dtype {p.dtype}, which cannot be passed")
                codes.append(code)
            else:
                raise ArgumentError(f"kernel parameter '{p.name}' has unknown kind {p.kind!r}")
            from_dims.append(1 if p.kind == "dim" else 0)
            index.append(p.index)
        self.codes = codes
        self.from_dims = from_dims
        self.index = index
        self.buf_args = buf_args
        self.grid_static = meta.grid_static
        self.grid_fn: Callable[..., tuple[int, int, int]] | None = None
        self.grid_program: list[Program] | None = None
        if meta.grid_static is None and meta.cluster is not None:  # Python checks the grid against the cluster
            self.grid_fn = meta.checked_grid
        elif meta.grid_static is None:
            self.grid_fn = make_grid_fn(meta.grid_source, meta.dims)
            self.grid_program = grid_program(meta.grid_source, meta.dims)


def _stream_getter() -> Callable[[int], int]:
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda device: torch.cuda.current_stream(device).cuda_stream


def _current_device() -> int:
    import torch

    return torch.cuda.current_device()


class _Helper:
    """The launchers' Python side: the stream and device getters, dims given as a mapping, and the
    error paths (a rejected call becomes an ``ArgumentError``, a failed launch a ``CudaError``)."""

    def __init__(self, kernel: LoadedKernel) -> None:
        self.kernel = kernel
        self.meta = kernel.meta
        self.get_stream = _stream_getter()
        self.default_device = _current_device
        self.half_bits = half_bits
        self.positions: dict[Any, int] = {}  # dims key (name or Var) -> position in meta.dims, -1: unused

    def dim_position(self, key: Any) -> int:
        """Where dims key ``key`` (a name or a shape ``Var``) goes in ``meta.dims`` (-1: not used)."""
        name = getattr(key, "name", key)
        pos = self.positions[key] = self.meta.dims.index(name) if name in self.meta.dims else -1
        return pos

    def dims_list(self, dims: Mapping[Any, int]) -> list[Any]:
        """``dims`` keyed by name or by shape ``Var`` (what the kernel object passes), as a list
        ordered like ``meta.dims`` (``None`` where a dim is missing; the launch then rejects it)."""
        pos = self.positions
        out: list[Any] = [None] * len(self.meta.dims)
        for k, v in dims.items():
            i = pos.get(k)
            if i is None:
                i = self.dim_position(k)
            if i >= 0:
                out[i] = v
        return out

    def _arg_name(self, index: int) -> str:
        for p in self.meta.params:
            if p.kind != "dim" and p.index == index:
                return f"argument {index} ('{p.name}')"
        return f"argument {index}"

    def diagnose(self, args: Sequence[Any], dims: Any) -> None:
        """Raise ``ArgumentError`` describing what is wrong with ``args`` / ``dims``."""
        import torch

        meta = self.meta
        kname = meta.kernel_name
        if not isinstance(args, (list, tuple)):
            raise ArgumentError(f"kernel '{kname}' takes its arguments as a list or tuple, got {type(args).__name__}")
        needed = max((p.index for p in meta.params if p.kind != "dim"), default=-1) + 1
        if len(args) < needed:
            raise ArgumentError(f"kernel '{kname}' needs {needed} arguments, got {len(args)}")
        first: tuple[str, int] | None = None
        for p in meta.params:
            if p.kind == "dim":
                try:
                    int(dims[p.index] if not isinstance(dims, Mapping) else self.dims_list(dims)[p.index])
                except (IndexError, KeyError, TypeError, ValueError) as e:
                    dname = meta.dims[p.index] if p.index < len(meta.dims) else p.name
                    raise ArgumentError(
                        f"kernel '{kname}': dynamic dimension '{dname}' has no integer value in dims={dims!r}"
                    ) from e
                continue
            a = args[p.index]
            what = self._arg_name(p.index)
            if p.kind in ("buffer", "tmap"):
                if not (hasattr(a, "data_ptr") and hasattr(a, "get_device")):
                    raise ArgumentError(f"{what} of kernel '{kname}' must be a torch tensor, got {type(a).__name__}")
                dev = a.get_device()
                if dev < 0:
                    raise ArgumentError(
                        f"{what} of kernel '{kname}' is on {getattr(a, 'device', 'cpu')}, but the kernel runs on CUDA",
                        hint="move it with .cuda() (or .to('cuda'))",
                    )
                if first is None:
                    first = (what, dev)
                elif dev != first[1]:
                    raise ArgumentError(
                        f"the tensors of kernel '{kname}' are on different GPUs: {first[0]} on cuda:{first[1]}, "
                        f"{what} on cuda:{dev}",
                        hint="move every tensor to one device",
                    )
                if p.kind == "buffer" and not a.is_contiguous():
                    raise ArgumentError(
                        f"{what} of kernel '{kname}' is not contiguous (shape {tuple(a.shape)}, strides {a.stride()})",
                        hint="pass a contiguous tensor, e.g. x.contiguous()",
                    )
                if a.data_ptr() & p.align_mask:
                    raise ArgumentError(
                        f"{what} of kernel '{kname}' starts at address {a.data_ptr():#x}, not a multiple of "
                        f"{p.align} bytes, which the kernel's {p.align}-byte vector accesses to it need",
                        hint=f"pass a tensor that starts on a {p.align}-byte boundary, e.g. x.clone() of the slice",
                    )
            else:
                if isinstance(a, torch.Tensor) and a.numel() == 1:
                    raise ArgumentError(
                        f"{what} of kernel '{kname}' is a scalar parameter ({p.dtype}), got a tensor",
                        hint="pass a Python number, e.g. x.item()",
                    )
                try:
                    float(a) if p.dtype.startswith(("float", "bfloat")) else int(a)
                except (TypeError, ValueError, OverflowError) as e:
                    raise ArgumentError(
                        f"{what} of kernel '{kname}' must be a {p.dtype} number, got {type(a).__name__}"
                    ) from e
        raise ArgumentError(f"invalid arguments for kernel '{kname}': {[type(a).__name__ for a in args]}")

    def launch_error(self, code: int, device: int, grid: tuple[int, int, int]) -> None:
        """Raise the ``CudaError`` for a failed ``cuLaunchKernel``."""
        meta = self.meta
        hint = None
        if code == driver.INVALID_VALUE:
            hint = (
                f"grid {tuple(grid)}, block {meta.block}, {meta.smem_bytes} bytes of dynamic shared memory: "
                "a grid dimension may be out of range (y and z at most 65535) or the block too large"
            )
        raise driver.make_error(code, f"launching kernel '{meta.kernel_name}' on cuda:{device}", hint)


# --- the ctypes launcher --------------------------------------------------------------------------


def _conv(code: int) -> Callable[[Any], int]:
    if code == C_PTR:
        return lambda t: t.data_ptr()
    if code in (C_I8,):
        return lambda v: int(v) & 0xFF
    if code == C_I16:
        return lambda v: int(v) & 0xFFFF
    if code == C_I32:
        return lambda v: int(v) & 0xFFFFFFFF
    if code in (C_I64, C_U64):
        return lambda v: int(v) & 0xFFFFFFFFFFFFFFFF
    if code == C_F32:
        return lambda v: struct.unpack("<I", struct.pack("<f", float(v)))[0]
    if code == C_F64:
        return lambda v: struct.unpack("<Q", struct.pack("<d", float(v)))[0]
    if code == C_F16:
        return half_bits
    return bf16_bits


class CtypesLauncher:
    """``launcher(args, dims=())`` through ``ctypes`` (used when the compiled launcher is absent)."""

    def __init__(self, kernel: LoadedKernel, plan: _Plan, check_args: bool = True,
                 launch: Callable[..., int] | None = None) -> None:
        lib = driver.libcuda()
        self._check = check_args
        self.kernel = kernel
        self.meta = kernel.meta
        n = len(plan.codes)
        self._slots = (ctypes.c_uint64 * max(n, 1))()
        base = ctypes.addressof(self._slots)
        self._ptrs = (ctypes.c_void_p * max(n, 1))(*[base + 8 * i for i in range(max(n, 1))])
        self._items = [(i, bool(plan.from_dims[i]), plan.index[i], _conv(plan.codes[i]), plan.align_masks[i])
                       for i in range(n)]
        self._bufs = plan.buf_args
        self._grid_static = plan.grid_static
        self._grid_fn = plan.grid_fn
        self._block = self.meta.block
        self._smem = self.meta.smem_bytes
        self._launch = launch or lib.cuLaunchKernel
        self._ctx_get = lib.cuCtxGetCurrent
        self._push = lib.cuCtxPushCurrent_v2
        self._pop = lib.cuCtxPopCurrent_v2
        self._errors = _Helper(kernel)
        self._stream = self._errors.get_stream
        self._dev = -1
        self._fn = ctypes.c_void_p()
        self._ctx = 0
        self._cur = ctypes.c_void_p()
        self.dim_names: tuple[str, ...] = tuple(self.meta.dims)

    def launch_on(self, device: int, args: Sequence[Any], dims: tuple[int, ...]) -> None:
        """Launch with ``dims`` ordered like ``dim_names``, for callers that checked that every tensor
        is a contiguous tensor on CUDA device ``device`` (this launcher reads the device anyway)."""
        self(args, dims)

    def __call__(self, args: Sequence[Any], dims: Sequence[int] | Mapping[str, int] | None = ()) -> None:
        if not dims:
            dims = ()
        elif isinstance(dims, Mapping):
            dims = self._errors.dims_list(dims)
        dev = -1
        try:
            for j, i in enumerate(self._bufs):
                if j and not self._check:
                    break
                t = args[i]
                d = t.get_device()
                if j == 0:
                    dev = d
                if d != dev or d < 0 or (self._check and not t.is_contiguous()):
                    self._errors.diagnose(args, dims)
            slots = self._slots
            for i, from_dims, idx, conv, mask in self._items:
                slots[i] = conv(dims[idx] if from_dims else args[idx])
                if slots[i] & mask:  # a buffer not aligned for the kernel's vector accesses
                    self._errors.diagnose(args, dims)
        except (AttributeError, TypeError, ValueError, OverflowError, IndexError, struct.error):
            self._errors.diagnose(args, dims)
            raise
        if not self._bufs:
            dev = _current_device()
        if self._grid_static is not None:
            gx, gy, gz = self._grid_static
        else:
            g = self._grid_fn(*dims)  # type: ignore[misc]
            gx, gy, gz = max(1, int(g[0])), max(1, int(g[1])), max(1, int(g[2]))
        if dev != self._dev:
            fn, ctx = self.kernel.resolve(dev)
            self._fn, self._ctx, self._dev = ctypes.c_void_p(fn), ctx, dev
        stream = self._stream(dev)
        self._ctx_get(ctypes.byref(self._cur))
        switch = (self._cur.value or 0) != self._ctx
        if switch:
            self._push(ctypes.c_void_p(self._ctx))
        bx, by, bz = self._block
        res = self._launch(self._fn, gx, gy, gz, bx, by, bz, self._smem, stream, self._ptrs, None)
        if switch:
            self._pop(ctypes.byref(ctypes.c_void_p()))
        if res != 0:
            self._errors.launch_error(res, dev, (gx, gy, gz))


# --- choosing a launcher --------------------------------------------------------------------------

_EXT: Any = None
_EXT_ERROR: str | None = None


def compiled_launcher() -> Any:
    """The ``_launcher`` extension module bound to the driver, or ``None`` when it was not built."""
    global _EXT, _EXT_ERROR
    if _EXT is None and _EXT_ERROR is None:
        try:
            from . import _launcher  # type: ignore[attr-defined]
        except ImportError as e:
            _EXT_ERROR = str(e)
            return None
        if not _launcher.is_bound():
            _launcher.bind_driver(
                driver.function_address("cuLaunchKernel"),
                driver.function_address("cuCtxGetCurrent"),
                driver.function_address("cuCtxPushCurrent_v2"),
                driver.function_address("cuCtxPopCurrent_v2"),
            )
        _EXT = _launcher
    return _EXT


def launcher_kind() -> str:
    """``"cython"`` or ``"ctypes"``: which launcher ``load`` builds now."""
    from tilelang_x import knobs

    choice = knobs.runtime.launcher.strip().lower()
    if choice == "ctypes":
        return "ctypes"
    if compiled_launcher() is not None:
        return "cython"
    if choice == "cython":
        raise ArgumentError(
            f"TILELANG_X_LAUNCHER=cython but the compiled launcher is not built ({_EXT_ERROR})",
            hint="reinstall with Cython and a C compiler present: pip install cython && "
            "pip install --no-build-isolation -e .",
        )
    return "ctypes"


class _DeferredLauncher:
    """Stands in when no CUDA driver was found at load time (compiling on a machine without a GPU):
    the first call builds the real launcher, or raises ``CudaNotAvailableError``."""

    def __init__(self, binary: CudaBinary, meta: KernelMeta, check_args: bool,
                 fallback: Callable[[], Callable[..., None]] | None = None) -> None:
        self.binary, self.meta, self.check_args, self.fallback = binary, meta, check_args, fallback
        self._real: Any = None
        self.dim_names: tuple[str, ...] = tuple(meta.dims)

    def launch_on(self, device: int, args: Sequence[Any], dims: tuple[int, ...]) -> None:
        if self._real is None:
            self(args, dims)
        else:
            self._real.launch_on(device, args, dims)

    def __call__(self, args: Sequence[Any], dims: Any = ()) -> None:
        if self._real is None:
            self._real = load(self.binary, self.meta, check_args=self.check_args, fallback=self.fallback)
            if isinstance(self._real, _DeferredLauncher):
                self._real = None
                driver.libcuda()  # raises the error that says what is missing
        self._real(args, dims)  # type: ignore[misc]


def _one_block_per_sm(kernel: LoadedKernel, meta: KernelMeta) -> KernelMeta:
    """A persistent kernel's grid on the current device: one block per SM, a multiple of the
    cluster size, at most one per tile, and for a clustered kernel no more clusters than fit at
    once (a GPC holds whole clusters: ``cuOccupancyMaxActiveClusters``, which loads the module on
    that device now). The blocks stride by ``gridDim.x``, so any grid computes the same result;
    another device than the current one only changes the speed."""
    assert meta.persistent_tiles
    try:
        device = _current_device()
    except Exception:  # noqa: BLE001 - torch without CUDA: the driver's first device
        device = 0
    sms = driver.device_attribute(device, driver.ATTR_MULTIPROCESSOR_COUNT)
    c = meta.cluster[0] if meta.cluster else 1
    blocks = max(c, min(meta.persistent_tiles, sms) // c * c)
    if c > 1:
        fn, ctx = kernel.resolve(device)
        try:
            with driver.context(ctx):
                fits = driver.max_active_clusters(fn, (blocks, 1, 1), meta.block, meta.smem_bytes)
        except driver.CudaError as e:  # the grid is still correct, only maybe slower
            log.debug("%s: cuOccupancyMaxActiveClusters failed (%s): one block per SM", meta.kernel_name, e)
            fits = 0
        if fits:
            blocks = min(blocks, fits * c)
    return dataclasses.replace(meta, grid_static=(blocks, 1, 1))


#: (device, stream) -> the stream-K workspaces allocated for it, the largest last; kernels on one
#: stream run in turn and each leaves its flags zeroed, so all of them share the largest. The
#: smaller ones stay alive: a captured CUDA graph may still launch a kernel on one.
_WORKSPACES: dict[tuple[int, int], list[Any]] = {}


def _workspace(device: int, stream: int, nbytes: int) -> Any:
    """A zeroed workspace of at least ``nbytes`` for the stream-K kernels of ``stream``."""
    spaces = _WORKSPACES.setdefault((device, stream), [])
    if not spaces or spaces[-1].numel() < nbytes:
        import torch

        size = max(nbytes, 2 * spaces[-1].numel()) if spaces else nbytes
        spaces.append(torch.zeros(size, dtype=torch.uint8, device=f"cuda:{device}"))
    return spaces[-1]


class _WithWorkspace(AppendedArgument):
    """The launcher of a stream-K kernel (hopper/stream_k.py): its last parameter, after the
    kernel's arguments, is a workspace of ``meta.workspace_per_block`` bytes per block, shared by
    the stream-K kernels of the calling device and stream (``_workspace``)."""

    def __init__(self, inner: Any, meta: KernelMeta) -> None:
        super().__init__(inner, meta)
        blocks = (meta.grid_static or (1,))[0]
        if blocks > SK_FLAG_WORDS:
            raise ArgumentError(f"{meta.kernel_name}: a stream-K launch of {blocks} blocks has more blocks than its "
                                f"workspace has flags ({SK_FLAG_WORDS}); compile it with "
                                f"pass_configs={{'tlx.stream_k': False}}")
        self.bytes = SK_FLAG_BYTES + meta.workspace_per_block * blocks

    def extra(self, device: int) -> Any:
        return _workspace(device, self.get_stream(device), self.bytes)


def load(binary: CudaBinary, meta: KernelMeta, *, check_args: bool = True,
         fallback: Callable[[], Callable[..., None]] | None = None) -> Callable[..., None]:
    """A launcher ``launcher(args, dims=())`` for ``binary`` with launch metadata ``meta``.

    Nothing touches the GPU until the first call (which loads the module on the tensors' device),
    but for a clustered persistent kernel, loaded on the current device to size its grid;
    on a machine without a CUDA driver this still succeeds, and the call raises
    ``CudaNotAvailableError``. ``check_args=False`` skips the per-call checks that every tensor
    is a contiguous CUDA tensor on one device (the first tensor's device is used): for callers
    that checked already, such as ``JITKernel``'s argument binder. Kernels with TMA tensor maps
    (sm_90a) encode them per call (cached, see ``runtime_tma``); ``fallback`` builds the launcher
    they switch to for tensors TMA cannot describe.

    Every launcher also has ``dim_names`` (``meta.dims``) and ``launch_on(device, args, dims)``
    (dims as a tuple in that order), the entry of callers that checked the tensors themselves.
    """
    kernel = LoadedKernel(binary, meta)  # validates that the names agree
    try:
        driver.libcuda()
    except driver.CudaNotAvailableError:
        return _DeferredLauncher(binary, meta, check_args, fallback)
    if meta.persistent_tiles:
        meta = kernel.meta = _one_block_per_sm(kernel, meta)
    launcher = _launcher(kernel, meta, check_args, fallback)
    if meta.cooperative:
        return WithGridCounter(launcher, kernel, meta)
    return _WithWorkspace(launcher, meta) if meta.workspace_per_block else launcher


def _launcher(kernel: LoadedKernel, meta: KernelMeta, check_args: bool,
              fallback: Callable[[], Callable[..., None]] | None) -> Any:
    plan = _Plan(meta)
    # launch attributes (cooperative, PDL) need cuLaunchKernelEx: the ctypes launchers call it
    ex = LaunchEx(meta) if launch_attributes(meta) else None
    if meta.tensor_maps:
        from .runtime_tma import TmaLauncher, TmaMaps

        maps = TmaMaps(kernel, fallback)
        if ex is None and launcher_kind() == "cython":
            return _EXT.Launcher(kernel, plan, maps.helper(), check_args)
        return TmaLauncher(kernel, maps, ex)
    if ex is None and launcher_kind() == "cython":
        return _EXT.Launcher(kernel, plan, _Helper(kernel), check_args)
    return CtypesLauncher(kernel, plan, check_args, ex)
