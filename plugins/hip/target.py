"""AMD GPUs through HIP: the target description and a cheap, silent device detection.

Detection reads the KFD topology under ``/sys`` (no ROCm library and no torch import): each GPU
node reports ``gfx_target_version`` as ``major*10000 + minor*100 + stepping`` (90402 is gfx942).
"""

from __future__ import annotations

import glob
import os

from ...core_ir.errors import BackendNotImplementedError, UnknownTargetError
from ...target import DetectedDevice, Target, TargetInfo

BACKEND = "hip"
NAMES = ("hip", "rocm")
ARCHS = ("gfx90a", "gfx942")
DEFAULT_ARCH = "gfx942"
PRIORITY = 90

INFO = TargetInfo(
    BACKEND,
    ARCHS,
    "AMD Instinct GPUs (HIP, MFMA) - detection only, compiling is not implemented yet",
    capabilities={"device": "cuda", "warp_size": 64, "compile": False, "shared_memory_bytes": 65536},
)

_KFD = "/dev/kfd"
_TOPOLOGY = "/sys/class/kfd/kfd/topology/nodes/*/properties"


def gfx_name(version: int) -> str:
    """``gfx_target_version`` (e.g. 90010) as an architecture name (``gfx90a``)."""
    major, minor, step = version // 10000, (version // 100) % 100, version % 100
    return f"gfx{major}{minor}{step:x}"


def gpu_archs() -> list[str]:
    """Architectures of the AMD GPUs the kernel driver exposes (one entry per GPU)."""
    if not os.path.exists(_KFD):
        return []
    archs = []
    for path in sorted(glob.glob(_TOPOLOGY)):
        try:
            with open(path) as fh:
                for line in fh:
                    key, _, value = line.partition(" ")
                    if key == "gfx_target_version" and value.strip().isdigit() and int(value) > 0:
                        archs.append(gfx_name(int(value)))
        except OSError:
            continue
    return archs


def detect() -> list[DetectedDevice]:
    """The AMD GPUs present, grouped by architecture; never raises."""
    try:
        archs = gpu_archs()
    except Exception:  # noqa: BLE001 - detection must stay silent
        return []
    devices = []
    for arch in sorted(set(archs)):
        devices.append(
            DetectedDevice(Target(BACKEND, arch), f"AMD GPU {arch}", PRIORITY, archs.count(arch))
        )
    return devices


def resolve(name: str, arch: str | None) -> Target | None:
    """``hip`` / ``hip:gfx942`` (``rocm`` is an alias); ``None`` for other names."""
    if name not in NAMES:
        return None
    if arch is None:
        found = [a for a in gpu_archs() if a in ARCHS]
        return Target(BACKEND, found[0] if found else DEFAULT_ARCH)
    if arch.lower() not in ARCHS:
        raise UnknownTargetError(
            f"unknown HIP architecture {arch!r}", hint=f"supported: {', '.join(ARCHS)}"
        )
    return Target(BACKEND, arch.lower())


def status() -> list[tuple[str, bool, str]]:
    archs = gpu_archs()
    found = f"{len(archs)} GPU(s) found ({', '.join(sorted(set(archs)))})" if archs else "no AMD GPU found"
    return [(BACKEND, False, f"not implemented yet: the hip backend cannot compile kernels; {found}")]


def not_implemented(what: str) -> BackendNotImplementedError:
    return BackendNotImplementedError(
        f"the hip backend cannot {what} yet",
        hint='run the kernel in the interpreter with target="interp", or on an NVIDIA GPU with target="cuda"',
    )
