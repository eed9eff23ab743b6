"""The epochs of ``T.alloc_reducer`` buffers while a kernel is traced.

A reducer is *fresh* until an epoch opens (``T.fill`` / ``T.clear``, or ``T.reducer_init``), *open*
until ``T.finalize_reducer``, then holds the *result* (an epoch opened by ``T.fill`` / ``T.clear``,
TileLang's first reducer) or is *dead* (one opened by ``T.reducer_init``: the result went to the
``dst`` of ``T.finalize_reducer``). While it is open the reducer is only updated, never read: a
``T.Parallel`` iteration cannot see the other iterations' contributions. ``Epochs.check`` rejects
every other use of a reducer that is not readable, at the line that makes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core_ir.buffer import Buffer, Region
from ..core_ir.errors import TileLangSyntaxError
from ..core_ir.expr import Element
from ..core_ir.source import SourceLoc
from ..core_ir.stmt import Print, Stmt
from ..core_ir.tileops import FinalizeReducer, ReducerInit, ReducerUpdate, TileOp
from ..core_ir.visit import children

_REDUCER_OPS = (ReducerInit, ReducerUpdate, FinalizeReducer)

#: how each kind of reducer is updated in TileLang's first spelling
UPDATE_SPELLING = {
    "sum": "r[i] += v", "max": "r[i] = T.max(r[i], v)", "min": "r[i] = T.min(r[i], v)",
    "bitand": "r[i] &= v", "bitor": "r[i] |= v", "bitxor": "r[i] ^= v",
}


@dataclass
class Reducer:
    """One ``T.alloc_reducer`` buffer: its combine ``kind``, its state, and while an epoch is open
    the frames (ids) around the statement that opened it and whether it was ``T.reducer_init``."""

    buffer: Buffer
    kind: str
    state: str = "fresh"
    frames: tuple[int, ...] = ()
    v2: bool = False


class Epochs:
    """The reducers of one trace, by buffer."""

    def __init__(self) -> None:
        self.reducers: dict[int, Reducer] = {}
        self.checked: set[int] = set()

    def add(self, buffer: Buffer, kind: str) -> None:
        self.reducers[id(buffer)] = Reducer(buffer, kind)

    def get(self, buffer: Buffer) -> Reducer | None:
        return self.reducers.get(id(buffer.storage)) if self.reducers else None

    def watched(self) -> dict[int, Reducer]:
        """The reducers that cannot be read or written by ordinary statements now."""
        return {k: r for k, r in self.reducers.items() if r.state != "result"}

    def open(self, r: Reducer, frames: tuple[int, ...], v2: bool) -> None:
        r.state, r.frames, r.v2 = "open", frames, v2

    def check(self, stmt: Stmt) -> None:
        """Raise when ``stmt`` reads or writes a reducer that is not readable, other than through
        the reducer's own operations. The statements of a loop or branch body were checked when
        they were emitted into it, in the state of that moment, so they are not looked at again."""
        if not self.reducers:
            return
        watched = self.watched()
        if watched:
            self._check(stmt, watched)
        self.checked.add(id(stmt))

    def _check(self, stmt: Stmt, watched: dict[int, Reducer]) -> None:
        stack: list[Any] = [stmt]
        while stack:
            n = stack.pop()
            if n is not stmt and isinstance(n, Stmt) and id(n) in self.checked:
                continue
            stack.extend(children(n))
            if isinstance(n, Element) and id(n.buffer.storage) in watched:
                _misuse(watched[id(n.buffer.storage)], "reads", getattr(n, "loc", None) or stmt.loc)
            elif isinstance(n, TileOp) and not isinstance(n, _REDUCER_OPS):
                for region in n.regions():
                    if id(region.buffer.storage) in watched:
                        _misuse(watched[id(region.buffer.storage)], f"T.{n.name} uses", n.loc or stmt.loc)
            elif isinstance(n, Print):
                target = n.value.buffer if isinstance(n.value, Region) else n.value
                if isinstance(target, Buffer) and id(target.storage) in watched:
                    _misuse(watched[id(target.storage)], "T.print reads", n.loc)


def _misuse(r: Reducer, what: str, loc: SourceLoc | None) -> None:
    name = r.buffer.name
    if r.state == "open":
        raise TileLangSyntaxError(
            f"{what} reducer `{name}` while its reduction is open: its value is only known after "
            f"T.finalize_reducer", loc=loc,
            hint=f"update it with {UPDATE_SPELLING[r.kind].replace('r[', name + '[')} or "
            f"T.reducer_update({name}[i], v) inside T.Parallel, and read it after T.finalize_reducer({name})")
    if r.state == "dead":
        raise TileLangSyntaxError(
            f"{what} reducer `{name}` after T.finalize_reducer({name}, dst): its result is in `dst`", loc=loc,
            hint="read the destination of T.finalize_reducer, or open a new reduction with T.reducer_init")
    raise TileLangSyntaxError(
        f"{what} reducer `{name}` before its reduction is opened", loc=loc,
        hint=f"start it with T.fill({name}, init) / T.clear({name}) or T.reducer_init({name})")
