"""The stage runner: applies named passes in order and can dump the IR after any of them.

A stage is ``(name, fn)`` with ``fn(func, ctx) -> func``. ``ctx`` is a ``StageContext`` shared by
all stages of one compilation (target, options, and whatever a backend stores between stages).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import TileLangError
from .stmt import PrimFunc

StageFn = Callable[[PrimFunc, "StageContext"], PrimFunc]


@dataclass
class StageContext:
    """State shared by the stages of one compilation."""

    target: Any
    options: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


def dump_path(folder: str, index: int, stage: str, func_name: str) -> str:
    return os.path.join(folder, f"{func_name}.{index:02d}.{stage}.txt")


def run_stages(
    func: PrimFunc,
    stages: Sequence[tuple[str, StageFn]],
    ctx: StageContext,
    dump: Sequence[str] = (),
    dump_dir: str | None = None,
) -> PrimFunc:
    """Run ``stages`` in order. ``dump`` names stages (or ``"all"``) whose output IR is written
    as text under ``dump_dir``; an unknown name is an error listing the known ones."""
    names = [name for name, _ in stages]
    wanted = set(dump)
    unknown = wanted - set(names) - {"all"}
    if unknown:
        raise TileLangError(
            f"unknown stage name(s) for dumping: {', '.join(sorted(unknown))}",
            hint=f"stages for target {ctx.target}: {', '.join(names)}",
        )
    if wanted and dump_dir:
        os.makedirs(dump_dir, exist_ok=True)
    for index, (name, fn) in enumerate(stages):
        start = time.perf_counter()
        func = fn(func, ctx)
        ctx.timings[name] = time.perf_counter() - start
        if dump_dir and ("all" in wanted or name in wanted):
            with open(dump_path(dump_dir, index, name, func.name), "w") as fh:
                fh.write(func.script() + "\n")
    return func
