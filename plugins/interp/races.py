"""Finding data races between the blocks of one kernel launch on global memory.

The interpreter runs a launch's blocks one after another, so a kernel whose blocks race passes
here and gives garbage on a GPU. ``RaceTracker`` remembers, per element of every global tensor the
kernel writes, which blocks stored it, read it and updated it with an atomic since the launch
began (or since the last ``T.sync_grid()``, which orders everything before it against everything
after it), and raises ``RaceError`` at the first access that conflicts with another block's:

- a plain store to an element another block stores, reads or updates atomically;
- a plain read of an element another block stores or updates atomically;
- an atomic update of an element another block stores or reads plainly.

Atomics never conflict with each other. A store that leaves the element's value unchanged, bit
for bit, conflicts with nothing: whichever block runs first, every block sees and leaves the same
value (several blocks storing one value is benign). Reads are checked against stores whatever the
values, since the value before a store is not remembered.

Each record is an integer per element, ``block << 12 | site`` (``site``: an index into the list
of the accesses' source locations, the 4095th and later unnamed), ``-1`` for none, in ``int32``
for grids of fewer than 2^19 blocks; two slots per kind: the first block and the first other
block, which is all a conflict check needs (the second made only once some element needs it).
Tensors the kernel never writes are not tracked (nothing can race on them), so reading inputs
costs nothing. In a kernel with cluster barriers the accesses are told apart by cluster: the
order the barriers give the blocks of one cluster is not checked, that between clusters is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tilelang_x.core_ir.buffer import Buffer
from tilelang_x.core_ir.errors import RaceError
from tilelang_x.core_ir.source import SourceLoc

__all__ = ["RACE_CHECK_KEY", "RaceTracker"]

#: The pass config that turns the check on or off for one kernel (else ``knobs.interp.race_check``).
RACE_CHECK_KEY = "tlx.interp_race_check"

_SITE_BITS = 12
_NO_SITE = (1 << _SITE_BITS) - 1
#: Grids of fewer blocks keep their records in ``int32``.
_INT32_BLOCKS = 1 << (31 - _SITE_BITS)
_STORE, _READ, _ATOMIC = "store", "read", "atomic"


def _at(a: np.ndarray, shape: tuple[int, ...] | None) -> np.ndarray:
    """Records ``a`` (flat) as ``_where``'s index addresses them: flat, or shaped like the tensor."""
    return a if shape is None else a.reshape(shape)


class _Marks:
    """One kind of access to one tensor: per element, the first block's record and the first
    record of another block (``-1``: none)."""

    __slots__ = ("first", "_other")

    def __init__(self, size: int, dtype: type) -> None:
        self.first = np.full(size, -1, dtype=dtype)
        self._other: np.ndarray | None = None  # made when a second block makes this access somewhere

    @property
    def other(self) -> np.ndarray:
        if self._other is None:
            self._other = np.full_like(self.first, -1)
        return self._other

    def clear(self) -> None:
        self.first.fill(-1)
        self._other = None

    def conflict(self, shape: tuple[int, ...] | None, ix: Any, block: int) -> tuple[Any, Any] | None:
        """Per accessed element, whether a block other than ``block`` made this kind of access, and
        that block's record; ``None`` when there is no such element."""
        if type(ix) is int:  # one element: plain ints are faster than numpy scalars
            f = int(self.first[ix])
            if f < 0:
                return None
            if f >> _SITE_BITS != block:
                return True, f
            o = -1 if self._other is None else int(self._other[ix])
            return (True, o) if o >= 0 else None
        first = _at(self.first, shape)[ix]
        seen = first >= 0
        if not seen.any():
            return None
        mine = seen & ((first >> _SITE_BITS) == block)
        hit = seen & ~mine
        rec = first
        if self._other is not None and mine.any():  # the other slot holds another block's record, if any
            other = _at(self.other, shape)[ix]
            hit = hit | (mine & (other >= 0))
            rec = np.where(mine, other, first)
        return (hit, rec) if hit.any() else None

    def add(self, shape: tuple[int, ...] | None, ix: Any, block: int, rec: int) -> None:
        if type(ix) is int:
            f = int(self.first[ix])
            if f < 0:
                self.first[ix] = rec
            elif f >> _SITE_BITS != block and self.other[ix] < 0:
                self.other[ix] = rec
            return
        first_v = _at(self.first, shape)
        first = first_v[ix]
        empty = first < 0
        if empty.all():
            first_v[ix] = rec
            return
        first_v[ix] = np.where(empty, rec, first)
        new_other = ~empty & ((first >> _SITE_BITS) != block)
        if new_other.any():
            other_v = _at(self.other, shape)
            other = other_v[ix]
            other_v[ix] = np.where(new_other & (other < 0), rec, other)


