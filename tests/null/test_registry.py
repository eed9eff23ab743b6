"""Target resolution and the built-in skeleton plugins (no accelerator needed)."""

from __future__ import annotations

import warnings

import pytest

from tilelang_x import compiler, knobs, registry
from tilelang_x.core_ir import Buffer, PrimFunc, Seq, SourceLoc, dtypes
from tilelang_x.core_ir.errors import BackendNotImplementedError, UnknownTargetError
from tilelang_x.plugins.hip import target as hip_target
from tilelang_x.registry import InterpreterFallbackWarning
from tilelang_x.target import DetectedDevice, Target

pytestmark = pytest.mark.usefixtures("fresh_registry")


@pytest.fixture
def no_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "detected_devices", lambda: [])


def test_auto_falls_back_to_interpreter_once(no_devices: None) -> None:
    with pytest.warns(InterpreterFallbackWarning, match="no accelerator found; using the interpreter"):
        assert registry.resolve_target("auto").backend == "interp"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert registry.resolve_target("auto").backend == "interp"  # said once only
        assert registry.resolve_target(" AUTO ").backend == "interp"


def test_none_reads_the_target_knob(no_devices: None) -> None:
    with knobs.scope(target_default="hip:gfx90a"):
        assert registry.resolve_target(None) == Target("hip", "gfx90a")
    with knobs.scope(target_default="auto"), pytest.warns(InterpreterFallbackWarning):
        assert registry.resolve_target(None).backend == "interp"


def test_target_objects_pass_through() -> None:
    t = Target("cuda", "sm_90a")
    assert registry.resolve_target(t) is t


def test_unknown_target_lists_the_available_ones() -> None:
    with pytest.raises(UnknownTargetError) as info:
        registry.resolve_target("tpu")
    text = str(info.value)
    assert "unknown target 'tpu'" in text
    for name in ("auto", "hip (gfx90a, gfx942)", "metal", "ascend (dav-3510, 950)"):
        assert name in text
    with pytest.raises(UnknownTargetError):
        registry.resolve_target(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("hip:gfx90a", Target("hip", "gfx90a")),
        ("hip:GFX942", Target("hip", "gfx942")),
        ("rocm:gfx942", Target("hip", "gfx942")),
        ("metal", Target("metal")),
        ("ascend", Target("ascend", "dav-3510")),
        ("ascend:950", Target("ascend", "dav-3510")),
        ("ascend:dav-3510", Target("ascend", "dav-3510")),
    ],
)
def test_skeleton_targets_resolve(spec: str, expected: Target) -> None:
    assert registry.resolve_target(spec) == expected


@pytest.mark.parametrize("spec", ["hip:gfx1200", "metal:m9", "ascend:910"])
def test_skeleton_targets_reject_unknown_archs(spec: str) -> None:
    with pytest.raises(UnknownTargetError, match="supported|no architecture"):
        registry.resolve_target(spec)


@pytest.mark.parametrize("backend", ["hip", "metal", "ascend"])
def test_skeleton_backends_say_not_implemented(backend: str) -> None:
    statuses = {(name, ok) for _, name, ok, _ in registry.statuses()}
    assert (backend, False) in statuses
    reason = [r for _, name, _, r in registry.statuses() if name == backend][0]
    assert "not implemented yet" in reason
    a = Buffer("A", (4,), dtypes.float32)
    func = PrimFunc("k", (a,), Seq(()), loc=SourceLoc("user.py", 3, "k"))
    with pytest.raises(BackendNotImplementedError) as info:
        compiler.compile_prim_func(func, target=backend)
    assert f"the {backend} backend cannot compile kernels yet" in str(info.value)
    assert "user.py:3" in str(info.value)
    assert info.value.hint


def test_auto_skips_devices_that_cannot_build(monkeypatch: pytest.MonkeyPatch) -> None:
    device = DetectedDevice(Target("hip", "gfx942"), "AMD GPU gfx942", 90)
    monkeypatch.setattr(registry, "detected_devices", lambda: [device])
    target, why = registry.auto_choice()
    assert target.backend == "interp"
    assert "AMD GPU gfx942" in why and "not implemented yet" in why


def test_auto_picks_the_highest_priority_usable_device(
    fake_backend: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    devices = [
        DetectedDevice(Target("fakecpu", "v2"), "fake 2", 50),
        DetectedDevice(Target("hip", "gfx942"), "AMD GPU", 90),  # unusable: skipped
        DetectedDevice(Target("fakecpu", "v1"), "fake 1", 10),
    ]
    monkeypatch.setattr(registry, "detected_devices", lambda: devices)
    with warnings.catch_warnings():
        warnings.simplefilter("error", InterpreterFallbackWarning)
        assert registry.resolve_target("auto") == Target("fakecpu", "v2")


def test_detection_is_cached(fresh_registry: None) -> None:
    first = registry.detected_devices()
    assert registry._state.devices is not None
    assert registry.detected_devices() == first


def test_gfx_names() -> None:
    assert hip_target.gfx_name(90402) == "gfx942"
    assert hip_target.gfx_name(90010) == "gfx90a"
    assert hip_target.gfx_name(110000) == "gfx1100"


def test_describe_is_plain_data(no_devices: None) -> None:
    import json

    data = registry.describe()
    json.dumps(data)
    assert {p["name"] for p in data["plugins"]} >= {"interp", "cuda", "hip", "metal", "ascend"}
    assert data["auto"]["target"] == "interp"


def test_auto_fills_in_the_architecture_a_detected_device_left_open(monkeypatch: pytest.MonkeyPatch) -> None:
    # The CUDA plugin detects "a GPU" cheaply and reads its architecture only when asked: `auto`
    # (and a Target without arch) must ask, or an H200 would get an sm_80 build it cannot load.
    from tilelang_x.plugins.cuda import target as cuda_target

    monkeypatch.setattr(registry, "auto_choice", lambda: (Target("cuda", None), "an NVIDIA GPU"))
    monkeypatch.setattr(cuda_target, "device_arch", lambda: "sm_90")
    assert registry.resolve_target("auto") == Target("cuda", "sm_90a")
    assert registry.resolve_target(Target("cuda")) == Target("cuda", "sm_90a")
