"""TVMScript's statement form of ``if`` that TileLang kernels also use:

    with T.If(cond):            # or: with T.If(cond), T.Then():
        with T.Then():
            ...
        with T.Else():
            ...

Each ``T.If`` is the same ``If`` node as a Python ``if`` on a symbolic value (``runtime.IfBlock``);
a Python value as the condition makes a constant one (a ``with`` body always runs, so it cannot
fold like a Python ``if``).
"""

from __future__ import annotations

from typing import Any

from ..core_ir import expr as E
from ..core_ir.errors import TileLangSyntaxError
from ..core_ir.source import caller_loc
from .runtime import IfBlock, is_symbolic

_OPEN: list[IfFrame] = []


class IfFrame:
    """``T.If(cond)``: a context manager whose body holds ``T.Then()`` and optionally ``T.Else()``."""

    def __init__(self, cond: Any) -> None:
        self.block = IfBlock(cond if is_symbolic(cond) else E.const(bool(cond)), ir=True)
        self.part = ""

    def __enter__(self) -> IfFrame:
        _OPEN.append(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        _OPEN.pop()
        if exc_type is None and not self.part:
            raise TileLangSyntaxError("`with T.If(...)` has no `with T.Then():` block", loc=self.block.loc)
        return self.block.__exit__(exc_type, exc, tb) if self.part else False


class _Branch:
    part = ""

    def __enter__(self) -> None:
        frame = _OPEN[-1] if _OPEN else None
        if frame is None or frame.part == "else" or frame.part == self.part:
            where = "directly inside `with T.If(...)`" + (", after `with T.Then():`" if self.part == "else" else "")
            raise TileLangSyntaxError(f"`with T.{self.part.title()}():` must be {where}, once", loc=caller_loc())
        if self.part == "else" and not frame.part:
            raise TileLangSyntaxError("`with T.Else():` before `with T.Then():`", loc=caller_loc())
        frame.part = self.part
        if self.part == "then":
            frame.block.then()
        else:
            frame.block.orelse()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        return False


class Then(_Branch):
    """``T.Then()``: the statements run when the enclosing ``T.If``'s condition holds."""

    part = "then"


class Else(_Branch):
    """``T.Else()``: the statements run otherwise."""

    part = "else"


def If(cond: Any) -> IfFrame:  # noqa: N802 - TileLang's (TVMScript's) name
    """``with T.If(cond):`` (see the module docstring)."""
    return IfFrame(cond)
