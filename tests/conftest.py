"""Fixtures shared by every test suite."""

from __future__ import annotations

import shutil
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tilelang_x import cache, compiler, registry

HERE = Path(__file__).resolve().parent
FAKE_PLUGIN = HERE / "plugins" / "fake_tlx_plugin.py"


@pytest.fixture
def fresh_registry() -> Iterator[None]:
    """A registry and kernel cache that forget everything before and after the test."""
    registry.reset()
    compiler.clear_cache()
    yield
    registry.reset()
    compiler.clear_cache()


InstallDist = Callable[..., Path]


@pytest.fixture
def install_dist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_registry: None
) -> Iterator[InstallDist]:
    """Install a fake distribution on ``sys.path`` (a ``<name>-<version>.dist-info`` folder with
    ``METADATA`` and ``entry_points.txt``, plus its modules), as pip would, then reset the
    registry so the next use discovers it through ``importlib.metadata``.

    ``install_dist(name, entry_points={"ep": "module"}, modules={"module": "source"})``; a module
    source may be a ``Path`` to copy.
    """
    added: list[str] = []

    def install(
        name: str,
        entry_points: dict[str, str],
        modules: dict[str, str | Path] | None = None,
        version: str = "0.1",
    ) -> Path:
        root = tmp_path / f"site-{name}"
        root.mkdir()
        for module, source in (modules or {}).items():
            target = root / f"{module}.py"
            if isinstance(source, Path):
                shutil.copy(source, target)
            else:
                target.write_text(textwrap.dedent(source))
            added.append(module)
        info = root / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        lines = ["[tilelang_x.backends]"] + [f"{ep} = {value}" for ep, value in entry_points.items()]
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
        monkeypatch.syspath_prepend(str(root))
        registry.reset()
        return root

    yield install
    for module in added:
        sys.modules.pop(module, None)


@pytest.fixture
def fake_backend(install_dist: InstallDist) -> object:
    """The ``fakecpu`` backend of ``tests/plugins/fake_tlx_plugin.py``, installed as the
    third-party distribution ``fake-tlx-plugin``; returns the plugin module."""
    install_dist("fake-tlx-plugin", {"fake": "fake_tlx_plugin"}, {"fake_tlx_plugin": FAKE_PLUGIN})
    registry.plugin_manager()
    module = sys.modules["fake_tlx_plugin"]
    module.CALLS.clear()
    return module


@pytest.fixture(autouse=True)
def _private_kernel_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep every test's on-disk kernel and autotune cache out of the user's ~/.cache."""
    monkeypatch.setenv("TILELANG_X_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "tlx-cache"))


@pytest.fixture
def cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty on-disk cache folder for this test (not yet created), cache enabled."""
    root = tmp_path / "cache"
    monkeypatch.setenv("TILELANG_X_CACHE_DIR", str(root))
    monkeypatch.delenv("TILELANG_X_DISABLE_CACHE", raising=False)
    cache._warned.clear()
    return root
