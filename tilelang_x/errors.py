"""The errors tilelang-x raises (re-exported from ``tilelang_x.core_ir.errors``)."""

from .core_ir.errors import (
    ArgumentError,
    BackendNotImplementedError,
    CompilationError,
    LayoutError,
    OutOfBoundsError,
    ShapeMismatchError,
    TileLangError,
    TileLangSyntaxError,
    TileLangTypeError,
    UnboundConstError,
    UnknownTargetError,
    VerificationError,
)

__all__ = [
    "ArgumentError", "BackendNotImplementedError", "CompilationError", "LayoutError", "NotSupportedError",  # noqa: F822
    "OutOfBoundsError", "ShapeMismatchError", "TileLangError", "TileLangSyntaxError", "TileLangTypeError",
    "UnboundConstError", "UnknownTargetError", "VerificationError",
]


def __getattr__(name: str) -> object:
    # NotSupportedError (``T.<name>`` for a name tilelang-x does not provide) is defined by the
    # frontend; imported on first use so that this module stays free of frontend imports.
    if name == "NotSupportedError":
        from .frontend.surface import NotSupportedError

        globals()[name] = NotSupportedError
        return NotSupportedError
    raise AttributeError(f"module 'tilelang_x.errors' has no attribute {name!r}")
