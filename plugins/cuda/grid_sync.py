"""CUDA code of ``T.sync_grid``, ``T.pdl_trigger`` and ``T.pdl_sync`` (``include/tlx_grid.h``).

``T.sync_grid()`` calls ``tlx_grid_sync(tlx_grid_bar)``: a barrier on a counter word that the
runtime appends as the kernel's last argument (one per device and stream,
``runtime_ex.GridCounters``); the kernel is launched cooperatively (``KernelMeta.cooperative``), so
that every block is resident at once. ``T.pdl_trigger()`` / ``T.pdl_sync()`` are PTX
``griddepcontrol.launch_dependents`` / ``griddepcontrol.wait`` on sm_90 and later and nothing
before; a kernel with ``T.pdl_sync()`` compiled for sm_90+ is launched with programmatic stream
serialization (``KernelMeta.pdl``), so that it may start while the previous kernel of the stream
finishes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from ...core_ir import dtypes
from ...core_ir import expr as E
from ...core_ir.stmt import Stmt, Sync
from ...core_ir.visit import walk_stmts
from .lir import Evaluate, Intrin

__all__ = ["COUNTER", "grid_header", "is_cooperative", "lower_sync", "uses_grid_header", "waits_for_previous"]

#: The counter parameter of a kernel with ``T.sync_grid()`` (codegen declares it ``unsigned int*``).
COUNTER = E.Var("tlx_grid_bar", dtypes.int64)

_CALLS = {"grid": "tlx_grid_sync", "pdl_trigger": "tlx_pdl_trigger", "pdl_sync": "tlx_pdl_sync"}


def lower_sync(s: Sync) -> Stmt:
    """The call of a grid or PDL ``Sync``."""
    args = (COUNTER,) if s.scope == "grid" else ()
    return Evaluate(Intrin(_CALLS[s.scope], args), s.loc)


def _called(body: Stmt) -> Iterator[str]:
    """The intrinsics ``body`` calls as statements (as ``lower_sync`` emits them)."""
    return (n.value.fn for n in walk_stmts(body) if isinstance(n, Evaluate) and isinstance(n.value, Intrin))


def _calls(body: Stmt, fn: str) -> bool:
    return any(name == fn for name in _called(body))


def is_cooperative(body: Stmt) -> bool:
    """Whether the lowered kernel ``body`` has a grid barrier."""
    return _calls(body, _CALLS["grid"])


def waits_for_previous(body: Stmt, arch: str) -> bool:
    """Whether the lowered kernel ``body`` waits for the previous kernel (``T.pdl_sync()``) on an
    ``arch`` with programmatic dependent launch."""
    return int("".join(ch for ch in arch[3:] if ch.isdigit()) or 0) >= 90 and _calls(body, _CALLS["pdl_sync"])


def uses_grid_header(body: Stmt) -> bool:
    return any(name in _CALLS.values() for name in _called(body))


def grid_header() -> str:
    with open(os.path.join(os.path.dirname(__file__), "include", "tlx_grid.h")) as fh:
        return fh.read()
