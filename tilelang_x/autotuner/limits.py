"""Time limits on a candidate's compile and benchmark, enforced with ``SIGALRM`` where possible."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


class Timeout(BaseException):
    """Raised by the alarm; a BaseException so that no ``except Exception`` on the way swallows it."""


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Interrupt the block after ``seconds`` with ``Timeout`` where SIGALRM can do it."""
    usable = (
        seconds is not None and seconds > 0 and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    )
    if not usable:
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise Timeout()

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))  # type: ignore[arg-type]
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old if old is not None else signal.SIG_DFL)
