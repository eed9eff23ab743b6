"""``T.import_source``, ``T.call_extern``, ``T.evaluate``: device code the kernel brings along,
calls of it, and calls made for their effect. The interpreter cannot run such code: kernels that
call it run on CUDA only."""

from __future__ import annotations

import re
from typing import Any

from ..core_ir import dtypes
from ..core_ir import expr as E
from ..core_ir.errors import TileLangSyntaxError, TileLangTypeError
from ..core_ir.source import caller_loc
from ..core_ir.stmt import ExprStmt, Stmt
from ..core_ir.visit import walk
from . import builder as bld
from .allreduce import EMITTED

__all__ = ["call_extern", "check_externs", "evaluate", "import_source"]

#: TileLang's dtypes of a call with no value
VOID = ("void", "handle", "")
#: a C++ function name, possibly qualified (``ns::fn``)
_NAME = re.compile(r"[A-Za-z_]\w*(::[A-Za-z_]\w*)*")


def import_source(code: str) -> None:
    """Device code put once before the kernel (in the order of the calls; repeats dropped)."""
    b = bld.require_kernel("T.import_source")
    if not isinstance(code, str):
        raise TileLangTypeError(f"T.import_source needs the code as a string, got {type(code).__name__}",
                                loc=caller_loc(), hint="pass the source text, e.g. read from a .cuh file")
    if code not in b.imports:
        b.imports.append(code)


def call_extern(dtype: Any, name: str, *args: Any) -> E.ExternCall:
    """A call of the device function ``name`` with ``args``, of dtype ``dtype``."""
    b = bld.require_kernel("T.call_extern")
    loc = caller_loc()
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise TileLangSyntaxError(f"T.call_extern needs a function name, got {name!r}", loc=loc,
                                  hint='the dtype comes first: T.call_extern("float32", "my_fn", x)')
    void = isinstance(dtype, str) and dtype in VOID
    call = E.ExternCall(name, tuple(E.convert(a) for a in args), dtypes.int32 if void else dtypes.as_dtype(dtype),
                        void, loc)
    b.externs.append(call)
    return call


def evaluate(value: Any) -> None:
    """``value`` computed for its effect, its result dropped."""
    b = bld.require_kernel("T.evaluate")
    if value is EMITTED:  # T.tvm_thread_allreduce made its statement already
        return
    b.emit(ExprStmt(E.convert(value), loc=caller_loc()))


def check_externs(externs: list[E.ExternCall], body: Stmt) -> None:
    """Every ``T.call_extern`` of a trace is in ``body``, a void one only as a ``T.evaluate``:
    a call whose result Python dropped would otherwise vanish without a word."""
    if not externs:
        return
    used: set[int] = set()
    statements: set[int] = set()
    for n in walk(body):
        if isinstance(n, E.ExternCall):
            used.add(id(n))
        elif isinstance(n, ExprStmt):
            statements.add(id(n.value))
    for call in externs:
        if id(call) not in used:
            raise TileLangSyntaxError(f"the result of T.call_extern({call.name!r}, ...) is never used", loc=call.loc,
                                      hint="call it for its effect with T.evaluate(T.call_extern(...))")
        if call.void and id(call) not in statements:
            raise TileLangSyntaxError(f"T.call_extern of {call.name!r} has no value (dtype void)", loc=call.loc,
                                      hint="use it as a statement, T.evaluate(T.call_extern(...)), or give "
                                           "it the dtype of its result")