class _Tensor:
    """The records of one global tensor (views of the same memory and element size share them)."""

    def __init__(self, size: int, dtype: type) -> None:
        self.size = size
        self.dtype = dtype
        self.kinds: dict[str, _Marks] = {}

    def marks(self, kind: str) -> _Marks:
        m = self.kinds.get(kind)
        if m is None:
            m = self.kinds[kind] = _Marks(self.size, self.dtype)
        return m

    def clear(self) -> None:
        for m in self.kinds.values():
            m.clear()


class RaceTracker:
    """The accesses of one launch to the global tensors ``tracked`` (ids of their storage
    buffers); see the module docstring. ``kernel`` names the kernel in messages."""

    def __init__(self, kernel: str, tracked: set[int]) -> None:
        self.kernel = kernel
        self.tracked = tracked
        self.dims: tuple[int, ...] = ()
        self.unit = "block"
        self.tensors: dict[tuple[int, int], _Tensor] = {}
        self.sites: list[SourceLoc | None] = []
        self._site_of: dict[Any, int] = {}

    # ---- the launch ----------------------------------------------------------------------------
    def launch(self, dims: Sequence[int], unit: str = "block") -> None:
        """A grid of ``dims`` blocks starts: forget every earlier access. ``unit`` ``"cluster"``: the
        accesses are told apart by cluster (``dims``: the grid of clusters), not by block."""
        self.dims = tuple(dims)
        self.unit = unit
        self.tensors.clear()

    def barrier(self) -> None:
        """Every block passed a ``T.sync_grid()``: accesses before it race with none after it."""
        for t in self.tensors.values():
            t.clear()

    def tracks(self, buf: Buffer) -> bool:
        return buf.scope == "global" and id(buf.storage) in self.tracked

    # ---- accesses ----------------------------------------------------------------------------
    def store(self, buf: Buffer, arr: np.ndarray, ix: Any, values: Any, block: int, loc: SourceLoc | None) -> None:
        """Block ``block`` stores ``values`` (broadcastable to ``arr[ix]``) into ``arr[ix]``; call
        before the store. ``ix``: a tuple of slices, or of indices (numbers or index arrays)."""
        t = self._tensor(buf, arr)
        shape, at = _where(arr.shape, ix)
        changed = None
        for kind in (_STORE, _READ, _ATOMIC):
            m = t.kinds.get(kind)
            found = None if m is None else m.conflict(shape, at, block)
            if found is None:
                continue
            if changed is None:
                changed = _changes(arr, ix, values)
            hit = found[0] & changed
            if np.any(hit):
                self._report(_STORE, kind, buf, arr.shape, shape, at, hit, found[1], block, loc)
        t.marks(_STORE).add(shape, at, block, self._record(block, loc))

    def read(self, buf: Buffer, arr: np.ndarray, ix: Any, block: int, loc: SourceLoc | None) -> None:
        """Block ``block`` reads ``arr[ix]``."""
        self._access(_READ, (_STORE, _ATOMIC), buf, arr, ix, block, loc)

    def atomic(self, buf: Buffer, arr: np.ndarray, ix: Any, block: int, loc: SourceLoc | None) -> None:
        """Block ``block`` updates ``arr[ix]`` with an atomic."""
        self._access(_ATOMIC, (_STORE, _READ), buf, arr, ix, block, loc)

    # ---- helpers -------------------------------------------------------------------------------
    def _access(self, now: str, against: tuple[str, ...], buf: Buffer, arr: np.ndarray, ix: Any, block: int,
                loc: SourceLoc | None) -> None:
        t = self._tensor(buf, arr)
        shape, at = _where(arr.shape, ix)
        for kind in against:
            m = t.kinds.get(kind)
            found = None if m is None else m.conflict(shape, at, block)
            if found is not None:
                self._report(now, kind, buf, arr.shape, shape, at, found[0], found[1], block, loc)
        t.marks(now).add(shape, at, block, self._record(block, loc))

    def _tensor(self, buf: Buffer, arr: np.ndarray) -> _Tensor:
        key = (id(buf.storage), arr.dtype.itemsize)
        t = self.tensors.get(key)
        if t is None:
            small = math.prod(self.dims) < _INT32_BLOCKS
            t = self.tensors[key] = _Tensor(arr.size, np.int32 if small else np.int64)
        return t

    def _record(self, block: int, loc: SourceLoc | None) -> int:
        key = (loc.file, loc.line) if loc is not None else None
        site = self._site_of.get(key)
        if site is None:
            site = len(self.sites) if len(self.sites) < _NO_SITE else _NO_SITE
            if site < _NO_SITE:
                self.sites.append(loc)
            self._site_of[key] = site
        return (block << _SITE_BITS) | site

    def _block(self, block: int) -> tuple[int, ...]:
        if not self.dims:
            return (block,)
        return tuple(int(i) for i in np.unravel_index(block, self.dims[::-1])[::-1])

    def _report(self, now: str, earlier: str, buf: Buffer, full: tuple[int, ...], shape: tuple[int, ...] | None,
                at: Any, hit: Any, rec: Any, block: int, loc: SourceLoc | None) -> None:
        hit = np.asarray(hit)
        pos = np.unravel_index(int(np.argmax(hit)), hit.shape) if hit.ndim else ()
        flat = at if shape is None else np.arange(math.prod(shape)).reshape(shape)[at]
        flat = int(np.broadcast_to(flat, hit.shape)[pos])
        index = ", ".join(str(int(i)) for i in np.unravel_index(flat, full))
        other = int(np.broadcast_to(rec, hit.shape)[pos])
        site = other & _NO_SITE
        other_loc = self.sites[site] if site < len(self.sites) else None
        raise RaceError(_message(self.kernel, now, earlier, f"`{buf.name}`[{index}]", self._block(block),
                                 self._block(other >> _SITE_BITS), other_loc, self.unit),
                        loc=loc, hint=_HINTS[(now, earlier)])


