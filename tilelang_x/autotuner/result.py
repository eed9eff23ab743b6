"""What a tuning found: every candidate with its time or why it was skipped, and the winner."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Candidate:
    """One configuration tried. ``status``: ``ok``, ``compile_error``, ``run_error``, ``mismatch``,
    ``timeout`` (``pending`` before it is tried). ``latency`` in ms, ``compile_time`` in s;
    ``in_worker``: the compile time was measured in a worker process."""

    index: int
    config: dict[str, Any]
    status: str = "pending"
    latency: float | None = None
    compile_time: float | None = None
    reason: str | None = None
    in_worker: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class AutotuneResult:
    """What a tuning found (TileLang's ``AutotuneResult`` fields first).

    ``candidates`` lists every configuration with its time or the reason it was skipped;
    ``from_cache`` says the answer came from the disk store (nothing was benchmarked: the times
    are the remembered ones); ``tuned`` is False when the caller passed the tunable parameters.
    """

    latency: float | None = None
    config: dict[str, Any] | None = None
    ref_latency: float | None = None
    libcode: str | None = None
    func: Any = None
    kernel: Any = None
    candidates: list[Candidate] = field(default_factory=list)
    from_cache: bool = False
    tuned: bool = True
    key: str | None = None
    cache_path: str | None = None
    target: str | None = None
    kernel_name: str = ""
    best_index: int | None = None
    elapsed: float = 0.0
    benchmarked: int = 0

    @property
    def failed(self) -> list[Candidate]:
        """The candidates that were skipped, with their reasons."""
        return [c for c in self.candidates if c.status not in ("ok", "pending")]

    def table(self) -> str:
        """A readable summary: one line per candidate, the winner marked ``*``."""
        n_ok = sum(c.ok for c in self.candidates)
        head = f"autotune {self.kernel_name or '?'} ({self.target}): {len(self.candidates)} candidates, {n_ok} ok"
        if self.latency is not None:
            head += f"; best {self.latency:.4g} ms {self.config}"
        if self.ref_latency is not None:
            head += f"; reference {self.ref_latency:.4g} ms"
        if self.from_cache:
            head += f" [from cache {self.cache_path}]"
        lines = [head, f"  {'#':>3}  {'status':<13} {'ms':>10} {'compile s':>10}  config / reason"]
        best = self.best_index
        for c in self.candidates:
            ms = f"{c.latency:.4g}" if c.latency is not None else "-"
            cs = f"{c.compile_time:.3f}" if c.compile_time is not None else "-"
            mark = "*" if c.index == best else " "
            text = f"{c.config}" + (f": {c.reason}" if c.reason else "")
            lines.append(f" {mark}{c.index:>3}  {c.status:<13} {ms:>10} {cs:>10}  {text}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

