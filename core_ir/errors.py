"""The TileLangError hierarchy: every user mistake surfaces as one of these.

A message names the kernel's source location (``file:line``) when one is known and, where
possible, what to change (the ``hint``).
"""

from __future__ import annotations

import warnings
from typing import Any

from .source import SourceLoc


class TileLangError(Exception):
    """Base of every error tilelang-x raises for a user mistake or an unsupported request."""

    def __init__(self, message: str, loc: SourceLoc | None = None, hint: str | None = None) -> None:
        self.message = message
        self.loc = loc
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        text = f"{self.loc}: {self.message}" if self.loc is not None else self.message
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text

    def with_loc(self, loc: SourceLoc | None) -> TileLangError:
        """Attach ``loc`` when the error does not carry a location yet."""
        if self.loc is None and loc is not None:
            self.loc = loc
            self.args = (self._render(),)
        return self

    def __str__(self) -> str:
        return self._render()


class TileLangSyntaxError(TileLangError):
    """A construct the frontend does not accept (unsupported Python or T.* usage)."""


class NotSupportedError(TileLangSyntaxError, AttributeError):
    """``T.<name>`` for a name tilelang-x does not provide (also an ``AttributeError``, so
    ``hasattr(T, name)`` stays false)."""


class TileLangTypeError(TileLangError):
    """A dtype problem: unknown dtype, or operands whose dtypes cannot be combined."""


class ShapeMismatchError(TileLangError):
    """Operand shapes of a tile op (copy, gemm, reduce, ...) do not agree."""


class ArgumentError(TileLangError):
    """A kernel was called with the wrong number, dtype, shape or device of arguments."""


class UnboundConstError(TileLangError):
    """A ``T.const`` name was never bound to a tensor dimension or a keyword argument."""


class OutOfBoundsError(TileLangError):
    """An index falls outside a buffer."""


class SpinWaitError(TileLangError):
    """The interpreter found a ``while`` loop on ``T.atomic_load`` that can never end: it runs the
    blocks one after another, so no other block can change what the loop waits for."""


class DeadlockError(TileLangError):
    """The interpreter found every warpgroup of a block waiting (at a ``T.barrier_wait`` or for the
    others at a statement they run together), so none can go on: on a GPU the kernel would hang."""


class DeviceAssertError(TileLangError):
    """A ``T.device_assert`` condition was false while the kernel ran (interpreter)."""


class UnknownTargetError(TileLangError):
    """A target string that no installed plugin provides."""


class BackendNotImplementedError(TileLangError):
    """The chosen backend cannot compile this kernel (yet)."""


class LayoutError(TileLangError):
    """Layout inference met a conflict it cannot resolve, or a layout annotation is invalid."""


class CompilationError(TileLangError):
    """The device toolchain failed on generated code, or is missing."""


class VerificationError(TileLangError):
    """The IR verifier found an ill-formed function."""


class RaceError(TileLangError):
    """The interpreter found two blocks of one launch accessing the same element of a global tensor
    with no grid barrier between, at least one of them storing it (not atomically): on a GPU the
    blocks run concurrently and the result depends on their order."""


#: the registry ``warn_at``'s warnings are filtered through (one per kernel line and message)
_WARNED: dict[Any, Any] = {}


class PerformanceWarning(UserWarning):
    """A kernel compiles and computes the right result, but a construct in it keeps the backend off
    its fast path (say, a T.gemm the tensor cores cannot take); warned at the kernel's line."""


def warn_at(loc: SourceLoc | None, message: str, hint: str | None = None) -> None:
    """A ``PerformanceWarning`` attributed to ``loc`` (the user's kernel line) when it is known, so
    that Python's warning filters show it once per line."""
    text = message + (f"\n  hint: {hint}" if hint else "")
    if loc is None:
        warnings.warn(text, PerformanceWarning, stacklevel=3)
    else:
        warnings.warn_explicit(text, PerformanceWarning, loc.file, loc.line, registry=_WARNED)
