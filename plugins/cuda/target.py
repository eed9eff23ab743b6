"""CUDA targets: supported architectures, capabilities as data, and cheap device detection.

Detection never imports torch or a CUDA SDK: it looks for a device node or for libcuda, and reads
the compute capability through the driver API (ctypes) only when a target needs it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

from ...core_ir.errors import UnknownTargetError
from ...target import DetectedDevice, Target, TargetInfo

#: Architectures this backend generates code for (sm_90a: the Hopper path, wgmma + TMA + warp specialization).
ARCHS: tuple[str, ...] = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")
DEFAULT_ARCH = "sm_80"

#: Capabilities per architecture: shared memory per block (opt-in limit, bytes) and features
#: (``fp8_mma``: mma.sync on float8 operands, sm_89+; ``vector_red``: red.global.add.v2/.v4.f32, sm_90+;
#: ``setmaxnreg``: register reallocation between warpgroups, sm_90a).
CAPABILITIES: dict[str, dict[str, object]] = {
    "sm_80": {"max_smem": 163 * 1024, "mma_sync": True, "cp_async": True, "wgmma": False, "tma": False,
              "fp8_mma": False, "vector_red": False, "setmaxnreg": False},
    "sm_86": {"max_smem": 99 * 1024, "mma_sync": True, "cp_async": True, "wgmma": False, "tma": False,
              "fp8_mma": False, "vector_red": False, "setmaxnreg": False},
    "sm_89": {"max_smem": 99 * 1024, "mma_sync": True, "cp_async": True, "wgmma": False, "tma": False,
              "fp8_mma": True, "vector_red": False},
    "sm_90": {"max_smem": 227 * 1024, "mma_sync": True, "cp_async": True, "wgmma": False, "tma": True,
              "fp8_mma": True, "vector_red": True, "setmaxnreg": False},
    "sm_90a": {"max_smem": 227 * 1024, "mma_sync": True, "cp_async": True, "wgmma": True, "tma": True,
               "fp8_mma": True, "vector_red": True, "setmaxnreg": True},
}


def has_capability(target: Target, feature: str) -> bool:
    """Whether ``target``'s architecture has ``feature`` (a boolean key of ``CAPABILITIES``)."""
    return bool(CAPABILITIES.get(getattr(target, "arch", None) or "", {}).get(feature))


def target_infos() -> list[TargetInfo]:
    text = "NVIDIA GPUs: CUDA C++ with inline PTX (mma.sync, ldmatrix, cp.async; sm_90a: wgmma, TMA)"
    return [TargetInfo("cuda", ARCHS, text, {a: dict(c) for a, c in CAPABILITIES.items()})]


def has_device() -> bool:
    """Cheap check for an NVIDIA GPU: a device node or a loadable driver library."""
    try:
        return os.path.exists("/dev/nvidia0") or ctypes.util.find_library("cuda") is not None
    except Exception:
        return False


@functools.lru_cache(maxsize=1)
def device_arch() -> str | None:
    """``sm_XY`` of device 0 through the driver API, or ``None`` when there is no usable GPU."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        if lib.cuInit(0) != 0:
            return None
        dev = ctypes.c_int()
        if lib.cuDeviceGet(ctypes.byref(dev), 0) != 0:
            return None
        major, minor = ctypes.c_int(), ctypes.c_int()
        lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)  # COMPUTE_CAPABILITY_MAJOR
        lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)  # COMPUTE_CAPABILITY_MINOR
        return f"sm_{major.value}{minor.value}"
    except Exception:
        return None


def pick_arch(found: str | None) -> str:
    """The architecture we compile for on a device of compute capability ``found``."""
    if found is None:
        return DEFAULT_ARCH
    if found in ARCHS:
        return "sm_90a" if found == "sm_90" else found
    digits = int(found[3:]) if found[3:].isdigit() else 80
    if digits >= 90:
        return "sm_90"  # newer parts run the sm_90 cubin only through PTX; keep the portable path
    return DEFAULT_ARCH


def detect() -> list[DetectedDevice]:
    if not has_device():
        return []
    return [DetectedDevice(Target("cuda", None), "NVIDIA GPU", priority=100)]


def resolve(name: str, arch: str | None) -> Target | None:
    if name != "cuda":
        return None
    if arch is None:
        return Target("cuda", pick_arch(device_arch()))
    if arch not in ARCHS:
        raise UnknownTargetError(f"CUDA architecture {arch!r} is not supported",
                                 hint=f"use one of: {', '.join(ARCHS)}")
    return Target("cuda", arch)
