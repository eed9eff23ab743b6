"""Python ``TypeError``s raised on the user's own line while a kernel is traced, as located errors.

A ``NameError`` (a name the kernel never defined) is located the same way. Two kinds of
``TypeError`` reach here: a ``T.*`` call whose arguments do not fit its signature (``T.gemm(a, b, c,
trans_B=True)``; Python raises those in the caller's frame) and a Python builtin handed a kernel
value (``int(bx)``, ``math.exp(x)``, ``len(A)``), which has no Python number to give while the
kernel is traced.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import re
import traceback
from collections.abc import Callable
from typing import Any

from ..core_ir import expr as E
from ..core_ir.errors import TileLangError, TileLangSyntaxError, TileLangTypeError
from ..core_ir.source import SourceLoc, _is_internal

_BINDING = re.compile(
    r"^(?P<callee>[\w.<>]+)\(\) (?:missing \d+ required|got an unexpected keyword argument|takes |"
    r"got multiple values for argument|got some positional-only)"
)
_UNEXPECTED = re.compile(r"unexpected keyword argument '(?P<kw>\w+)'")


def located_type_error(exc: TypeError | NameError) -> TileLangError | None:
    """``exc`` as a ``TileLangError`` naming the user's line when it was raised there, else ``None``."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames or _is_internal(frames[-1].filename):
        return None
    last = frames[-1]
    loc = SourceLoc(last.filename, last.lineno or 0, last.name)
    text = str(exc)
    if isinstance(exc, NameError):
        return TileLangSyntaxError(text, loc=loc, hint=_name_hint(exc, last.line or ""))
    match = _BINDING.match(text)
    if match:
        return _binding_error(match["callee"], text, loc)
    return TileLangTypeError(text, loc=loc, hint=_value_hint(text))


def _binding_error(callee: str, text: str, loc: SourceLoc) -> TileLangSyntaxError:
    fn, name = _language_names().get(callee, (None, callee))
    message = text.replace(f"{callee}()", f"{name}()", 1)
    if fn is None:
        return TileLangSyntaxError(message, loc=loc)
    sig = _signature(fn)
    hint = f"its signature: {name}{sig}" if sig is not None else None
    unexpected = _UNEXPECTED.search(text)
    if unexpected and sig is not None:
        close = difflib.get_close_matches(unexpected["kw"], list(sig.parameters), n=1)
        if close:
            hint = f"did you mean `{close[0]}=`? {hint}"
    return TileLangSyntaxError(message, loc=loc, hint=hint)


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return sig.replace(return_annotation=inspect.Signature.empty, parameters=[
        p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()])


@functools.cache
def _language_names() -> dict[str, tuple[Callable[..., Any], str]]:
    """The qualified name Python's message gives a ``T.*`` callable (a class's ``__init__``) ->
    (the callable, ``T.<name>``)."""
    from . import language

    out: dict[str, tuple[Callable[..., Any], str]] = {}
    for name in language.__all__:
        obj = getattr(language, name, None)
        if inspect.isclass(obj):
            out.setdefault(f"{obj.__qualname__}.__init__", (obj, f"T.{name}"))
        elif callable(obj) and hasattr(obj, "__qualname__"):
            out.setdefault(obj.__qualname__, (obj, f"T.{name}"))
    return out


def _name_hint(exc: NameError, line: str) -> str | None:
    """``with T.Kernel(gx, gy) as bx, by:`` makes Python look ``by`` up as a second context manager."""
    name = getattr(exc, "name", None)
    if name and re.search(rf"\bas\s+\w+\s*,\s*{re.escape(name)}\b", line):
        return f"put the names in parentheses: `as (..., {name})`; without them `{name}` is read as another `with` item"
    return None


def _value_hint(text: str) -> str | None:
    if "'Region'" in text:
        return "index every dimension of a buffer to get one element (A[i, j]); fewer indices give a region"
    if "does not support item assignment" in text or "is not subscriptable" in text:
        return "only buffers take indices; this is a single value (a scalar parameter or an expression)"
    if "'Buffer' has no len()" in text:
        return "use A.shape[k] for the size of dimension k"
    if any(f"'{t}'" in text or f"not {t}" in text for t in _expr_type_names()) or "ufunc" in text:
        return ("kernel values are symbolic while the kernel is traced, not Python numbers: use T.cast(x, dtype) "
                "instead of int() / float(), and T.exp, T.log, T.sqrt ... instead of math / numpy")
    return None


@functools.cache
def _expr_type_names() -> frozenset[str]:
    names, todo = set(), [E.Expr]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return frozenset(names)
