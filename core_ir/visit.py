"""Generic traversal and rebuilding of IR trees.

Nodes are frozen dataclasses, so one field-driven walker serves every node type, including tile
ops that plugins define.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from .buffer import Buffer, Region
from .expr import Expr, Var
from .stmt import Seq, Stmt

Node = Expr | Stmt | Region


_NODE_TYPES = (Expr, Stmt, Region)
#: each node class's field names but ``loc``: ``dataclasses.fields`` is too slow for every visit
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.name != "loc")
    return names


def _fields(node: Any) -> Iterator[tuple[str, Any]]:
    for name in _names(type(node)):
        yield name, getattr(node, name)


def _is_node(value: Any) -> bool:
    return isinstance(value, _NODE_TYPES)


def _child_list(node: Any) -> list[Node]:
    out: list[Node] = []
    for name in _names(type(node)):
        value = getattr(node, name)
        if isinstance(value, _NODE_TYPES):
            out.append(value)
        elif isinstance(value, tuple):
            out.extend(v for v in value if isinstance(v, _NODE_TYPES))
    return out


def children(node: Node) -> Iterator[Node]:
    """Direct child nodes (expressions, statements, regions), in field order."""
    return iter(_child_list(node))


def walk(node: Node) -> Iterator[Node]:
    """Every node of the tree in pre-order."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        kids = _child_list(n)
        if kids:
            kids.reverse()
            stack.extend(kids)


def walk_stmts(node: Node) -> Iterator[Stmt]:
    """Every statement of the tree in pre-order, without entering expressions."""
    stack: list[Any] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Stmt):
            yield n
        kids = [c for c in _child_list(n) if isinstance(c, Stmt)]
        if kids:
            kids.reverse()
            stack.extend(kids)


def flat_seq(s: Stmt) -> list[Stmt]:
    """The statements of ``s`` in order, nested sequences flattened (``[s]`` for any other node)."""
    if isinstance(s, Seq):
        return [x for c in s.stmts for x in flat_seq(c)]
    return [s]


def map_fields(node: Any, fn: Callable[[Any], Any]) -> Any:
    """The dataclass ``node`` with ``fn`` applied to each field but its ``loc`` (the same object
    when ``fn`` returns every field unchanged)."""
    changes = {}
    for name, value in _fields(node):
        new = fn(value)
        if new is not value:
            changes[name] = new
    return dataclasses.replace(node, **changes) if changes else node


def rewrite(node: Any, fn: Callable[[Any], Any | None]) -> Any:
    """Rebuild ``node`` bottom-up; ``fn`` sees each rebuilt node and returns a replacement or
    ``None`` to keep it. Unchanged subtrees are returned as the same objects."""
    if isinstance(node, tuple):
        items = tuple(rewrite(v, fn) for v in node)
        return node if all(a is b for a, b in zip(items, node)) else items
    if not _is_node(node) or isinstance(node, Var):
        if isinstance(node, Var):
            out = fn(node)
            return node if out is None else out
        return node
    changes = {}
    for name, value in _fields(node):
        if _is_node(value) or isinstance(value, tuple):
            new = rewrite(value, fn)
            if new is not value:
                changes[name] = new
    rebuilt = dataclasses.replace(node, **changes) if changes else node
    out = fn(rebuilt)
    return rebuilt if out is None else out


def substitute(node: Any, mapping: dict[Var, Expr]) -> Any:
    """Replace variables by expressions (buffers and their shapes are left alone)."""
    if not mapping:
        return node
    return rewrite(node, lambda n: mapping.get(n) if isinstance(n, Var) else None)


def buffers_used(node: Node) -> list[Buffer]:
    """The buffers a tree reads, writes or declares, in first-use order."""
    seen: dict[int, Buffer] = {}
    for n in walk(node):
        for _, value in _fields(n):
            if isinstance(value, Buffer):
                seen.setdefault(id(value), value)
    return list(seen.values())


def views_of(node: Node) -> dict[Buffer, list[Buffer]]:
    """The views (``T.view``, ``T.reshape``) a tree uses, by the buffer that owns their memory."""
    out: dict[Buffer, list[Buffer]] = {}
    for b in buffers_used(node):
        if b.base is not None:
            out.setdefault(b.base, []).append(b)
    return out
