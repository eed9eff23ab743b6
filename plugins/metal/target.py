"""Apple GPUs through Metal: the target description and a cheap, silent device detection.

Any Apple-silicon Mac (macOS on arm64) has a Metal GPU; detection asks nothing else.
"""

from __future__ import annotations

import platform
import sys

from ...core_ir.errors import BackendNotImplementedError, UnknownTargetError
from ...target import DetectedDevice, Target, TargetInfo

BACKEND = "metal"
NAMES = ("metal", "mps")
PRIORITY = 70

INFO = TargetInfo(
    BACKEND,
    (),
    "Apple-silicon GPUs (Metal Shading Language, simdgroup_matrix) - detection only, "
    "compiling is not implemented yet",
    capabilities={"device": "mps", "simd_width": 32, "compile": False, "shared_memory_bytes": 32768},
)


def present() -> bool:
    """True on macOS on Apple silicon."""
    return sys.platform == "darwin" and platform.machine() == "arm64"


def detect() -> list[DetectedDevice]:
    """The Apple GPU, when there is one; never raises."""
    try:
        found = present()
    except Exception:  # noqa: BLE001 - detection must stay silent
        return []
    return [DetectedDevice(Target(BACKEND), "Apple GPU (Metal)", PRIORITY)] if found else []


def resolve(name: str, arch: str | None) -> Target | None:
    """``metal`` (``mps`` is an alias); ``None`` for other names."""
    if name not in NAMES:
        return None
    if arch is not None:
        raise UnknownTargetError(
            f"the metal target takes no architecture (got {arch!r})", hint='use target="metal"'
        )
    return Target(BACKEND)


def status() -> list[tuple[str, bool, str]]:
    found = "Apple GPU found" if present() else "not an Apple-silicon Mac"
    return [(BACKEND, False, f"not implemented yet: the metal backend cannot compile kernels; {found}")]


def not_implemented(what: str) -> BackendNotImplementedError:
    return BackendNotImplementedError(
        f"the metal backend cannot {what} yet",
        hint='run the kernel in the interpreter with target="interp"',
    )
