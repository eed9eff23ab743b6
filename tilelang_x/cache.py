"""The on-disk cache of compiled kernels: a small store of named byte blobs per key.

A backend keeps what an expensive compile produced (a cubin, the source it came from, launch
metadata) so that the next process skips the compile::

    from tilelang_x import cache

    store = cache.Store("cuda")
    key = cache.make_key(source, arch, options, compiler_version)   # package version included
    files = store.get(key)                 # dict[str, bytes], or None on a miss
    if files is None:
        files = {"kernel.cubin": compile(...)}
        store.put(key, files, meta={"arch": arch})

Where: ``knobs.cache.dir`` (``TILELANG_X_CACHE_DIR``, default ``~/.cache/tilelang_x``); one
sub-folder per namespace (usually the backend), then ``<key[:2]>/<key><suffix>``.
``knobs.cache.disable`` (``TILELANG_X_DISABLE_CACHE=1``) turns reads and writes off.

Each entry is one file: a magic line, a little-endian ``uint32`` length, a JSON manifest (the key,
each file's name, size and sha256, and the caller's ``meta``), then the files' bytes back to
back. It is written to a temporary file in the same folder and moved into place with
``os.replace``, so a reader sees either the whole old entry, the whole new one or nothing, and two
processes writing the same key at once both succeed (the last one wins; both wrote the same
thing). An entry that fails any check (magic, manifest, sizes, checksums) is logged, removed and
reported as a miss, so the caller rebuilds it. A folder that cannot be written is warned about
once, naming the folder and the knobs; compiling goes on without the cache.

``python -m tilelang_x cache info`` and ``cache clear`` call ``info()`` and ``clear()``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import struct
import tempfile
import threading
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import __version__, knobs

__all__ = [
    "CacheWarning", "Entry", "Store", "make_key", "package_version", "cache_dir", "enabled", "get", "put",
    "info", "clear",
]

logger = logging.getLogger(__name__)

MAGIC = b"TLXCACHE1\n"
#: Bumped when the entry format or the meaning of keys changes: old entries are then ignored.
FORMAT_VERSION = 1
DEFAULT_NAMESPACE = "kernels"
#: Folder (inside a namespace) where backends keep the sources of failed compiles.
KEPT_DIR = "failed"

_KEY_RE = re.compile(r"^[0-9a-f]{16,128}$")
_NAMESPACE_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
_SUFFIX_RE = re.compile(r"^(\.[A-Za-z0-9_]{1,16})?$")
_ENTRY_RE = re.compile(r"^[0-9a-f]{16,128}(\.[A-Za-z0-9_]{1,16})?$")
_TMP_PREFIX = ".tmp-"
_TAG_NAME = "CACHEDIR.TAG"
_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by tilelang-x (compiled kernels).\n"
    "# See https://bford.info/cachedir/ ; `python -m tilelang_x cache clear` empties it.\n"
)


class CacheWarning(UserWarning):
    """The on-disk kernel cache cannot be used (a folder that cannot be written)."""


_warned: set[str] = set()
_warn_lock = threading.Lock()


def _warn_unwritable(folder: str, exc: BaseException) -> None:
    with _warn_lock:
        if folder in _warned:
            return
        _warned.add(folder)
    if os.path.exists(folder) and not os.path.isdir(folder):
        why = "it is a file, not a folder"
    else:
        why = f"{type(exc).__name__}: {exc}"
    message = (
        f"tilelang-x cannot write its kernel cache in {folder} ({why}); kernels still "
        f"compile but are not cached. Set {knobs.cache.knobs()['dir'].env} (tilelang_x.knobs.cache.dir) to a "
        f"writable folder, or {knobs.cache.knobs()['disable'].env}=1 (knobs.cache.disable = True) to turn "
        "the cache off."
    )
    logger.debug(message)
    warnings.warn(message, CacheWarning, stacklevel=3)


# ---- keys ------------------------------------------------------------------------------------
def package_version() -> str:
    """The tilelang-x version that goes into every key."""
    return __version__


def make_key(*parts: Any) -> str:
    """The sha256 (hex) of ``parts`` plus the package version and the cache format.

    ``str`` and ``bytes`` parts are hashed as they are; anything else as sorted JSON (``repr`` for
    what JSON cannot hold), so a dict of options gives the same key whatever its order.
    """
    h = hashlib.sha256()
    for part in (f"tilelang-x {package_version()}", f"format {FORMAT_VERSION}", *parts):
        if isinstance(part, bytes):
            data = part
        elif isinstance(part, str):
            data = part.encode()
        else:
            data = json.dumps(part, sort_keys=True, default=repr).encode()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


# ---- where --------------------------------------------------------------------------------------
def cache_dir() -> str:
    """The cache folder now (``knobs.cache.dir``, ``~`` expanded)."""
    return os.path.abspath(os.path.expanduser(str(knobs.cache.dir)))


def enabled() -> bool:
    """Whether the cache is on (``knobs.cache.disable`` is not set)."""
    return not knobs.cache.disable


def disable_cache() -> None:
    """``tilelang.disable_cache()``: neither read nor write the on-disk cache from now on (sets
    ``knobs.cache.disable``, which worker processes inherit)."""
    knobs.cache.disable = True


def enable_cache() -> None:
    """``tilelang.enable_cache()``: use the on-disk cache again."""
    knobs.cache.disable = False


# ---- entries ------------------------------------------------------------------------------------
@dataclass
class Entry:
    """One cache entry as read back: its files and the ``meta`` it was stored with."""

    key: str
    files: dict[str, bytes]
    meta: dict[str, Any] = field(default_factory=dict)
    path: str = ""


class CorruptEntry(ValueError):
    """An entry file that fails a check (internal: ``Store.get`` turns it into a miss)."""


def _pack(key: str, files: Mapping[str, bytes], meta: Mapping[str, Any]) -> bytes:
    listing = []
    for name, data in files.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"cache file names must be non-empty strings, got {name!r}")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"cache file {name!r} must be bytes, got {type(data).__name__}")
        listing.append({"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    manifest = json.dumps(
        {"format": FORMAT_VERSION, "key": key, "tilelang_x": package_version(), "files": listing,
         "meta": dict(meta)},
        sort_keys=True, default=repr,
    ).encode()
    return b"".join([MAGIC, struct.pack("<I", len(manifest)), manifest, *(bytes(d) for d in files.values())])


def _unpack(key: str, data: bytes) -> tuple[dict[str, bytes], dict[str, Any]]:
    if not data.startswith(MAGIC):
        raise CorruptEntry("bad magic" if data else "empty file")
    pos = len(MAGIC)
    try:
        (size,) = struct.unpack_from("<I", data, pos)
    except struct.error:
        raise CorruptEntry("truncated header") from None
    pos += 4
    if pos + size > len(data):
        raise CorruptEntry("truncated manifest")
    try:
        manifest = json.loads(data[pos:pos + size].decode())
        listing = manifest["files"]
        meta = manifest.get("meta", {})
        if manifest.get("format") != FORMAT_VERSION:
            raise CorruptEntry(f"format {manifest.get('format')!r}, expected {FORMAT_VERSION}")
        if manifest.get("key") != key:
            raise CorruptEntry("manifest names another key")
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, CorruptEntry):
            raise
        raise CorruptEntry(f"unreadable manifest ({type(exc).__name__})") from None
    pos += size
    files: dict[str, bytes] = {}
    try:
        for item in listing:
            name, n, digest = item["name"], int(item["size"]), item["sha256"]
            blob = data[pos:pos + n]
            if len(blob) != n:
                raise CorruptEntry(f"file {name!r} is truncated")
            if hashlib.sha256(blob).hexdigest() != digest:
                raise CorruptEntry(f"checksum mismatch in file {name!r}")
            files[name] = blob
            pos += n
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, CorruptEntry):
            raise
        raise CorruptEntry(f"bad file listing ({type(exc).__name__})") from None
    if pos != len(data):
        raise CorruptEntry(f"{len(data) - pos} trailing bytes")
    return files, meta if isinstance(meta, dict) else {}


class Store:
    """The entries of one namespace (a backend's name, usually) in the cache folder.

    ``root`` defaults to ``knobs.cache.dir`` read at each call, so changing the knob takes
    effect at once. ``suffix`` is the entry files' extension.
    """

    def __init__(self, namespace: str = DEFAULT_NAMESPACE, *, root: str | None = None, suffix: str = ".tlx") -> None:
        if not _NAMESPACE_RE.match(namespace):
            raise ValueError(f"bad cache namespace {namespace!r}: use lowercase letters, digits, '_', '-', '.'")
        if not _SUFFIX_RE.match(suffix):
            raise ValueError(f"bad cache entry suffix {suffix!r}")
        self.namespace = namespace
        self.suffix = suffix
        self._root = root

    @property
    def root(self) -> str:
        return os.path.abspath(os.path.expanduser(self._root)) if self._root is not None else cache_dir()

    @property
    def folder(self) -> str:
        """``<root>/<namespace>``."""
        return os.path.join(self.root, self.namespace)

    @property
    def enabled(self) -> bool:
        return enabled()

    def path(self, key: str) -> str:
        """The file of entry ``key`` (whether it exists or not)."""
        if not isinstance(key, str) or not _KEY_RE.match(key):
            raise ValueError(f"cache keys are 16-128 lowercase hex digits (see make_key), got {key!r}")
        return os.path.join(self.folder, key[:2], key + self.suffix)

    def kept_dir(self) -> str:
        """A folder for files kept for the user (e.g. the source of a failed compile); ``cache
        clear`` empties it too."""
        return os.path.join(self.folder, KEPT_DIR)

    # ---- reading -------------------------------------------------------------------------------
    def get_entry(self, key: str) -> Entry | None:
        """The entry for ``key`` with its ``meta``, or ``None`` (a miss, the cache off, or a
        damaged entry, which is removed)."""
        if not self.enabled:
            return None
        path = self.path(key)
        try:
            with open(path, "rb") as fh:
                ident = os.fstat(fh.fileno())
                data = fh.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.debug("cannot read cache entry %s: %s", path, exc)
            return None
        try:
            files, meta = _unpack(key, data)
        except CorruptEntry as exc:
            self._drop(path, ident, str(exc))
            return None
        return Entry(key, files, meta, path)

    def get(self, key: str) -> dict[str, bytes] | None:
        """The files stored under ``key``, or ``None``."""
        entry = self.get_entry(key)
        return None if entry is None else entry.files

    def invalidate(self, key: str, reason: str) -> None:
        """Remove entry ``key`` because its content proved unusable (e.g. a cubin the driver
        rejects): logged like a damaged entry."""
        path = self.path(key)
        try:
            ident = os.stat(path)
        except OSError:
            return
        self._drop(path, ident, reason)

    def _drop(self, path: str, ident: os.stat_result, reason: str) -> None:
        logger.warning("tilelang-x: damaged cache entry %s (%s): removed, the kernel is rebuilt", path, reason)
        try:
            now = os.stat(path)
            # only if no other process has replaced it with a fresh entry meanwhile
            if (now.st_ino, now.st_dev, now.st_mtime_ns) == (ident.st_ino, ident.st_dev, ident.st_mtime_ns):
                os.remove(path)
        except OSError:
            pass

    # ---- writing -------------------------------------------------------------------------------
    def put(self, key: str, files: Mapping[str, bytes], meta: Mapping[str, Any] | None = None) -> bool:
        """Store ``files`` (name -> bytes) under ``key``, atomically. Returns whether it was
        written: ``False`` when the cache is off or its folder cannot be written (warned once)."""
        if not self.enabled:
            return False
        path = self.path(key)
        data = _pack(key, files, meta or {})
        folder = os.path.dirname(path)
        tmp = None
        try:
            _ensure_root(self.root)
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=_TMP_PREFIX)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
            tmp = None
        except OSError as exc:
            _warn_unwritable(self.root, exc)
            return False
        finally:
            if tmp is not None:
                try:
                    os.remove(tmp)
                except OSError:
                    pass
        return True

    def remove(self, key: str) -> bool:
        """Delete entry ``key``; returns whether there was one."""
        try:
            os.remove(self.path(key))
            return True
        except OSError:
            return False

    def __repr__(self) -> str:
        return f"Store({self.namespace!r}, root={self.root!r})"


def _ensure_root(root: str) -> None:
    os.makedirs(root, exist_ok=True)
    tag = os.path.join(root, _TAG_NAME)
    if not os.path.exists(tag):
        try:
            with open(tag, "x") as fh:
                fh.write(_TAG)
        except FileExistsError:
            pass


# ---- the default store --------------------------------------------------------------------------
def get(key: str, namespace: str = DEFAULT_NAMESPACE) -> dict[str, bytes] | None:
    """``Store(namespace).get(key)``."""
    return Store(namespace).get(key)


def put(key: str, files: Mapping[str, bytes], namespace: str = DEFAULT_NAMESPACE,
        meta: Mapping[str, Any] | None = None) -> bool:
    """``Store(namespace).put(key, files, meta)``."""
    return Store(namespace).put(key, files, meta)


# ---- the whole folder ---------------------------------------------------------------------------
def _namespaces(root: str) -> Iterator[str]:
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return
    for name in names:
        if _NAMESPACE_RE.match(name) and os.path.isdir(os.path.join(root, name)):
            yield name


def _entry_files(folder: str) -> Iterator[tuple[str, bool]]:
    """``(path, is_temporary)`` of every file this module wrote under a namespace folder."""
    try:
        shards = sorted(os.listdir(folder))
    except OSError:
        return
    for shard in shards:
        sub = os.path.join(folder, shard)
        if len(shard) != 2 or not os.path.isdir(sub):
            continue
        try:
            names = os.listdir(sub)
        except OSError:
            continue
        for name in names:
            path = os.path.join(sub, name)
            if name.startswith(_TMP_PREFIX):
                yield path, True
            elif _ENTRY_RE.match(name) and name.startswith(shard):
                yield path, False


def _kept_files(folder: str) -> Iterator[str]:
    kept = os.path.join(folder, KEPT_DIR)
    try:
        names = os.listdir(kept)
    except OSError:
        return
    for name in names:
        path = os.path.join(kept, name)
        if os.path.isfile(path) and not os.path.islink(path):
            yield path


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _writable(root: str) -> bool:
    probe = root
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            return False
        probe = parent
    return os.path.isdir(probe) and os.access(probe, os.W_OK | os.X_OK)


def info(root: str | None = None) -> dict[str, Any]:
    """What the cache holds: its folder, whether it is on and writable, and the entries and
    bytes per namespace (plain data, JSON-ready)."""
    root = os.path.abspath(os.path.expanduser(root)) if root is not None else cache_dir()
    spaces: dict[str, dict[str, int]] = {}
    for ns in _namespaces(root):
        folder = os.path.join(root, ns)
        entries = [p for p, tmp in _entry_files(folder) if not tmp]
        kept = list(_kept_files(folder))
        if entries or kept:
            spaces[ns] = {
                "entries": len(entries),
                "bytes": sum(_size(p) for p in entries),
                "kept_files": len(kept),
            }
    return {
        "dir": root,
        "knob": f"{knobs.cache.knobs()['dir'].env} (tilelang_x.knobs.cache.dir)",
        "enabled": enabled(),
        "exists": os.path.isdir(root),
        "writable": _writable(root),
        "entries": sum(s["entries"] for s in spaces.values()),
        "bytes": sum(s["bytes"] for s in spaces.values()),
        "namespaces": spaces,
    }


def clear(root: str | None = None, namespace: str | None = None) -> dict[str, int]:
    """Delete the cache's entries (of one ``namespace``, or all), leftover temporary files and
    kept sources. Only files this module names are touched, so a cache folder pointed at the
    wrong place loses nothing else. Returns ``{"entries": n, "bytes": b, "files": m}``."""
    root = os.path.abspath(os.path.expanduser(root)) if root is not None else cache_dir()
    removed = {"entries": 0, "bytes": 0, "files": 0}
    for ns in _namespaces(root):
        if namespace is not None and ns != namespace:
            continue
        folder = os.path.join(root, ns)
        for path, tmp in list(_entry_files(folder)):
            size = _size(path)
            try:
                os.remove(path)
            except OSError:
                continue
            removed["files"] += 1
            if not tmp:
                removed["entries"] += 1
                removed["bytes"] += size
        for path in list(_kept_files(folder)):
            try:
                os.remove(path)
                removed["files"] += 1
            except OSError:
                pass
        for sub in [os.path.join(folder, d) for d in _listdir(folder)] + [folder]:
            if os.path.isdir(sub) and not os.path.islink(sub):
                try:
                    os.rmdir(sub)  # only empty folders go
                except OSError:
                    pass
    return removed


def _listdir(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []
