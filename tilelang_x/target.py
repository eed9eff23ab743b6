"""Targets: what a kernel is compiled for. Plugins describe and detect them (see hookspecs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Target:
    """A compilation target: a backend name (``cuda``, ``interp``...) and an architecture."""

    backend: str
    arch: str | None = None
    options: tuple[tuple[str, Any], ...] = ()

    def __str__(self) -> str:
        return self.backend if self.arch is None else f"{self.backend}:{self.arch}"

    def option(self, key: str, default: Any = None) -> Any:
        return dict(self.options).get(key, default)


@dataclass(frozen=True)
class TargetInfo:
    """A target kind a plugin provides, with its capabilities as data."""

    backend: str
    archs: tuple[str, ...] = ()
    description: str = ""
    capabilities: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class DetectedDevice:
    """A device found on this machine; ``auto`` picks the one with the highest priority."""

    target: Target
    name: str
    priority: int = 0
    count: int = 1
