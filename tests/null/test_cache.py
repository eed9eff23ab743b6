"""The on-disk kernel cache (``tilelang_x.cache``): keys, atomic entries, damage, knobs, info/clear."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tilelang_x import cache, knobs

FILES = {"kernel.bin": b"\x7fELF" + bytes(range(256)) * 4, "source.cu": b"extern \"C\" __global__ void k() {}\n"}


def _key(*parts: object) -> str:
    return cache.make_key("test", *parts)


# ---- keys ------------------------------------------------------------------------------------
def test_make_key_is_stable_and_covers_every_part(monkeypatch: pytest.MonkeyPatch) -> None:
    k = cache.make_key("ir text", {"fast_math": True, "arch": "sm_90a"}, "nvrtc 13.0")
    assert len(k) == 64 and k == cache.make_key("ir text", {"arch": "sm_90a", "fast_math": True}, "nvrtc 13.0")
    others = {
        cache.make_key("ir text2", {"fast_math": True, "arch": "sm_90a"}, "nvrtc 13.0"),
        cache.make_key("ir text", {"fast_math": False, "arch": "sm_90a"}, "nvrtc 13.0"),
        cache.make_key("ir text", {"fast_math": True, "arch": "sm_80"}, "nvrtc 13.0"),
        cache.make_key("ir text", {"fast_math": True, "arch": "sm_90a"}, "nvrtc 13.1"),
        cache.make_key("ir text", {"fast_math": True, "arch": "sm_90a"}, "nvrtc 13.0", "one more part"),
    }
    assert k not in others and len(others) == 5
    # parts are length-prefixed: moving text from one part to the next changes the key
    assert cache.make_key("ab", "c") != cache.make_key("a", "bc")
    # a new tilelang-x version never reuses old entries
    monkeypatch.setattr(cache, "package_version", lambda: "99.0")
    assert cache.make_key("ir text", {"fast_math": True, "arch": "sm_90a"}, "nvrtc 13.0") != k


def test_bad_keys_and_namespaces_are_rejected(cache_root: Path) -> None:
    store = cache.Store("unit")
    for key in ("", "../../etc/passwd", "ABCDEF0123456789", "abc", "z" * 64):
        with pytest.raises(ValueError, match="cache keys"):
            store.path(key)
    with pytest.raises(ValueError, match="namespace"):
        cache.Store("../up")


# ---- put / get -------------------------------------------------------------------------------
def test_roundtrip_layout_and_meta(cache_root: Path) -> None:
    store = cache.Store("unit")
    key = _key("roundtrip")
    assert store.get(key) is None
    assert store.put(key, FILES, meta={"arch": "sm_90a", "log": "ok"})
    path = Path(store.path(key))
    assert path == cache_root / "unit" / key[:2] / f"{key}.tlx" and path.is_file()
    assert store.get(key) == FILES
    entry = store.get_entry(key)
    assert entry is not None and entry.meta == {"arch": "sm_90a", "log": "ok"} and entry.path == str(path)
    assert (cache_root / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    # no temporary file is left behind
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    # the module-level helpers use the default namespace
    assert cache.put(key, {"a": b"1"}) and cache.get(key) == {"a": b"1"}
    assert (cache_root / cache.DEFAULT_NAMESPACE / key[:2] / f"{key}.tlx").is_file()


def test_put_replaces_an_entry(cache_root: Path) -> None:
    store = cache.Store("unit")
    key = _key("replace")
    store.put(key, {"a": b"old"})
    store.put(key, {"a": b"new", "b": b""})
    assert store.get(key) == {"a": b"new", "b": b""}


def test_knob_moves_the_cache(tmp_path: Path, cache_root: Path) -> None:
    key = _key("moved")
    other = tmp_path / "elsewhere"
    with knobs.scope(cache_dir=str(other)):
        assert cache.cache_dir() == str(other)
        assert cache.put(key, FILES)
    assert (other / cache.DEFAULT_NAMESPACE / key[:2]).is_dir()
    assert cache.get(key) is None  # not in the default folder
    with knobs.scope(cache_dir=str(other)):
        assert cache.get(key) == FILES


def test_disabled_cache_reads_and_writes_nothing(cache_root: Path) -> None:
    key = _key("disabled")
    cache.put(key, FILES)
    with knobs.scope(cache_disable=True):
        assert not cache.enabled()
        assert cache.get(key) is None
        assert not cache.put(_key("disabled", 2), FILES)
    assert not (cache_root / cache.DEFAULT_NAMESPACE / _key("disabled", 2)[:2]).exists()


# ---- damage ----------------------------------------------------------------------------------
DAMAGE = {
    "empty": lambda d: b"",
    "truncated": lambda d: d[: len(d) // 2],
    "truncated_header": lambda d: d[: len(cache.MAGIC) + 2],
    "bad_magic": lambda d: b"garbage" + d[7:],
    "flipped_byte": lambda d: d[:-10] + bytes([d[-10] ^ 0xFF]) + d[-9:],
    "trailing_bytes": lambda d: d + b"x",
    "bad_manifest": lambda d: d.replace(b'"files"', b'"filez"', 1),
    "not_json": lambda d: d[: len(cache.MAGIC) + 4] + b"\xff" * 10 + d[len(cache.MAGIC) + 14:],
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_entry_is_a_logged_miss_and_removed(cache_root: Path, damage: str,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    store = cache.Store("unit")
    key = _key("damage", damage)
    store.put(key, FILES)
    path = Path(store.path(key))
    path.write_bytes(DAMAGE[damage](path.read_bytes()))
    with caplog.at_level(logging.WARNING, logger="tilelang_x.cache"):
        assert store.get(key) is None
    assert "damaged cache entry" in caplog.text and str(path) in caplog.text
    assert not path.exists()
    # ... and the caller rebuilds it
    assert store.put(key, FILES) and store.get(key) == FILES


def test_entry_under_another_key_is_rejected(cache_root: Path) -> None:
    store = cache.Store("unit")
    a, b = _key("a"), _key("b")
    store.put(a, FILES)
    os.makedirs(os.path.dirname(store.path(b)), exist_ok=True)
    os.replace(store.path(a), store.path(b))
    assert store.get(b) is None


def test_invalidate(cache_root: Path) -> None:
    store = cache.Store("unit")
    key = _key("invalidate")
    store.put(key, FILES)
    store.invalidate(key, "the driver rejected it")
    assert store.get(key) is None
    store.invalidate(key, "gone already")  # no error


# ---- an unwritable folder --------------------------------------------------------------------
def test_unwritable_folder_warns_once_and_names_the_knob(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("TILELANG_X_CACHE_DIR", str(blocker))
    cache._warned.clear()
    with pytest.warns(cache.CacheWarning) as caught:
        assert not cache.put(_key("w", 1), FILES)
        assert not cache.put(_key("w", 2), FILES)
    assert len(caught) == 1
    text = str(caught[0].message)
    assert str(blocker) in text and "TILELANG_X_CACHE_DIR" in text and "TILELANG_X_DISABLE_CACHE" in text
    assert cache.get(_key("w", 1)) is None  # reading is a quiet miss
    assert cache.info()["writable"] is False


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a non-root POSIX user")
def test_read_only_folder_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ro"
    root.mkdir()
    root.chmod(0o500)
    monkeypatch.setenv("TILELANG_X_CACHE_DIR", str(root))
    cache._warned.clear()
    try:
        with pytest.warns(cache.CacheWarning, match="ro"):
            assert not cache.put(_key("ro"), FILES)
    finally:
        root.chmod(0o700)


# ---- two processes at once -------------------------------------------------------------------
WRITER = textwrap.dedent("""
    import sys
    from tilelang_x import cache
    key, n, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    store = cache.Store("race")
    blob = (tag * 50000).encode()
    bad = 0
    for i in range(n):
        store.put(key, {"blob": blob, "i": str(i).encode()})
        got = store.get(key)
        if got is None or len(got["blob"]) != len(blob):
            bad += 1
    print(bad)
