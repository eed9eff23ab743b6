"""The target-agnostic stages every compilation runs before the backend's own:

- ``specialize``: substitute the values in ``ctx.options["bind"]`` (keys: ``Var`` objects or the
  names of the function's scalar parameters and dynamic shape variables) everywhere, buffer shapes
  included. Parameters stay in place, so the call signature does not change; the bindings are
  recorded in the function's ``attrs`` (and so in its text, the cache key).
- ``simplify``: ``simplify_stmt`` over the body, knowing that tensor dimensions are >= 0.
- ``safe_access``: element accesses to global tensors that may fall outside their tensor are
  guarded (``core_ir.safe_access``; off with the pass config ``tl.disable_safe_memory_legalize``).
- ``verify``: the IR verifier.

Each is ``fn(func, ctx) -> func`` for ``core_ir.stages.run_stages``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .buffer import Buffer
from .errors import TileLangError
from .expr import Const, Expr, Var, convert, free_vars
from .safe_access import safe_access
from .simplify import simplify as simplify_expr
from .simplify_stmt import simplify_stmt
from .stages import StageContext
from .stmt import PrimFunc
from .verify import verify as verify_func
from .visit import map_fields

__all__ = ["CORE_STAGES", "bindable_vars", "simplify", "specialize", "substitute_func", "verify"]


def bindable_vars(func: PrimFunc) -> dict[str, Var]:
    """The variables ``specialize`` can bind by name: scalar parameters and the variables in
    parameter shapes and strides, in order of appearance."""
    out: dict[str, Var] = {}
    ambiguous: set[str] = set()

    def add(v: Var) -> None:
        if v.name in out and out[v.name] is not v:
            ambiguous.add(v.name)
        out.setdefault(v.name, v)

    for p in func.params:
        if isinstance(p, Var):
            add(p)
        elif isinstance(p, Buffer):
            for e in p.shape + (p.strides or ()):
                for v in sorted(free_vars(e), key=lambda v: v.name):
                    add(v)
    for name in ambiguous:
        del out[name]
    return out


def specialize(func: PrimFunc, ctx: StageContext) -> PrimFunc:
    """Substitute the bindings in ``ctx.options["bind"]``."""
    bind = ctx.options.get("bind") or {}
    if not bind:
        return func
    names = bindable_vars(func)
    mapping: dict[Var, Expr] = {}
    for key, value in bind.items():
        if isinstance(key, Var):
            var = key
        else:
            var = names.get(str(key))  # type: ignore[assignment]
            if var is None:
                raise TileLangError(
                    f"cannot bind `{key}`: kernel `{func.name}` has no scalar parameter or dynamic "
                    f"dimension of that name",
                    loc=func.loc,
                    hint=f"bindable names: {', '.join(names) or '(none)'}",
                )
        e = convert(value)
        if isinstance(e, Const) and e.dtype != var.dtype:
            e = Const(e.value, var.dtype)
        mapping[var] = e
    out = substitute_func(func, mapping)
    record = tuple(sorted((v.name, str(e)) for v, e in mapping.items()))
    return dataclasses.replace(out, attrs=tuple(out.attrs) + (("specialized", record),))


def substitute_func(func: PrimFunc, mapping: dict[Var, Expr]) -> PrimFunc:
    """``func`` with variables replaced everywhere, including inside buffer shapes and strides
    (a buffer whose shape changes is replaced by a new buffer of the same name at every use, and
    so is a view of it).
    Scalar parameters stay in the parameter list."""
    r = _Rebinder(mapping)
    # scalar parameters stay: the caller still passes them (their uses are replaced)
    params = tuple(r.buffer(p) if isinstance(p, Buffer) else p for p in func.params)
    return dataclasses.replace(func, params=params, body=r.visit(func.body))


class _Rebinder:
    def __init__(self, mapping: dict[Var, Expr]) -> None:
        self.vars = {id(v): e for v, e in mapping.items()}
        self.bufs: dict[int, Buffer] = {}

    def expr(self, e: Expr) -> Expr:
        return self.visit(e)

    def buffer(self, b: Buffer) -> Buffer:
        got = self.bufs.get(id(b))
        if got is not None:
            return got
        dims = b.shape + (b.strides or ())
        base = None if b.base is None else self.buffer(b.base)
        if any(id(v) in self.vars for e in dims for v in free_vars(e)) or base is not b.base:
            shape = tuple(simplify_expr(self.expr(s)) for s in b.shape)
            strides = None if b.strides is None else tuple(simplify_expr(self.expr(s)) for s in b.strides)
            got = Buffer(b.name, shape, b.dtype, b.scope, b.loc, strides, base)
        else:
            got = b
        self.bufs[id(b)] = got
        return got

    def visit(self, node: Any) -> Any:
        if isinstance(node, Var):
            return self.vars.get(id(node), node)
        if isinstance(node, Buffer):
            return self.buffer(node)
        if isinstance(node, tuple):
            items = tuple(self.visit(v) for v in node)
            return node if all(a is b for a, b in zip(items, node)) else items
        if dataclasses.is_dataclass(node) and not isinstance(node, type):
            return map_fields(node, self.visit)
        return node


def simplify(func: PrimFunc, ctx: StageContext) -> PrimFunc:
    """Simplify every expression of the body."""
    bounds: dict[Var, tuple[int | None, int | None]] = {}
    for p in func.buffer_params():
        for d in p.shape:
            if isinstance(d, Var):
                bounds[d] = (0, None)
    body = simplify_stmt(func.body, bounds)
    return func if body is func.body else dataclasses.replace(func, body=body)


def verify(func: PrimFunc, ctx: StageContext) -> PrimFunc:
    """Raise ``VerificationError`` if the function is ill formed."""
    verify_func(func)
    return func


CORE_STAGES = [("specialize", specialize), ("simplify", simplify), ("safe_access", safe_access), ("verify", verify)]
