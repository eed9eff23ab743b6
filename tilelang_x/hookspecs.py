"""The plugin contract: every backend, built-in or third-party, implements these hooks.

Plugins are found through the entry-point group ``tilelang_x.backends``; each entry point names a
module (or object) holding ``@hookimpl`` functions. Loading a plugin must be cheap and import no
vendor SDK: heavy imports happen inside the hooks that compile or run a kernel.

A kernel's way through the hooks: ``tlx_pipeline`` gives the backend's ordered stages (layout
inference, tile-op lowering via ``tlx_lower_op``, pipelining, ...), ``tlx_codegen`` turns the final
IR into source text, ``tlx_compile`` turns that into a binary, ``tlx_load`` makes a launcher and
``tlx_profiler`` times it. Hooks marked *firstresult* stop at the first plugin that returns
something other than ``None``, so a plugin registered later (a third-party one) overrides a
built-in one by answering first, e.g. ``tlx_lower_op`` for one tile op on one target.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from .core_ir.stmt import PrimFunc, Stmt
    from .target import DetectedDevice, Target, TargetInfo

PROJECT = "tilelang_x"
ENTRY_POINT_GROUP = "tilelang_x.backends"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def tlx_targets() -> list[TargetInfo]:
    """The target kinds this plugin provides (name, architectures, capabilities as data).

    Called for ``python -m tilelang_x info`` and to resolve target strings.
    """


@hookspec
def tlx_detect() -> list[DetectedDevice]:
    """Devices of this plugin's kind present on this machine, each with a priority.

    Must be cheap, silent and never raise: ``target="auto"`` calls it on every plugin and picks
    the device with the highest priority.
    """


@hookspec
def tlx_status() -> list[tuple[str, bool, str]]:
    """``(target name, available, reason)`` per target: whether kernels can be built and run here,
    and if not, why (missing toolchain, no device, not implemented yet)."""


@hookspec(firstresult=True)
def tlx_resolve_target(name: str, arch: str | None) -> Target | None:
    """Turn a parsed target string (``"cuda"``, ``"cuda:sm_90a"``) into a ``Target``.

    Return ``None`` when ``name`` is not this plugin's; raise ``UnknownTargetError`` for an
    architecture this plugin does not support.
    """


@hookspec(firstresult=True)
def tlx_pipeline(target: Target) -> list[tuple[str, Any]] | None:
    """The ordered, named stages ``(name, fn(func, ctx) -> func)`` that lower a verified tile-level
    ``PrimFunc`` for ``target``. The stage runner dumps the IR after any of them on request."""


@hookspec(firstresult=True)
def tlx_infer_layout(target: Target, op: Stmt, ctx: Any) -> Any:
    """Layout constraints ``op`` imposes on its buffers for ``target`` (``None``: no opinion)."""


@hookspec(firstresult=True)
def tlx_lower_op(target: Target, op: Stmt, ctx: Any) -> Any:
    """The lowered form of tile op ``op`` on ``target`` (what that is, is the backend's business:
    statements for a code generator, an executable for the interpreter). ``None``: not handled."""


@hookspec(firstresult=True)
def tlx_codegen(target: Target, func: PrimFunc, ctx: Any) -> str | None:
    """Source text for the lowered ``func`` (what ``kernel.get_kernel_source()`` returns)."""


@hookspec(firstresult=True)
def tlx_compile(target: Target, func: PrimFunc, source: str, ctx: Any) -> Any:
    """Compile ``source`` to a binary (or an executable object) for ``target``.

    Raise ``CompilationError`` with the toolchain's message on failure."""


@hookspec(firstresult=True)
def tlx_load(target: Target, func: PrimFunc, binary: Any, ctx: Any) -> Any:
    """A launcher for the compiled kernel: ``launcher(args, dims)`` runs it on the current stream
    of the framework, where ``args`` holds one value per parameter of ``func`` (tensors and
    scalars) and ``dims`` binds the dynamic shape variables."""


@hookspec(firstresult=True)
def tlx_profiler(target: Target) -> Any:
    """A timer for ``target``: ``timer(fn, warmup, rep) -> list of milliseconds`` (events, L2
    flush between repetitions, warmup)."""
