"""Third-party plugins found through real entry points (a fake distribution on sys.path)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tilelang_x import registry
from tilelang_x.core_ir.errors import UnknownTargetError
from tilelang_x.registry import PluginWarning
from tilelang_x.target import Target

BUILTINS = ("interp", "cuda", "hip", "metal", "ascend")


def _record(name: str) -> registry.PluginRecord:
    return {r.name: r for r in registry.plugins()}[name]


def test_builtins_are_entry_points(fresh_registry: None) -> None:
    records = {r.name: r for r in registry.plugins()}
    for name in BUILTINS:
        assert name in records, f"built-in plugin {name} has no entry point"
        assert records[name].builtin
        assert records[name].module == f"tilelang_x.plugins.{name}.plugin"
    for name in ("hip", "metal", "ascend"):
        assert records[name].ok, records[name].error


def test_fake_plugin_is_discovered(fake_backend: object) -> None:
    record = _record("fake")
    assert record.ok, record.error
    assert record.dist == "fake-tlx-plugin" and record.version == "0.1"
    assert not record.builtin
    # registered after every built-in one
    names = [r.name for r in registry.plugins()]
    assert names.index("fake") > max(names.index(b) for b in BUILTINS)
    assert ("fake", "fakecpu") in [(p, info.backend) for p, info in registry.targets()]


def test_fake_target_resolves(fake_backend: object) -> None:
    assert registry.resolve_target("fakecpu") == Target("fakecpu", "v1")
    assert registry.resolve_target("fakecpu:v2") == Target("fakecpu", "v2")
    with pytest.raises(UnknownTargetError) as info:
        registry.resolve_target("nosuch")
    assert "fakecpu (v1, v2)" in str(info.value)


def test_third_party_firstresult_wins(fake_backend: object) -> None:
    # pluggy calls the plugin registered last first: the third-party one answers before hip's
    via_pluggy = registry.hook().tlx_resolve_target(name="hip", arch="gfx-fake")
    assert via_pluggy == Target("hip", "gfx-fake", (("by", "fake"),))
    assert registry.resolve_target("hip:gfx-fake").option("by") == "fake"
    # ... and falls through to the built-in for everything else
    assert registry.resolve_target("hip:gfx942") == Target("hip", "gfx942")


def test_import_error_is_reported_and_isolated(install_dist, fake_backend: object) -> None:
    install_dist("broken-tlx", {"broken": "broken_tlx_plugin"}, {"broken_tlx_plugin": "import no_such_module\n"})
    with pytest.warns(PluginWarning, match="broken"):
        records = {r.name: r for r in registry.plugins()}
    assert records["broken"].status == "failed"
    assert "ModuleNotFoundError" in records["broken"].error and "no_such_module" in records["broken"].error
    assert records["fake"].ok and records["hip"].ok
    assert registry.resolve_target("fakecpu") == Target("fakecpu", "v1")


def test_raising_hook_is_reported_and_isolated(install_dist) -> None:
    source = """
        from tilelang_x.hookspecs import hookimpl

        @hookimpl
        def tlx_detect():
            raise RuntimeError("driver exploded")

        @hookimpl
        def tlx_targets():
            return []
    """
    install_dist("explode-tlx", {"explode": "explode_tlx_plugin"}, {"explode_tlx_plugin": source})
    assert _record("explode").ok  # importing it worked
    with pytest.warns(PluginWarning, match="driver exploded"):
        devices = registry.detected_devices()
    assert all(d.target.backend != "explode" for d in devices)
    record = _record("explode")
    assert record.status == "failed"
    assert record.error == "tlx_detect raised RuntimeError: driver exploded"
    assert not registry.plugin_manager().has_plugin("explode")  # unregistered: no longer called
    with pytest.warns(Warning):
        target = registry.resolve_target("auto")
    assert target.backend == "interp"


def test_unknown_hook_is_reported(install_dist) -> None:
    source = """
        from tilelang_x.hookspecs import hookimpl

        @hookimpl
        def tlx_lower_ops(target, op, ctx):  # misspelled
            return None
    """
    install_dist("typo-tlx", {"typo": "typo_tlx_plugin"}, {"typo_tlx_plugin": source})
    with pytest.warns(PluginWarning, match="tlx_lower_ops"):
        record = _record("typo")
    assert record.status == "failed" and "tlx_lower_ops" in record.error


def test_bad_hook_signature_is_reported(install_dist) -> None:
    source = """
        from tilelang_x.hookspecs import hookimpl

        @hookimpl
        def tlx_resolve_target(name, arch, extra):
            return None
    """
    install_dist("sig-tlx", {"sig": "sig_tlx_plugin"}, {"sig_tlx_plugin": source})
    with pytest.warns(PluginWarning):
        record = _record("sig")
    assert record.status == "failed" and "invalid hookimpls" in record.error
    assert registry.resolve_target("hip") == Target("hip", "gfx942")


def test_duplicate_name_is_reported(install_dist) -> None:
    install_dist("dup-tlx", {"hip": "dup_tlx_plugin"}, {"dup_tlx_plugin": "\n"})
    with pytest.warns(PluginWarning, match="already used"):
        records = registry.plugins()
    dup = [r for r in records if r.module == "dup_tlx_plugin"]
    assert dup and dup[0].status == "failed"
    assert _record("hip").ok


def test_warned_once(install_dist) -> None:
    install_dist("broken-tlx", {"broken": "broken_tlx_plugin"}, {"broken_tlx_plugin": "raise ImportError('x')\n"})
    with pytest.warns(PluginWarning) as caught:
        registry.plugins()
        registry.plugins()
        registry.targets()
    assert len([w for w in caught if "broken" in str(w.message)]) == 1


def test_loading_plugins_imports_no_torch() -> None:
    code = (
        "import sys, warnings; warnings.simplefilter('ignore')\n"
        "from tilelang_x import registry\n"
        "registry.plugins(); registry.detected_devices(); registry.statuses(); registry.resolve_target('auto')\n"
        "heavy = [m for m in ('torch', 'numpy', 'cuda', 'torch_npu') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""
