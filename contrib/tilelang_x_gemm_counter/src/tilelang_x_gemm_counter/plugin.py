"""Hook implementations of the ``gemm_counter`` plugin (entry point group ``tilelang_x.backends``).

One hook: ``tlx_lower_op``, a *firstresult* hook. tilelang-x registers third-party plugins after
its built-in ones, and pluggy asks the latest first, so this answer wins over the interpreter's
own (which is also marked ``trylast``). Returning ``None`` (any other op, any other target) lets
the built-in lowering answer. Nothing heavy is imported when the plugin loads.
"""

from __future__ import annotations

from typing import Any

from tilelang_x.hookspecs import hookimpl


@hookimpl
def tlx_lower_op(target: Any, op: Any, ctx: Any) -> Any:
    if target.backend != "interp":
        return None
    from tilelang_x.core_ir.tileops import Gemm

    if not isinstance(op, Gemm):
        return None
    # Delegate to the interpreter's own executor for the semantics; only count around it.
    from tilelang_x.plugins.interp.lower import default_executor

    from . import wrap

    inner = default_executor(op, ctx)
    return None if inner is None else wrap(inner)
