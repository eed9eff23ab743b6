"""TVM's cross-thread reduction as TileLang's GEMV examples write it::

    with T.attr(T.comm_reducer(lambda x, y: x + y, [T.Cast("float32", 0)]), "reduce_scope",
                T.reinterpret(T.uint64(0), dtype="handle")):
        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, red[0], tx, dtype="handle"))

becomes one ``core_ir.allreduce.ThreadAllreduce`` statement. ``T.comm_reducer`` recognises its
combiner by calling it on two variables; ``T.attr`` only opens the scope the allreduce needs.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import Any

from ..core_ir import expr as E
from ..core_ir.allreduce import BIT_KINDS, KIND_OPS, ThreadAllreduce
from ..core_ir.errors import NotSupportedError, TileLangError, TileLangSyntaxError, TileLangTypeError
from ..core_ir.source import caller_loc
from . import builder as bld
from .surface import reinterpret as _reinterpret

__all__ = ["EMITTED", "CommReducer", "NullHandle", "ReduceScope", "attr", "comm_reducer", "reinterpret",
           "tvm_thread_allreduce"]

_KIND_OF_OP = {op: kind for kind, op in KIND_OPS.items()}
_EXAMPLE = ("with T.attr(T.comm_reducer(lambda x, y: x + y, [T.Cast(dtype, 0)]), \"reduce_scope\", "
            "T.reinterpret(T.uint64(0), dtype=\"handle\")): T.evaluate(T.tvm_thread_allreduce(T.uint32(1), "
            "value, True, out[0], tx, dtype=\"handle\"))")


class NullHandle:
    """``T.reinterpret(T.uint64(0), dtype="handle")``: the null handle a ``reduce_scope`` attribute
    carries (the scope's data pointer, which nothing here needs)."""

    def __repr__(self) -> str:
        return "T.reinterpret(T.uint64(0), dtype='handle')"


class _Emitted:
    """What ``T.tvm_thread_allreduce`` returns: its statement is already in the kernel, so
    ``T.evaluate`` of it adds nothing."""

    def __repr__(self) -> str:
        return "<T.tvm_thread_allreduce statement>"


EMITTED = _Emitted()


class CommReducer:
    """``T.comm_reducer(combiner, [identity])``: a single-value reducer of kind ``kind``
    (a key of ``core_ir.allreduce.KIND_OPS``)."""

    def __init__(self, kind: str, identity: E.Expr) -> None:
        self.kind = kind
        self.identity = identity

    def __repr__(self) -> str:
        return f"T.comm_reducer({self.kind}, [{self.identity}])"


def reinterpret(*args: Any, dtype: Any = None) -> Any:
    """``T.reinterpret(dtype, value)``; also TVM's ``T.reinterpret(value, dtype=...)``. To
    ``"handle"`` it is the null handle of a ``reduce_scope`` attribute."""
    if dtype is not None:
        if len(args) != 1:
            raise TileLangSyntaxError("T.reinterpret(value, dtype=...) takes one value", loc=caller_loc())
        target, value = dtype, args[0]
    elif len(args) == 2:
        target, value = args
    else:
        raise TileLangSyntaxError("T.reinterpret takes a dtype and a value: T.reinterpret(dtype, value)",
                                  loc=caller_loc())
    if isinstance(target, str) and target == "handle":
        if E.as_int(value) != 0:
            raise NotSupportedError(f"T.reinterpret({value!r}, dtype='handle'): only the null handle (0) is supported",
                                    loc=caller_loc(), hint="a handle only appears as the data of a reduce_scope "
                                                           "attribute: " + _EXAMPLE)
        return NullHandle()
    return _reinterpret(target, value)


def comm_reducer(combiner: Callable[..., Any], identity: Any) -> CommReducer:
    """TVM's commutative reducer: ``combiner(x, y)`` must be ``x + y``, ``x * y``, ``T.max(x, y)``,
    ``T.min(x, y)``, ``x & y``, ``x | y`` or ``x ^ y``; ``identity`` a list of one value."""
    loc = caller_loc()
    values = list(identity) if isinstance(identity, (list, tuple)) else [identity]
    try:
        params = len(inspect.signature(combiner).parameters)
    except (TypeError, ValueError):
        params = -1
    if len(values) != 1 or params != 2:
        raise NotSupportedError(
            f"T.comm_reducer with {params if params >= 0 else 'an unknown number of'} combiner parameters and "
            f"{len(values)} identities: only single-value reducers are supported", loc=loc,
            hint="write T.comm_reducer(lambda x, y: x + y, [T.Cast(dtype, 0)]); reduce several values with one "
                 "allreduce each")
    ident = E.convert(values[0])
    x, y = E.Var("x", ident.dtype), E.Var("y", ident.dtype)
    try:
        body = combiner(x, y)
    except TileLangError:
        body = None
    kind = _KIND_OF_OP.get(body.op) if isinstance(body, E.BinOp) else None
    if kind is None or {id(body.a), id(body.b)} != {id(x), id(y)}:  # type: ignore[union-attr]
        raise NotSupportedError(
            f"T.comm_reducer: the combiner computes `{body}`, which is not one of x + y, x * y, T.max(x, y), "
            "T.min(x, y), x & y, x | y, x ^ y", loc=loc,
            hint="write the reduction's binary operation on the two parameters, e.g. lambda x, y: T.max(x, y)")
    return CommReducer(kind, ident)


class ReduceScope:
    """``with T.attr(reducer, "reduce_scope", handle):``, the scope ``T.tvm_thread_allreduce``
    takes its reducer from."""

    def __init__(self, reducer: CommReducer) -> None:
        self.reducer = reducer
        self.loc = caller_loc()
        self.used = False

    def __enter__(self) -> ReduceScope:
        _scopes.stack.append(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        _scopes.stack.pop()
        if exc_type is None and not self.used:
            raise TileLangSyntaxError("T.attr(..., \"reduce_scope\", ...) whose body has no T.tvm_thread_allreduce",
                                      loc=self.loc, hint=_EXAMPLE)
        return False


class _Scopes(threading.local):
    def __init__(self) -> None:
        self.stack: list[ReduceScope] = []


_scopes = _Scopes()


def attr(node: Any, key: Any, value: Any) -> ReduceScope:
    """TVM's ``T.attr(node, key, value)`` as a ``with`` context; only ``"reduce_scope"`` with a
    ``T.comm_reducer``, around a ``T.tvm_thread_allreduce``, is supported."""
    bld.require_kernel("T.attr")
    if key != "reduce_scope":
        raise NotSupportedError(
            f"T.attr(..., {key!r}, ...) is not supported by tilelang-x: the only attribute is \"reduce_scope\" "
            "(around T.tvm_thread_allreduce)", loc=caller_loc(),
            hint="pragmas and thread extents come from T.Kernel, T.Pipelined and the T.annotate_* functions")
    if not isinstance(node, CommReducer):
        raise TileLangSyntaxError(f"T.attr({node!r}, \"reduce_scope\", ...): the node must be a T.comm_reducer",
                                  loc=caller_loc(), hint=_EXAMPLE)
    return ReduceScope(node)


def tvm_thread_allreduce(*args: Any, dtype: Any = "handle") -> _Emitted:
    """``T.tvm_thread_allreduce(T.uint32(1), value, cond, out[i], thread)``: ``out[i]`` of every
    thread of a group along the thread axis of ``thread`` receives the reduction of the group's
    ``value``s by the enclosing ``reduce_scope``'s reducer (its identity where ``cond`` is false).
    ``dtype`` (TVM's ``"handle"``) is accepted and ignored."""
    what = "T.tvm_thread_allreduce"
    loc = caller_loc()
    b = bld.require_kernel(what)
    if not _scopes.stack:
        raise TileLangSyntaxError(f"{what} outside `with T.attr(T.comm_reducer(...), \"reduce_scope\", ...)`",
                                  loc=loc, hint="the reducer comes from the attribute around it: " + _EXAMPLE)
    scope = _scopes.stack[-1]
    count = E.as_int(args[0]) if args else None
    if count != 1:
        raise NotSupportedError(f"{what}: {args[0] if args else 'no'} values per call; only one is supported",
                                loc=loc, hint="reduce one value per call (T.uint32(1)); several values take several "
                                              "allreduces, each in its own reduce_scope")
    if len(args) < 5:
        raise TileLangSyntaxError(f"{what} takes (T.uint32(1), value, condition, out[i], thread), got {len(args)} "
                                  "arguments", loc=loc, hint=_EXAMPLE)
    if len(args) > 5:
        raise NotSupportedError(f"{what} over {len(args) - 4} thread axes: only one is supported", loc=loc,
                                hint="reduce along one thread axis; make the block's other axes separate groups")
    _, value, cond, out, thread = args
    reducer = scope.reducer
    v = E.convert(value)
    if v.dtype.is_bool or v.dtype.bits > 64 or v.dtype.name.startswith("float8"):
        raise TileLangTypeError(f"{what} of a {v.dtype} value is not supported", loc=loc,
                                hint="cast it to float16, float32 or an integer type first")
    if reducer.kind in BIT_KINDS and not v.dtype.is_int:
        raise TileLangTypeError(f"{what}: a bitwise reducer needs an integer value, got {v.dtype}", loc=loc)
    if not isinstance(out, E.Load) or out.buffer.scope not in ("local", "var"):
        raise TileLangSyntaxError(f"{what}: the result `{out}` must be an element of a T.alloc_local buffer",
                                  loc=loc, hint="pass e.g. red[0] with red = T.alloc_local((1,), dtype)")
    c = E.convert(cond)
    c = c if c.dtype.is_bool else E.binary("!=", c, 0)
    dim, extent = _axis(thread, b.kernel_frame, what, loc)
    b.emit(ThreadAllreduce(reducer.kind, v, c, E.cast(reducer.identity, v.dtype), out.buffer, out.indices, dim,
                           extent, loc=loc))
    scope.used = True
    return EMITTED


def _axis(thread: Any, frame: Any, what: str, loc: Any) -> tuple[int, int]:
    """The thread axis ``thread`` indexes and its extent."""
    extents = tuple(frame.threads) + (1,) * (3 - len(frame.threads))
    if isinstance(thread, E.ThreadIndex):
        return thread.dim, extents[thread.dim]
    if E.as_int(thread) == 0 and 1 in extents:  # the index along an axis of extent 1 reads as 0
        return extents.index(1), 1
    raise TileLangSyntaxError(
        f"{what}: the thread `{thread}` is not a thread index", loc=loc,
        hint="pass the index of the axis to reduce along: T.get_thread_binding(0) (threadIdx.x), "
             "T.get_thread_binding(1) (threadIdx.y) or T.thread_binding(0, n, thread=\"threadIdx.x\")")
