"""The on-disk store of tunings: one JSON record per key under ``<cache dir>/autotune``, written
after a tuning and read back instead of one."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from .. import knobs
from .errors import AutotuneCacheWarning
from .key import FORMAT, canon
from .result import AutotuneResult, Candidate

logger = logging.getLogger(__name__)


class Store:
    """One JSON file per tuning under ``<cache dir>/autotune``; atomic writes, bad files ignored."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def load(self, key: str) -> dict[str, Any] | None:
        path = self.path(key)
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:  # an unusable folder; save() warns about it
            logger.debug("cannot read autotune record %s: %s", path, exc)
            return None
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != key:
            logger.warning("ignoring corrupt autotune record %s; tuning again", path)
            return None
        return data

    def save(self, key: str, data: dict[str, Any]) -> bool:
        path = self.path(key)
        tmp = None
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=self.root)
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh, indent=1, default=str)
            os.replace(tmp, path)
            return True
        except OSError as exc:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            warnings.warn(
                f"cannot write the autotune cache under {self.root}: {exc}; the tuning result is not remembered "
                "(set TILELANG_X_CACHE_DIR to a writable folder, or TILELANG_X_AUTOTUNE_DISABLE_CACHE=1)",
                AutotuneCacheWarning, stacklevel=_user_stacklevel(),
            )
            return False


def _user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning point at the user's line, for the caller of this."""
    from ..core_ir.source import _is_internal

    level, frame = 1, sys._getframe(1)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        level += 1
        frame = frame.f_back
    return level


def open_store() -> Store | None:
    """The store, or None when the disk cache or the autotune store is turned off."""
    if knobs.cache.disable or knobs.autotune.disable_cache:
        return None
    return Store(Path(knobs.cache.dir) / "autotune")


def make_record(key: str, result: AutotuneResult, kernel_name: str) -> dict[str, Any]:
    """The JSON record of a finished tuning."""
    best = result.best_index
    return {
        "format": FORMAT, "key": key, "kernel": kernel_name,
        "target": result.target, "created": time.time(), "best_index": best,
        "best_config": canon(result.config), "latency": result.latency, "ref_latency": result.ref_latency,
        "candidates": [
            {"index": c.index, "config": repr(c.config), "status": c.status, "latency": c.latency,
             "compile_time": c.compile_time, "reason": c.reason}
            for c in result.candidates
        ],
    }


def recorded_winner(record: dict[str, Any], configs: list[dict[str, Any]]) -> int | None:
    """The index in ``configs`` of the record's winner, or None when the record does not fit them."""
    best = record.get("best_index")
    if not isinstance(best, int) or not 0 <= best < len(configs) or \
            json.loads(json.dumps(canon(configs[best]))) != record.get("best_config"):
        return None
    return best


def restore(record: dict[str, Any], configs: list[dict[str, Any]], best: int, result: AutotuneResult) -> None:
    """Fill ``result`` from the record: every candidate with its remembered status and times, the
    winner ``best`` ok, ``from_cache`` set."""
    cands = [Candidate(i, c) for i, c in enumerate(configs)]
    stored = record.get("candidates")
    for row in stored if isinstance(stored, list) else ():
        if not isinstance(row, dict) or not isinstance(row.get("index"), int) or \
                not 0 <= row["index"] < len(cands):
            continue
        cand = cands[row["index"]]
        cand.status = str(row.get("status", "pending"))
        for attr in ("latency", "compile_time"):
            value = row.get(attr)
            setattr(cand, attr, float(value) if isinstance(value, (int, float)) else None)
        cand.reason = row.get("reason") if isinstance(row.get("reason"), str) else None
    cands[best].status = "ok"
    result.candidates = cands
    result.from_cache = True
    ref = record.get("ref_latency")
    result.ref_latency = float(ref) if isinstance(ref, (int, float)) else None
    lat = record.get("latency")
    cands[best].latency = float(lat) if isinstance(lat, (int, float)) else cands[best].latency