""")


def test_concurrent_writers_and_readers(cache_root: Path) -> None:
    key = _key("race")
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, key, "150", tag], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "TILELANG_X_CACHE_DIR": str(cache_root)})
        for tag in "ab"
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert [int(o) for o in outs] == [0, 0]  # a reader never saw a partial entry
    files = cache.Store("race").get(key)
    assert files is not None and set(files["blob"]) <= {ord("a"), ord("b")} and len(set(files["blob"])) == 1
    leftovers = [n for n in os.listdir(cache_root / "race" / key[:2]) if n != f"{key}.tlx"]
    assert leftovers == []


# ---- info / clear ----------------------------------------------------------------------------
def test_info_and_clear(cache_root: Path) -> None:
    assert cache.info()["entries"] == 0 and cache.info()["exists"] is False
    a, b = cache.Store("alpha"), cache.Store("beta", suffix=".cubin")
    for i in range(3):
        a.put(_key("a", i), FILES)
    b.put(_key("b"), {"x": b"12345"})
    os.makedirs(b.kept_dir())
    Path(b.kept_dir(), "failed_kernel.cu").write_text("// kept")
    data = cache.info()
    assert data["dir"] == str(cache_root) and data["enabled"] and data["writable"] and data["exists"]
    assert data["entries"] == 4
    assert data["namespaces"]["alpha"]["entries"] == 3 and data["namespaces"]["beta"]["kept_files"] == 1
    assert data["bytes"] == sum(os.path.getsize(p) for p in cache_root.rglob("*.tlx")) + os.path.getsize(
        b.path(_key("b")))
    json.dumps(data)

    removed = cache.clear(namespace="beta")
    assert removed["entries"] == 1 and removed["files"] == 2
    assert not (cache_root / "beta").exists()
    assert cache.info()["entries"] == 3
    removed = cache.clear()
    assert removed["entries"] == 3 and removed["bytes"] > 0
    assert cache.info()["entries"] == 0 and a.get(_key("a", 0)) is None


def test_clear_touches_only_cache_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the cache knob pointed at a folder that holds other things by mistake
    root = tmp_path / "home"
    (root / "ab").mkdir(parents=True)
    (root / "notes.txt").write_text("keep me")
    (root / "project" / "ab").mkdir(parents=True)
    (root / "project" / "ab" / "readme.md").write_text("keep me too")
    (root / "project" / "src.py").write_text("keep")
    monkeypatch.setenv("TILELANG_X_CACHE_DIR", str(root))
    key = _key("mixed")
    cache.Store("project").put(key, FILES)
    assert cache.clear()["entries"] == 1
    assert (root / "notes.txt").exists() and (root / "project" / "ab" / "readme.md").exists()
    assert (root / "project" / "src.py").exists()
    assert not Path(cache.Store("project").path(key)).exists()


def test_clear_removes_stale_temporary_files(cache_root: Path) -> None:
    store = cache.Store("unit")
    key = _key("tmp")
    store.put(key, FILES)
    stale = Path(store.path(key)).parent / ".tmp-abc123"
    stale.write_bytes(b"half written")
    assert cache.info()["entries"] == 1
    removed = cache.clear()
    assert removed == {"entries": 1, "bytes": removed["bytes"], "files": 2}
    assert not stale.exists()


def test_disable_and_enable_cache_as_tilelang_spells_them(cache_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tilelang_x

    monkeypatch.setenv("TILELANG_X_DISABLE_CACHE", "")  # restored after the test, whatever it sets
    key = cache.make_key("disable", "enable")
    tilelang_x.disable_cache()
    assert not cache.enabled() and knobs.cache.disable
    cache.put(key, {"a.bin": b"x"})
    assert cache.get(key) is None  # nothing written or read while off
    tilelang_x.enable_cache()
    assert cache.enabled()
    cache.put(key, {"a.bin": b"x"})
    assert cache.get(key) == {"a.bin": b"x"}