def _where(full: tuple[int, ...], ix: tuple) -> tuple[tuple[int, ...] | None, Any]:
    """How the records are indexed for ``arr[ix]`` (``arr`` of shape ``full``): slices index them
    shaped like the tensor (``(full, ix)``); numbers and index arrays (already in bounds) become
    flat indices (``(None, flat)``), so each gather is one ``take``; an ``int`` for one element."""
    if any(type(i) is slice for i in ix):
        return full, ix
    if not any(type(i) is np.ndarray and i.ndim for i in ix):
        flat = 0
        for i, n in zip(ix, full):
            flat = flat * n + int(i)
        return None, flat
    return None, np.ravel_multi_index(ix, full)


def _changes(arr: np.ndarray, ix: Any, values: Any) -> Any:
    """Per element of ``arr[ix]``: whether storing ``values`` changes its bits."""
    old = np.array(arr[ix])
    new = np.array(np.broadcast_to(np.asarray(values, dtype=arr.dtype), old.shape))
    if old.dtype.kind == "f":  # bits: -0.0 differs from 0.0, a NaN equals itself
        bits = np.dtype(f"u{old.dtype.itemsize}")
        return old.view(bits) != new.view(bits)
    return old != new


_VERB = {_STORE: "stores to", _READ: "reads", _ATOMIC: "atomically updates"}
_ALSO = {_STORE: "also stores to", _READ: "reads", _ATOMIC: "atomically updates"}

_HINTS = {
    (_STORE, _STORE): "each element must be stored by one block: guard the store with the bound of the rows "
    "(columns) this block owns (e.g. `if row < seq_end`), or combine the blocks' values with T.atomic_add",
    (_STORE, _READ): "a block must not store what another block reads in the same launch: split the kernel "
    "into two launches, or put T.sync_grid() between the read and the store",
    (_STORE, _ATOMIC): "update an element either with atomics in every block or with plain stores from one "
    "block: use T.atomic_add / T.atomic_store here too",
    (_READ, _STORE): "a block may read only what no other block writes in the same launch: split the kernel "
    "into two launches, or put T.sync_grid() between the other block's write and this read",
    (_READ, _ATOMIC): "a block must not read what other blocks update in the same launch: read it in a "
    "second launch, or after a T.sync_grid()",
    (_ATOMIC, _STORE): "update an element either with atomics in every block or with plain stores from one "
    "block: make the other block's access an atomic too",
    (_ATOMIC, _READ): "a block must not read what other blocks update in the same launch: read it in a "
    "second launch, or after a T.sync_grid()",
}


def _fmt(block: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(b) for b in block) + ")"


def _message(kernel: str, now: str, earlier: str, elem: str, block: tuple[int, ...], other: tuple[int, ...],
             other_loc: SourceLoc | None, unit: str = "block") -> str:
    where = f" (at {other_loc})" if other_loc is not None else ""
    verb = (_ALSO if now == earlier else _VERB)[earlier]
    return (f"`{kernel}`: data race between {unit}s: {unit} {_fmt(block)} {_VERB[now]} {elem}, which {unit} "
            f"{_fmt(other)} {verb}{where} in the same launch with no T.sync_grid() between; on a GPU the {unit}s "
            "run concurrently, so the result depends on their order")
