"""Checking that an error names the line that made it: a test file marks each failing line with a
``# E:<tag>`` comment, and ``located_errors(__file__)`` gives it ``where(tag)`` (the
``file:line:`` an error must name) and ``raises(exc, tag, fn, *words)``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tilelang_x.core_ir.errors import TileLangError


def located_errors(test_file: str) -> tuple[Callable[[str], str], Callable[..., TileLangError]]:
    path = Path(test_file)
    lines = path.read_text().splitlines()

    def where(tag: str) -> str:
        hits = [n + 1 for n, text in enumerate(lines) if text.rstrip().endswith(f"# E:{tag}")]
        assert len(hits) == 1, tag
        return f"{path.name}:{hits[0]}:"

    def raises(exc: type, tag: str, fn: Callable[[], Any], *words: str) -> TileLangError:
        with pytest.raises(exc) as info:
            fn()
        text = str(info.value)
        assert where(tag) in text, text
        for w in words:
            assert w in text, (w, text)
        return info.value

    return where, raises
