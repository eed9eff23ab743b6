"""``python -m tilelang_x info``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tilelang_x import __version__, registry
from tilelang_x.__main__ import main


def test_info_subprocess() -> None:
    proc = subprocess.run([sys.executable, "-m", "tilelang_x", "info"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith(f"tilelang-x {__version__}")
    for word in ("plugins (entry-point group tilelang_x.backends):", "targets:", "devices detected:", "auto -> "):
        assert word in out
    for name in ("interp", "cuda", "hip", "metal", "ascend"):
        assert f"tilelang_x.plugins.{name}.plugin" in out
    assert "not implemented yet" in out


def test_info_json(capsys: pytest.CaptureFixture[str], fresh_registry: None) -> None:
    assert main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["tilelang_x"] == __version__
    assert {p["name"] for p in data["plugins"]} >= {"interp", "cuda", "hip", "metal", "ascend"}
    hip = [s for s in data["status"] if s["target"] == "hip"][0]
    assert hip["available"] is False and "not implemented yet" in hip["reason"]
    assert data["auto"]["target"]


def test_no_subcommand_means_info(capsys: pytest.CaptureFixture[str], fresh_registry: None) -> None:
    assert main([]) == 0
    assert "auto -> " in capsys.readouterr().out


def test_info_shows_failed_plugins(install_dist, capsys: pytest.CaptureFixture[str]) -> None:
    install_dist("broken-tlx", {"broken": "broken_tlx_plugin"}, {"broken_tlx_plugin": "import no_such_module\n"})
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    line = [ln for ln in out.splitlines() if ln.strip().startswith("broken")][0]
    assert "broken-tlx 0.1" in line
    assert "FAILED: import failed: ModuleNotFoundError: No module named 'no_such_module'" in line


def test_info_auto_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                        fresh_registry: None) -> None:
    monkeypatch.setattr(registry, "detected_devices", lambda: [])
    main(["info"])
    assert "auto -> interp (no accelerator found)" in capsys.readouterr().out
