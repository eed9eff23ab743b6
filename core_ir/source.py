"""Source locations carried by IR nodes, so that errors can name the kernel's file:line."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SourceLoc:
    """A position in the user's kernel source."""

    file: str
    line: int
    func: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_INTERNAL_DIRS = tuple(
    os.path.join(_PACKAGE_ROOT, d) + os.sep
    for d in ("tilelang_x", "frontend", "core_ir", "plugins", "contrib")
)


def _is_internal(filename: str) -> bool:
    return filename.startswith(_INTERNAL_DIRS) or filename.startswith("<frozen ")


def caller_loc(skip: int = 1) -> SourceLoc | None:
    """The innermost stack frame outside tilelang-x: the user's line that called into us."""
    frame = sys._getframe(skip)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _is_internal(filename):
            return SourceLoc(filename, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    return None
