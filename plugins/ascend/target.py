"""Huawei Ascend NPUs: the target description and a cheap, silent device detection.

Detection looks for the driver's ``/dev/davinci<N>`` device files, or for an installed
``torch_npu`` (found with ``importlib.util.find_spec``, never imported here).
"""

from __future__ import annotations

import glob
import importlib.util

from ...core_ir.errors import BackendNotImplementedError, UnknownTargetError
from ...target import DetectedDevice, Target, TargetInfo

BACKEND = "ascend"
NAMES = ("ascend", "npu")
#: Ascend 950 is the dav-3510 architecture (Cube + Vector cores).
ARCH_ALIASES = {"dav-3510": "dav-3510", "950": "dav-3510", "ascend950": "dav-3510"}
ARCHS = ("dav-3510", "950")
DEFAULT_ARCH = "dav-3510"
PRIORITY = 80

INFO = TargetInfo(
    BACKEND,
    ARCHS,
    "Huawei Ascend 950 NPUs (Ascend C, Cube/Vector) - detection only, compiling is not implemented yet",
    capabilities={"device": "npu", "compile": False},
)


def device_files() -> list[str]:
    return sorted(glob.glob("/dev/davinci[0-9]*"))


def has_torch_npu() -> bool:
    try:
        return importlib.util.find_spec("torch_npu") is not None
    except (ImportError, ValueError):
        return False


def detect() -> list[DetectedDevice]:
    """The NPUs present (device files, or torch_npu installed); never raises."""
    try:
        files = device_files()
        if files:
            return [DetectedDevice(Target(BACKEND, DEFAULT_ARCH), "Ascend NPU", PRIORITY, len(files))]
        if has_torch_npu():
            return [DetectedDevice(Target(BACKEND, DEFAULT_ARCH), "Ascend NPU (torch_npu installed)", PRIORITY)]
    except Exception:  # noqa: BLE001 - detection must stay silent
        pass
    return []


def resolve(name: str, arch: str | None) -> Target | None:
    """``ascend`` / ``ascend:950`` / ``ascend:dav-3510`` (``npu`` is an alias); ``None`` for
    other names."""
    if name not in NAMES:
        return None
    if arch is None:
        return Target(BACKEND, DEFAULT_ARCH)
    canonical = ARCH_ALIASES.get(arch.lower())
    if canonical is None:
        raise UnknownTargetError(
            f"unknown Ascend architecture {arch!r}", hint=f"supported: {', '.join(ARCHS)}"
        )
    return Target(BACKEND, canonical)


def status() -> list[tuple[str, bool, str]]:
    files = device_files()
    found = f"{len(files)} NPU device file(s)" if files else "no /dev/davinci* device"
    return [(BACKEND, False, f"not implemented yet: the ascend backend cannot compile kernels; {found}")]


def not_implemented(what: str) -> BackendNotImplementedError:
    return BackendNotImplementedError(
        f"the ascend backend cannot {what} yet",
        hint='run the kernel in the interpreter with target="interp"',
    )
