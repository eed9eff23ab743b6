"""docs/language.md documents every public name of ``tilelang_x.language``, and only those.

*Public* means ``tilelang_x.language.__all__``: the names ``from tilelang_x.language import *``
binds. ``test_all_is_the_public_namespace`` pins that ``__all__`` is the whole namespace
(``dir()`` has no other name without a leading underscore). The module also serves a few names
lazily through its ``__getattr__`` without listing them (``LAZY_NAMES``); they are reachable as
``T.<name>``, so they are documented too.

The convention the test checks: an *entry* is a markdown heading of level 3 made only of
backticked, comma-separated names, e.g. ``### `T.copy` `` or ``### `T.min`, `T.max` ``. Any
heading that mentions `` `T.`` must be such an entry (so a malformed one fails instead of being
skipped), and every entry's section (up to the next heading) holds a fenced ``python`` signature
block, a ``**Backends:**`` paragraph giving ``yes``/``partial``/``no`` for each built-in backend,
and an ``**Errors:**`` paragraph. Names merely mentioned in prose or tables do not count as
documented. The names in the first column of the "What is not supported" table must really be
unsupported (``T.<name>`` raises the located not-supported error).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tilelang_x.language as T
from tilelang_x.core_ir.errors import TileLangSyntaxError
from tilelang_x.core_ir.expr import FAST_MATH

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "language.md"

#: Reachable as ``T.<name>`` through the module's ``__getattr__``, though not in ``__all__``.
LAZY_NAMES = ("Layout", "Fragment")

#: The built-in backends: the plugin folders (each has a ``plugin.py``).
BACKENDS = tuple(sorted(p.parent.name for p in (REPO / "plugins").glob("*/plugin.py")))

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
_ENTRY_NAME = re.compile(r"`T\.([A-Za-z_][A-Za-z0-9_]*)`")


def _headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """``(line index, level, text)`` of every heading outside fenced code blocks."""
    out = []
    fenced = False
    for n, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else _HEADING.match(line)
        if m:
            out.append((n, len(m.group(1)), m.group(2)))
    return out


def _entry_names(text: str) -> list[str] | None:
    """The names of an entry heading (``None`` when ``text`` is not one)."""
    items = [item.strip() for item in text.split(",")]
    names = []
    for item in items:
        m = _ENTRY_NAME.fullmatch(item)
        if m is None:
            return None
        names.append(m.group(1))
    return names


def _parse() -> tuple[dict[str, int], list[tuple[list[str], list[str]]], list[str]]:
    """(name -> number of entries documenting it, [(names, section lines)], malformed headings)."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    heads = _headings(lines)
    counts: dict[str, int] = {}
    entries: list[tuple[list[str], list[str]]] = []
    malformed: list[str] = []
    for k, (n, level, text) in enumerate(heads):
        if "`T." not in text:
            continue
        names = _entry_names(text) if level == 3 else None
        if names is None:
            malformed.append(f"line {n + 1}: {'#' * level} {text}")
            continue
        end = heads[k + 1][0] if k + 1 < len(heads) else len(lines)
        entries.append((names, lines[n + 1:end]))
        for name in names:
            counts[name] = counts.get(name, 0) + 1
    return counts, entries, malformed


def _paragraph(section: list[str], marker: str) -> str | None:
    """The paragraph of ``section`` that starts with ``marker``, joined into one line."""
    for n, line in enumerate(section):
        if line.startswith(marker):
            para = [line]
            for more in section[n + 1:]:
                if not more.strip():
                    break
                para.append(more)
            return " ".join(p.strip() for p in para)
    return None


def test_the_doc_exists_and_backends_are_known() -> None:
    assert DOC.is_file(), f"{DOC} is missing"
    assert {"interp", "cuda"} <= set(BACKENDS), BACKENDS


def test_all_is_the_public_namespace() -> None:
    assert len(T.__all__) == len(set(T.__all__)), "tilelang_x.language.__all__ lists a name twice"
    # TileLang's fast-math names (T.__exp, ...) are public despite their underscores
    public = {n for n in dir(T) if not n.startswith("_") or n in FAST_MATH}
    assert public == set(T.__all__), (
        f"public names outside __all__: {sorted(public - set(T.__all__))}; "
        f"__all__ names missing from the module: {sorted(set(T.__all__) - public)}"
    )
    for name in T.__all__:
        assert hasattr(T, name), name


def test_headings_that_name_T_follow_the_entry_convention() -> None:
    _, _, malformed = _parse()
    assert not malformed, (
        "headings that mention `T.` must be level-3 entry headings made of backticked names "
        "(### `T.name` or ### `T.a`, `T.b`): " + "; ".join(malformed)
    )


def test_every_public_name_has_an_entry() -> None:
    counts, _, _ = _parse()
    wanted = set(T.__all__) | set(LAZY_NAMES)
    missing = sorted(wanted - set(counts))
    assert not missing, f"docs/language.md has no entry (### `T.name`) for: {', '.join(missing)}"


def test_no_stale_or_duplicate_entries() -> None:
    counts, _, _ = _parse()
    stale = sorted(n for n in counts if n not in T.__all__ and n not in LAZY_NAMES)
    assert not stale, f"docs/language.md documents names tilelang_x.language does not have: {stale}"
    for name in LAZY_NAMES:
        assert hasattr(T, name), f"T.{name} is documented but no longer resolves"
    twice = sorted(n for n, c in counts.items() if c > 1)
    assert not twice, f"names with more than one entry: {twice}"


def test_every_entry_has_signature_backends_and_errors() -> None:
    _, entries, _ = _parse()
    assert entries
    problems = []
    for names, section in entries:
        label = ", ".join(f"T.{n}" for n in names)
        if not any(line.strip() == "```python" for line in section):
            problems.append(f"{label}: no ```python signature block")
        backends = _paragraph(section, "**Backends:**")
        if backends is None:
            problems.append(f"{label}: no **Backends:** line")
        else:
            for b in BACKENDS:
                if not re.search(rf"\b{re.escape(b)} (yes|partial|no)\b", backends):
                    problems.append(f"{label}: **Backends:** does not say yes/partial/no for {b}")
        if _paragraph(section, "**Errors:**") is None:
            problems.append(f"{label}: no **Errors:** line")
    assert not problems, "\n".join(problems)


def _unsupported_names() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("\n## What is not supported")
    nxt = text.find("\n## ", start + 1)
    section = text[start:nxt if nxt != -1 else len(text)]
    names = []
    for line in section.splitlines():
        if line.startswith("| `T."):
            first_cell = line.split("|")[1]
            names += _ENTRY_NAME.findall(first_cell)
    return names


def test_not_supported_table_lists_unsupported_names() -> None:
    names = _unsupported_names()
    assert len(names) >= 20, names
    for name in names:
        assert name not in T.__all__, f"T.{name} is listed as not supported but is in __all__"
        with pytest.raises(AttributeError) as info:
            getattr(T, name)
        err = info.value
        assert isinstance(err, TileLangSyntaxError), (name, err)
        assert f"T.{name} is not supported by tilelang-x" in str(err), str(err)
        assert "test_language_docs.py:" in str(err), str(err)
