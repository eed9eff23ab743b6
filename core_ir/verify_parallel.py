"""``T.Parallel`` iterations that depend on each other.

The iterations of a ``T.Parallel`` nest run at once, spread over the threads, so one may not read
or write an element another writes: ``for i in T.Parallel(63): f[i + 1] = f[i] + 1.0`` reads
``f[i]`` that iteration ``i - 1`` writes, which on a GPU races (the interpreter's order gives one
of the possible answers). This check finds the plain cases: two accesses to one buffer, at least
one a store, indexed in every dimension by the same loop variable of the nest (plus constants)
and differing in a constant, outside any ``if`` and ``T.if_then_else``.
"""

from __future__ import annotations

from typing import Any

from .buffer import Buffer
from .errors import VerificationError
from .expr import BinOp, Const, Expr, Load, Select, Var, as_int
from .source import SourceLoc
from .stmt import For, If, PrimFunc, Store, While
from .visit import children

#: an access's index as (loop variable id, constant offset) per dimension
Pattern = tuple[tuple[int, int], ...]


def verify_parallel(func: PrimFunc) -> None:
    """Raise ``VerificationError`` for the first ``T.Parallel`` nest whose iterations depend on
    each other (see the module docstring)."""
    _find_nests(func.body, func.loc)


def _find_nests(node: Any, loc: SourceLoc | None) -> None:
    loc = getattr(node, "loc", None) or loc
    if isinstance(node, For) and node.kind == "parallel":
        _check_nest(node, loc)
        return
    for child in children(node):
        _find_nests(child, loc)


def _check_nest(nest: For, loc: SourceLoc | None) -> None:
    loop_vars: set[int] = set()
    body: Any = nest
    while isinstance(body, For) and body.kind == "parallel":
        loop_vars.add(id(body.var))
        body = body.body
    accesses: list[tuple[Buffer, Pattern, bool, SourceLoc | None]] = []
    _collect(body, loop_vars, accesses, loc)
    for k, (buf, pattern, is_store, where) in enumerate(accesses):
        for other, other_pattern, other_store, _ in accesses[:k]:
            if buf is other and (is_store or other_store) and _conflict(pattern, other_pattern):
                raise VerificationError(
                    f"the T.Parallel iterations depend on each other: `{buf.name}` is "
                    f"{'written' if is_store else 'read'} at {_text(pattern, nest)} and "
                    f"{'written' if other_store else 'read'} at {_text(other_pattern, nest)}, which another "
                    "iteration reaches", loc=where,
                    hint="iterations of T.Parallel run at once: read from one buffer and write another, or use "
                    "T.serial for a loop whose steps build on each other")


def _collect(node: Any, loop_vars: set[int], out: list[tuple[Buffer, Pattern, bool, SourceLoc | None]],
             loc: SourceLoc | None) -> None:
    loc = getattr(node, "loc", None) or loc
    if isinstance(node, (If, While, Select)):
        return
    if isinstance(node, (Store, Load)):
        pattern = _pattern(node.indices, loop_vars)
        if pattern is not None:
            out.append((node.buffer, pattern, isinstance(node, Store), loc))
    for child in children(node):
        _collect(child, loop_vars, out, loc)


def _pattern(indices: tuple[Expr, ...], loop_vars: set[int]) -> Pattern | None:
    out = []
    for index in indices:
        term = _offset(index)
        if term is None or term[0] not in loop_vars:
            return None
        out.append(term)
    return tuple(out)


def _offset(index: Expr) -> tuple[int, int] | None:
    if isinstance(index, Var):
        return id(index), 0
    if isinstance(index, BinOp) and index.op in ("+", "-") and isinstance(index.a, Var) and isinstance(index.b, Const):
        c = as_int(index.b)
        return None if c is None else (id(index.a), c if index.op == "+" else -c)
    return None


def _conflict(a: Pattern, b: Pattern) -> bool:
    return len(a) == len(b) and all(x[0] == y[0] for x, y in zip(a, b)) and a != b


def _text(pattern: Pattern, nest: For) -> str:
    names: dict[int, str] = {}
    body: Any = nest
    while isinstance(body, For):
        names[id(body.var)] = body.var.name
        body = body.body
    terms = [names.get(v, "?") + (f" + {c}" if c > 0 else f" - {-c}" if c < 0 else "") for v, c in pattern]
    return f"[{', '.join(terms)}]"
