"""The autotuner's errors and warning, and the one-line reason a skipped candidate shows."""

from __future__ import annotations

from ..core_ir.errors import ArgumentError, TileLangError


class AutotuneConfigError(ArgumentError):
    """A malformed ``configs`` value, or a config key the kernel does not take."""


class AutotuneError(TileLangError):
    """No candidate compiled, ran and matched the reference."""


class AutotuneCacheWarning(UserWarning):
    """The autotune store could not be written; tuning results are not remembered."""


def one_line_reason(exc: BaseException, limit: int = 300) -> str:
    """The first line of ``exc``'s message (with its type, unless it is ours or an assertion), at most
    ``limit`` characters."""
    text = str(exc).strip()
    first = text.splitlines()[0].strip() if text else ""
    if not isinstance(exc, (TileLangError, AssertionError)):
        first = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    elif not first:
        first = type(exc).__name__
    return first if len(first) <= limit else first[: limit - 3] + "..."

