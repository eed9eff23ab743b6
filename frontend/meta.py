"""``T.inline`` and ``T.meta_class``: methods of trace-time helper objects, inlined like macros.

``@T.inline`` on a method makes it a ``T.macro`` bound to its object: ``obj.method(...)`` traces
the method's body where it is called. ``@T.meta_class`` marks a class whose instances live only
while a kernel is traced (a tile scheduler holding ``T.alloc_var`` state): every method that
assigns to a subscript (``self.x[0] = ...``) is inlined, and a buffer assigned to an attribute
is named ``{prefix}_{attr}`` when the constructor takes a ``prefix``.
"""

from __future__ import annotations

import ast
import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from ..core_ir.errors import TileLangError, TileLangSyntaxError
from ..core_ir.source import caller_loc
from . import builder as B
from .capture import get_source
from .function import Macro

C = TypeVar("C", bound=type)


class InlineMethod:
    """``@T.inline``: a method traced (inlined) at each call through its object."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.macro = Macro(fn)
        functools.update_wrapper(self, fn)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return self.macro.__get__(obj, objtype)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = self.macro.fn.__name__
        raise TileLangSyntaxError(
            f"`{name}` is a T.inline method; it is called through an object, not directly",
            loc=caller_loc(),
            hint=f"call it as `obj.{name}(...)`; decorate a free function with @T.macro instead",
        )

    def __repr__(self) -> str:
        return f"<T.inline {self.macro.fn.__qualname__}>"


def inline(fn: Callable[..., Any]) -> InlineMethod:
    """``@T.inline``: a method whose body is traced where it is called, ``self`` bound."""
    if not inspect.isfunction(fn):
        raise TileLangSyntaxError(
            f"@T.inline decorates a method, got {fn!r}", loc=caller_loc(),
            hint="put @T.inline directly above a `def` inside a class",
        )
    return InlineMethod(fn)


def _stores_to_subscript(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` assigns to a subscript (``self.x[0] = v``, ``A[i] += v``): such a method
    emits stores, so a meta class inlines it. A method whose source cannot be read is inlined
    too (the macro then reports why when it is called)."""
    try:
        tree = get_source(fn).tree
    except TileLangError:
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            continue
        if any(isinstance(sub, ast.Subscript) for t in targets for sub in ast.walk(t)):
            return True
    return False


def _install_naming(cls: type) -> None:
    """Name each buffer assigned to a public attribute ``{prefix}_{attr}``, ``prefix`` being the
    constructor's argument of that name (when it has one and it is given)."""
    init = cls.__init__
    signature = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            prefix = signature.bind(self, *args, **kwargs).arguments.get("prefix")
        except TypeError:
            prefix = None
        object.__setattr__(self, "_meta_prefix", prefix if isinstance(prefix, str) else None)
        init(self, *args, **kwargs)

    def __setattr__(self: Any, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        prefix = getattr(self, "_meta_prefix", None)
        b = B.current()
        if prefix and b is not None and not name.startswith("_"):
            b.name_buffer(value, f"{prefix}_{name}")

    cls.__init__ = __init__  # type: ignore[misc]
    cls.__setattr__ = __setattr__  # type: ignore[method-assign,assignment]


def meta_class(cls: C) -> C:
    """``@T.meta_class``: a trace-time helper class whose storing methods are inlined."""
    if not isinstance(cls, type):
        raise TileLangSyntaxError(
            f"@T.meta_class decorates a class, got {cls!r}", loc=caller_loc(),
            hint="put @T.meta_class directly above a `class` statement",
        )
    if cls.__dict__.get("_is_meta_class"):
        return cls
    cls._is_meta_class = True  # type: ignore[attr-defined]
    _install_naming(cls)
    for name, attr in list(cls.__dict__.items()):
        if name.startswith("__") or not inspect.isfunction(attr):
            continue
        if _stores_to_subscript(attr):
            setattr(cls, name, InlineMethod(attr))
    return cls
