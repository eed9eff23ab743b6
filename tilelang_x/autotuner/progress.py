"""The progress bar of a tuning: tqdm's, on a terminal, when tqdm is installed; otherwise none."""

from __future__ import annotations

import sys
from typing import Any

from .. import knobs


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(total: int, desc: str) -> Any:
    """A bar with tqdm's ``update``, ``set_postfix_str`` and ``close``, for ``total`` steps."""
    if not knobs.autotune.progress or total <= 1:
        return _NoBar()
    stream = sys.stderr
    try:
        tty = stream is not None and stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not tty:
        return _NoBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, leave=False, file=stream)
