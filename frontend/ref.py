"""``T.Ref``: a reference to one buffer element, read and assigned through a name.

``r = T.Ref(A[i, j])`` binds ``r`` to the element: ``r`` in an expression reads it, ``r = v`` and
``r += v`` store to it (the rewritten assignments call ``runtime.bind`` / ``runtime.aug``, which
route a ``Ref`` here). A ``T.macro`` parameter annotated ``T.Ref`` receives its argument the same
way, so the macro can assign to the caller's element. Nothing new reaches the IR: a read is a
``Load``, an assignment a ``Store``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

from ..core_ir import expr as E
from ..core_ir.buffer import Buffer, Region, forward_value_ops
from ..core_ir.errors import TileLangSyntaxError
from ..core_ir.source import SourceLoc, caller_loc
from ..core_ir.stmt import Alloc
from . import builder as B
from .capture import visible_names


class Ref:
    """``T.Ref(A[i, j])``: one element of a buffer, read as its value and assigned through."""

    __slots__ = ("load", "bound")

    def __init__(self, element: Any) -> None:
        if isinstance(element, Ref):
            element = element.load
        elif type(element) is Buffer and element.scope == "var":
            element = element.as_expr()
        if not isinstance(element, E.Load):
            raise TileLangSyntaxError(
                f"T.Ref takes one buffer element, got {type(element).__name__} {element!r}",
                loc=caller_loc(),
                hint="index every dimension: `r = T.Ref(A[i, j])`; a T.alloc_var variable is assigned directly",
            )
        self.load: E.Load = element
        self.bound = False  # set once a name is bound to it (see ``claim``)

    @property
    def buffer(self) -> Buffer:
        return self.load.buffer

    def as_expr(self) -> E.Expr:
        """The element's value, read where it is used."""
        return E.Load(self.load.buffer, self.load.indices, caller_loc())

    def claim(self) -> Any:
        """What an assignment ``x = <this reference>`` binds: a new ``T.Ref(...)`` binds the
        reference itself; reading an existing one (``x = r``) gives its value, as in TileLang."""
        if self.bound:
            return self.as_expr()
        self.bound = True
        return self

    def store(self, value: Any) -> None:
        """``r = value``: a store to the element."""
        b = B.require(f"an assignment through the reference to `{self.buffer.name}`")
        b.store(self.buffer, self.load.indices, E.cast(value, self.buffer.dtype))

    def __bool__(self) -> bool:
        return bool(self.as_expr())

    def __repr__(self) -> str:
        return f"T.Ref({self.load!r})"


forward_value_ops(Ref)


# ---- T.macro parameters annotated T.Ref ---------------------------------------------------------

_REF_TEXT = re.compile(r"^\s*(?:\w+\.)*Ref\s*$")


def _is_ref_annotation(fn: Callable[..., Any], ann: Any, loc: SourceLoc) -> bool:
    if ann is Ref:
        return True
    if not isinstance(ann, str) or not _REF_TEXT.match(ann):
        return False
    try:
        value = eval(ann, visible_names(fn))  # noqa: S307 - the user's own annotation text
    except Exception as exc:  # noqa: BLE001
        raise TileLangSyntaxError(
            f"cannot evaluate the annotation {ann!r} of a parameter of `{fn.__name__}`: {exc}", loc=loc,
            hint="import the language as `import tilelang_x.language as T` where the macro is defined",
        ) from None
    return value is Ref


def ref_params(fn: Callable[..., Any], loc: SourceLoc) -> frozenset[str]:
    """The parameters of ``fn`` annotated ``T.Ref`` (string annotations evaluated only when they
    spell ``...Ref``: other annotations of a macro stay documentation)."""
    anns = getattr(fn, "__annotations__", None) or {}
    return frozenset(k for k, v in anns.items() if k != "return" and _is_ref_annotation(fn, v, loc))


def _fixed(b: B.Builder, index: E.Expr, loc: SourceLoc | None) -> E.Expr:
    """``index`` evaluated once, at the call: an index that reads memory is kept in a variable,
    as TileLang binds a reference argument's indices where the macro is called."""
    if not b.kernel_open or not E.contains(index, E.Element):
        return index
    var = b.new_buffer("ref_index", (1,), index.dtype, "var", loc)
    b.emit(Alloc(var, index, loc=loc))
    return var.as_expr()


def ref_argument(name: str, macro: str, value: Any) -> Any:
    """What a parameter annotated ``T.Ref`` receives for ``value``: a reference for a buffer
    element, the variable itself for a ``T.alloc_var``, the region itself for a region."""
    if (type(value) is Buffer and value.scope == "var") or isinstance(value, Region):
        return value
    load = value.load if isinstance(value, Ref) else value
    if not isinstance(load, E.Load):
        raise TileLangSyntaxError(
            f"argument `{name}` of `{macro}` is annotated T.Ref, so it must be a buffer element, "
            f"got {type(value).__name__} {value!r}",
            loc=caller_loc(),
            hint=f"pass an element such as `A[i, j]` (or a T.alloc_var variable) for `{name}`",
        )
    b = B.current()
    if b is not None:
        loc = caller_loc()
        load = E.Load(load.buffer, tuple(_fixed(b, i, loc) for i in load.indices), load.loc)
    ref = Ref(load)
    ref.bound = True
    return ref


def macro_arguments(
    fn: Callable[..., Any], refs: frozenset[str], args: tuple[Any, ...], kwargs: dict[str, Any],
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments to run a macro with: references for its ``T.Ref`` parameters; a reference
    passed to another parameter is read as its value (TileLang passes the element's value)."""
    if not refs and not any(isinstance(a, Ref) for a in (*args, *kwargs.values())):
        return args, kwargs
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return args, kwargs  # Python reports the mismatch when the macro is called
    for name, value in bound.arguments.items():
        if name in refs:
            bound.arguments[name] = ref_argument(name, fn.__name__, value)
        elif isinstance(value, Ref):
            bound.arguments[name] = value.as_expr()
    return bound.args, bound.kwargs
