"""The errors tilelang-x raises (re-exported from ``tilelang_x.core_ir.errors``)."""

from .core_ir.errors import (
    ArgumentError,
    BackendNotImplementedError,
    CompilationError,
    DeviceAssertError,
    LayoutError,
    NotSupportedError,
    OutOfBoundsError,
    PerformanceWarning,
    ShapeMismatchError,
    TileLangError,
    TileLangSyntaxError,
    TileLangTypeError,
    UnboundConstError,
    UnknownTargetError,
    VerificationError,
)

__all__ = [
    "ArgumentError", "BackendNotImplementedError", "CompilationError", "DeviceAssertError", "LayoutError",
    "NotSupportedError",
    "OutOfBoundsError", "PerformanceWarning", "ShapeMismatchError", "TileLangError", "TileLangSyntaxError",
    "TileLangTypeError", "UnboundConstError", "UnknownTargetError", "VerificationError",
]

