"""Checking that an error (or a warning) names the line that made it: a test file marks each such
line with a ``# E:<tag>`` comment, and ``located_errors(__file__)`` gives it ``where(tag)`` (the
``file:line:`` an error must name) and ``raises(exc, tag, fn, *words)``; ``located_warnings``
gives it ``warns(category, tag, fn, *patterns)``, for a warning attributed to that line."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tilelang_x.core_ir.errors import TileLangError


def _where(test_file: str) -> Callable[[str], str]:
    path = Path(test_file)
    lines = path.read_text().splitlines()

    def where(tag: str) -> str:
        hits = [n + 1 for n, text in enumerate(lines) if text.rstrip().endswith(f"# E:{tag}")]
        assert len(hits) == 1, tag
        return f"{path.name}:{hits[0]}:"

    return where


def located_errors(test_file: str) -> tuple[Callable[[str], str], Callable[..., TileLangError]]:
    where = _where(test_file)

    def raises(exc: type, tag: str, fn: Callable[[], Any], *words: str) -> TileLangError:
        with pytest.raises(exc) as info:
            fn()
        text = str(info.value)
        assert where(tag) in text, text
        for w in words:
            assert w in text, (w, text)
        return info.value

    return where, raises


def located_warnings(test_file: str) -> Callable[..., tuple[Any, str]]:
    where = _where(test_file)

    def warns(category: type[Warning], tag: str, fn: Callable[[], Any], *patterns: str) -> tuple[Any, str]:
        """``fn()``'s result and the text of its one warning of ``category``, which must be attributed
        to the line tagged ``tag`` and match each of ``patterns`` (``re.search``)."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fn()
        (w,) = [w for w in caught if issubclass(w.category, category)]
        assert Path(w.filename).resolve() == Path(test_file).resolve(), w.filename
        assert f"{Path(w.filename).name}:{w.lineno}:" == where(tag), (w.filename, w.lineno)
        text = str(w.message)
        for pattern in patterns:
            assert re.search(pattern, text), (pattern, text)
        return result, text

    return warns
