"""Synchronization beyond one block: ``T.sync_grid`` (every block of the grid meets) and the
programmatic dependent launch points ``T.pdl_trigger`` / ``T.pdl_sync`` (TileLang's
``tilelang.language.pdl``), each a ``Sync`` statement of the kernel body."""

from __future__ import annotations

from ..core_ir.source import caller_loc
from ..core_ir.stmt import Sync
from . import builder as bld

__all__ = ["pdl_sync", "pdl_trigger", "sync_grid"]


def _emit(scope: str, what: str) -> None:
    b = bld.require_kernel(what)
    b.emit(Sync(scope, loc=caller_loc()))


def sync_grid() -> None:
    """``T.sync_grid()``: every thread of every block of the grid waits here until all of them
    have arrived; what any block wrote to global memory before it is visible to all after it."""
    _emit("grid", "T.sync_grid")


def pdl_trigger() -> None:
    """``T.pdl_trigger()``: lets the next kernel of the stream start before this one ends (PTX
    ``griddepcontrol.launch_dependents``); never changes results."""
    _emit("pdl_trigger", "T.pdl_trigger")


def pdl_sync() -> None:
    """``T.pdl_sync()``: waits until the previous kernel of the stream has finished and its memory
    is visible (PTX ``griddepcontrol.wait``); never changes results."""
    _emit("pdl_sync", "T.pdl_sync")
