"""``python -m tilelang_x doctor``, ``cache {info,clear}``, the ``info`` additions, knobs and logging."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tilelang_x import cache
from tilelang_x.__main__ import main

ROOT = Path(__file__).resolve().parents[2]

FAILING_BACKEND = """
    from tilelang_x.core_ir.errors import CompilationError
    from tilelang_x.hookspecs import hookimpl
    from tilelang_x.target import Target, TargetInfo

    @hookimpl
    def tlx_targets():
        return [TargetInfo("flakycpu", (), "compiles nothing", {"device": "cpu"}),
                TargetInfo("absentcpu", (), "never available", {"device": "cpu"})]

    @hookimpl
    def tlx_status():
        return [("flakycpu", True, ""), ("absentcpu", False, "the absent SDK is not installed")]

    @hookimpl
    def tlx_resolve_target(name, arch):
        return Target(name) if name in ("flakycpu", "absentcpu") else None

    @hookimpl
    def tlx_pipeline(target):
        return [] if target.backend == "flakycpu" else None

    @hookimpl
    def tlx_codegen(target, func, ctx):
        if target.backend == "flakycpu":
            raise CompilationError("flaky toolchain exploded")
        return None
"""


# ---- doctor ----------------------------------------------------------------------------------
def test_doctor_interp_passes(capsys: pytest.CaptureFixture[str], fresh_registry: None, cache_root: Path) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  interp +PASS  \(add [0-9.]+ s, gemm [0-9.]+ s\)$", out, re.M), out
    # targets that cannot run here are skipped with the plugin's reason, not failed
    assert re.search(r"^  hip +SKIP  .*not implemented yet", out, re.M), out
    assert "0 failed" in out


def test_doctor_reports_a_failing_target(install_dist, capsys: pytest.CaptureFixture[str], cache_root: Path) -> None:
    install_dist("tlx-flaky", {"flaky": "flaky_tlx_plugin"}, {"flaky_tlx_plugin": FAILING_BACKEND})
    assert main(["doctor", "--target", "interp,flakycpu", "--target", "absentcpu"]) == 1
    out = capsys.readouterr().out
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith("  ")}
    assert "PASS" in lines["interp"]
    assert "FAIL  add: CompilationError:" in lines["flakycpu"] and "flaky toolchain exploded" in lines["flakycpu"]
    assert "SKIP  the absent SDK is not installed" in lines["absentcpu"]
    assert "hip" not in lines  # only the targets asked for
    assert "1 passed, 1 failed (flakycpu), 1 skipped" in out


def test_doctor_json(install_dist, capsys: pytest.CaptureFixture[str], cache_root: Path) -> None:
    install_dist("tlx-flaky", {"flaky": "flaky_tlx_plugin"}, {"flaky_tlx_plugin": FAILING_BACKEND})
    assert main(["doctor", "--json", "--target", "interp,flakycpu"]) == 1
    results = {r["target"]: r for r in json.loads(capsys.readouterr().out)}
    assert results["interp"]["result"] == "PASS" and set(results["interp"]["seconds"]) == {"add", "gemm"}
    assert results["flakycpu"]["result"] == "FAIL" and "flaky toolchain exploded" in results["flakycpu"]["reason"]


def test_doctor_unknown_target_fails(capsys: pytest.CaptureFixture[str], fresh_registry: None) -> None:
    assert main(["doctor", "--target", "nosuch"]) == 1
    assert "FAIL  UnknownTargetError: unknown target 'nosuch'" in capsys.readouterr().out


def test_doctor_subprocess(tmp_path: Path) -> None:
    env = {**os.environ, "TILELANG_X_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "tilelang_x", "doctor", "--target", "interp"],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "interp" in proc.stdout and "PASS" in proc.stdout


# ---- cache -----------------------------------------------------------------------------------
def _fill(n: int) -> None:
    for i in range(n):
        cache.Store("cuda", suffix=".cubin").put(cache.make_key("cli", i), {"kernel.cubin": b"\x7fELF" + b"x" * 100})


def test_cache_info_and_clear(cache_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(3)
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"kernel cache: {cache_root}" in out and "TILELANG_X_CACHE_DIR" in out
    assert "3 entries" in out and re.search(r"cuda +3 entries", out)
    assert main(["cache"]) == 0  # info is the default
    assert "3 entries" in capsys.readouterr().out
    assert main(["cache", "info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["entries"] == 3 and data["dir"] == str(cache_root)
    assert main(["cache", "clear"]) == 0
    assert "removed 3 entries" in capsys.readouterr().out
    assert cache.info()["entries"] == 0


def test_cache_clear_one_namespace(cache_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(2)
    cache.put(cache.make_key("other"), {"a": b"1"})
    assert main(["cache", "clear", "--namespace", "cuda", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entries"] == 2
    assert cache.info()["entries"] == 1


def test_cache_info_not_writable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("TILELANG_X_CACHE_DIR", str(blocker / "cache"))
    assert main(["cache", "info"]) == 0
    assert "NOT WRITABLE" in capsys.readouterr().out


def test_cache_subprocess(cache_root: Path) -> None:
    _fill(1)
    env = {**os.environ, "TILELANG_X_CACHE_DIR": str(cache_root)}
    proc = subprocess.run([sys.executable, "-m", "tilelang_x", "cache", "clear"], capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 0 and "removed 1 entries" in proc.stdout, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "tilelang_x", "cache", "bogus"], capture_output=True, text=True)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


# ---- info additions --------------------------------------------------------------------------
def test_info_lists_toolchains_cache_and_knobs(capsys: pytest.CaptureFixture[str], fresh_registry: None,
                                               cache_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILELANG_X_DUMP", "input")
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    section = out.split("toolchains:\n")[1].split("\n\n")[0]
    names = [ln.split()[0] for ln in section.splitlines()]
    assert names[:3] == ["nvcc", "NVRTC", "clang-19"]
    assert f"cache: {cache_root}  0 entries" in out
    assert "knobs set: TILELANG_X_DUMP=input" in out and "TILELANG_X_CACHE_DIR=" in out
    assert main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    tools = {t["name"]: t for t in data["toolchains"]}
    assert {"nvcc", "NVRTC", "clang-19"} <= set(tools)
    for tool in tools.values():
        assert tool["found"] == bool(tool["path"])
    assert data["cache"]["dir"] == str(cache_root) and data["knobs"]["TILELANG_X_DUMP"] == "input"


# ---- knobs and logging -----------------------------------------------------------------------
def test_only_knobs_reads_tilelang_x_variables() -> None:
    pattern = re.compile(r"(environ|getenv)[^\n]*TILELANG_X_|TILELANG_X_[^\n]*(environ|getenv)")
    offenders = []
    for folder in ("tilelang_x", "frontend", "core_ir", "plugins", "contrib"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == ROOT / "tilelang_x" / "knobs.py":
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line) and not line.lstrip().startswith("#"):
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, "read TILELANG_X_* through tilelang_x.knobs:\n" + "\n".join(offenders)


def test_no_logging_handler_is_configured_at_import() -> None:
    code = (
        "import logging, warnings\n"
        "warnings.simplefilter('ignore')\n"
        "import tilelang_x, tilelang_x.language\n"
        "from tilelang_x import cache, compiler, registry, __main__\n"
        "registry.plugins()\n"
        "loggers = [l for n, l in logging.root.manager.loggerDict.items()\n"
        "           if n.startswith('tilelang_x') and isinstance(l, logging.Logger)]\n"
        "assert loggers, 'tilelang_x logs through logging.getLogger(__name__)'\n"
        "assert not logging.root.handlers, logging.root.handlers\n"
        "assert not [l.name for l in loggers if l.handlers], [l.name for l in loggers if l.handlers]\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
