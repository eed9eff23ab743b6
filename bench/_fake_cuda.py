"""A no-op CUDA driver for timing the launch path on a machine without a GPU.

``launch_overhead.py --fake-driver`` builds a tiny C library whose ``cuLaunchKernel`` only reads
its arguments, binds the compiled launcher to it and times our host work per call above that floor on
CPU tensors: the launcher alone, and the kernel
objects of ``tests/kernels/elementwise`` through the same generated check-and-launch path a GPU
run takes (``is_cpu`` standing in for ``is_cuda``). torch's stream getter is replaced by ``abs``
(a C builtin), so on a GPU add torch's ``_cuda_getCurrentRawStream`` (about 0.1 us) and the
driver's own launch.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile
from collections.abc import Callable
from typing import Any

FAKE_CU = r"""
typedef int CUresult;
volatile unsigned long long tlx_sink;
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, void* stream, void** params, void** extra) {
  tlx_sink = (unsigned long long)f + gx + gy + gz + bx + by + bz + smem + (unsigned long long)stream
             + (params ? *(unsigned long long*)params[0] : 0);
  return 0;
}
CUresult cuCtxGetCurrent(void** out) { *out = (void*)0x2000; return 0; }
CUresult cuCtxPushCurrent_v2(void* c) { return 0; }
CUresult cuCtxPopCurrent_v2(void** c) { *c = 0; return 0; }
"""
FN, CTX = 0x1000, 0x2000
_ENTRIES = ("cuLaunchKernel", "cuCtxGetCurrent", "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2")


def fake_library() -> ctypes.CDLL:
    """The no-op driver, compiled with the system C compiler."""
    tmp = tempfile.mkdtemp(prefix="tlx_fakecu_")
    src, lib = os.path.join(tmp, "fakecu.c"), os.path.join(tmp, "libfakecu.so")
    with open(src, "w") as f:
        f.write(FAKE_CU)
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", "-o", lib, src], check=True)
    cdll = ctypes.CDLL(lib)
    from tilelang_x.plugins.cuda import driver

    for name in _ENTRIES:
        fn = getattr(cdll, name)
        fn.argtypes = list(driver._PROTOTYPES[name])
        fn.restype = ctypes.c_int
    return cdll


class FakeKernel:
    """Stands in for ``runtime.LoadedKernel``: every device resolves to one fake function."""

    def __init__(self, meta: Any) -> None:
        self.meta = meta

    def resolve(self, device: int) -> tuple[int, int]:
        return FN, CTX


def compiled_launchers(cdll: ctypes.CDLL) -> Callable[..., Any]:
    """``make(meta, check_args=True)``: compiled launchers bound to the fake driver that let CPU
    tensors through their device check (raises ImportError when the extension is not built)."""
    from tilelang_x.plugins.cuda import _launcher as ext
    from tilelang_x.plugins.cuda import runtime

    ext.bind_driver(*(ctypes.cast(getattr(cdll, n), ctypes.c_void_p).value for n in _ENTRIES))
    ext._accept_host_tensors(True)

    def make(meta: Any, check_args: bool = True) -> Any:
        kernel = FakeKernel(meta)
        helper = runtime._Helper(kernel)
        helper.get_stream = abs
        helper.default_device = lambda: 0
        return ext.Launcher(kernel, runtime._Plan(meta), helper, check_args)

    return make


def on_cpu(kernel: Any, launcher: Any) -> None:
    """Point JITKernel ``kernel`` (compiled for CUDA) at ``launcher`` and give it the CUDA fused
    call path with ``is_cpu`` in place of ``is_cuda``."""
    from tilelang_x.args import ArgBinder
    from tilelang_x.args_fast import _Generator

    kernel.launcher = launcher
    cuda_binder = kernel._binder
    kernel._binder = ArgBinder(kernel.lowered_func, kernel.out_idx, "cpu", "fake")  # bind() on CPU tensors
    fused = _Generator(cuda_binder, launcher, kernel._checked_call, device_flag="is_cpu").build()
    assert fused is not None and "launch(dv" in fused.source, "no fused launch_on path"
    kernel._call = fused
