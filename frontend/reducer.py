"""``T.alloc_reducer``: a deferred reduction that any number of ``T.Parallel`` iterations update.

Both of TileLang's spellings build the same IR (``core_ir.tileops.ReducerInit`` /
``ReducerUpdate`` / ``FinalizeReducer``):

- the first: ``T.fill(r, init)`` / ``T.clear(r)``, then ``r[i] += v`` (``T.max``, ``T.min``,
  ``&=``, ``|=``, ``^=`` for the other kinds) inside ``T.Parallel``, then ``T.finalize_reducer(r)``,
  after which ``r`` reads as the result;
- the second: ``T.reducer_init(r[, init])``, ``T.reducer_update(r[i], v)``,
  ``T.finalize_reducer(r, dst)``, after which the result is in ``dst`` and ``r`` is not used.

``reducer_epochs.py`` keeps the state of each reducer and rejects the other uses of it.
"""

from __future__ import annotations

from typing import Any

from ..core_ir import expr as E
from ..core_ir.buffer import Buffer, Region
from ..core_ir.errors import TileLangSyntaxError, TileLangTypeError
from ..core_ir.source import SourceLoc, caller_loc
from ..core_ir.stmt import Alloc
from ..core_ir.tileops import REDUCER_KINDS, Copy, FinalizeReducer, ReducerInit, ReducerUpdate, identity
from . import builder as bld
from .reducer_epochs import UPDATE_SPELLING, Reducer
from .spec import dtype_of, shape_of

_BIT_KINDS = ("bitand", "bitor", "bitxor")
#: the operator of the first spelling's update, per kind (``E.BinOp.op``)
_UPDATE_OPS = {"sum": "+", "max": "max", "min": "min", "bitand": "&", "bitor": "|", "bitxor": "^"}


def alloc_reducer(shape: Any, dtype: Any, op: str = "sum", replication: str | None = None) -> Buffer:
    """A reducer of ``shape`` combining contributions with ``op`` (``"sum"``, ``"max"``, ``"min"``,
    ``"bitand"``, ``"bitor"``, ``"bitxor"``). ``replication`` (``"all"`` / ``"none"``) is checked
    and ignored: the backend decides where the partial results live."""
    b = bld.require_kernel("T.alloc_reducer")
    loc = caller_loc()
    if op not in REDUCER_KINDS:
        raise TileLangSyntaxError(f"T.alloc_reducer: unknown op {op!r}", loc=loc,
                                  hint=f"use one of {', '.join(map(repr, REDUCER_KINDS))}")
    if replication not in (None, "all", "none"):
        raise TileLangSyntaxError(f"T.alloc_reducer: replication={replication!r}", loc=loc,
                                  hint="leave it out, or pass 'all' or 'none'")
    dt = dtype_of(dtype)
    if op in _BIT_KINDS and not dt.is_int:
        raise TileLangTypeError(f"T.alloc_reducer: a {op} reducer needs an integer dtype, got {dt.name}", loc=loc)
    buf = b.new_buffer("reducer", shape_of(shape, "T.alloc_reducer"), dt, "local", loc)
    b.emit(Alloc(buf, None, loc=loc))
    b.reducers.add(buf, op)
    return buf


def _reducer(value: Any, what: str, loc: SourceLoc | None) -> Reducer:
    b = bld.require_kernel(what)
    buf = value.buffer if isinstance(value, Region) else value
    r = b.reducers.get(buf) if isinstance(buf, Buffer) else None
    if r is None or (isinstance(value, Region) and not value.is_full()):
        raise TileLangTypeError(f"{what} takes a whole buffer made by T.alloc_reducer, got {value!r}", loc=loc,
                                hint="allocate it with r = T.alloc_reducer(shape, dtype, op=...)")
    return r


def _open(r: Reducer, init: Any, v2: bool, what: str, loc: SourceLoc | None) -> None:
    b = bld.require_kernel(what)
    if r.state == "open":
        raise TileLangSyntaxError(f"{what}: the reduction of `{r.buffer.name}` is already open", loc=loc,
                                  hint=f"finish it with T.finalize_reducer({r.buffer.name}) first")
    value = identity(r.kind, r.buffer.dtype) if init is None else E.cast(init, r.buffer.dtype)
    b.emit(ReducerInit(r.kind, Region.full(r.buffer), value, loc=loc))
    b.reducers.open(r, tuple(id(f) for f in b.frames), v2)


def fill_reducer(buffer: Any, value: Any, what: str) -> bool:
    """``T.fill(r, init)`` / ``T.clear(r)`` on a reducer opens its reduction; ``False`` when
    ``buffer`` is not a reducer."""
    b = bld.require_kernel(what)
    buf = buffer.buffer if isinstance(buffer, Region) else buffer
    if not isinstance(buf, Buffer) or b.reducers.get(buf) is None:
        return False
    loc = caller_loc()
    _open(_reducer(buffer, what, loc), value, False, what, loc)
    return True


def reducer_init(reducer: Any, init_value: Any = None) -> None:
    """``T.reducer_init(r[, init])``: open a reduction of ``r``; its result is ``init`` (the
    identity of the op when left out) combined once with every contribution."""
    loc = caller_loc()
    _open(_reducer(reducer, "T.reducer_init", loc), init_value, True, "T.reducer_init", loc)


def _update(r: Reducer, indices: tuple[E.Expr, ...], value: Any, what: str, loc: SourceLoc | None) -> None:
    b = bld.require_kernel(what)
    name = r.buffer.name
    if r.state != "open":
        raise TileLangSyntaxError(
            f"{what}: reducer `{name}` is updated outside its reduction", loc=loc,
            hint=f"open it first with T.fill({name}, init) / T.clear({name}) / T.reducer_init({name}), and update "
            f"it before T.finalize_reducer({name})")
    ids = [id(f) for f in b.frames]
    if ids[:len(r.frames)] != list(r.frames) or not any(f.loop_kind == "parallel" for f in b.frames[len(r.frames):]):
        raise TileLangSyntaxError(
            f"{what}: reducer `{name}` is updated outside a T.Parallel loop inside the block that opened it",
            loc=loc, hint="update a reducer inside `for ... in T.Parallel(...)`, after opening it and before "
            "T.finalize_reducer, in the same block")
    b.emit(ReducerUpdate(r.kind, Region(r.buffer, indices, tuple(E.const(1) for _ in indices)),
                         E.cast(value, r.buffer.dtype), loc=loc))


def reducer_update(target: Any, value: Any) -> None:
    """``T.reducer_update(r[i, j], v)``: contribute ``v`` to element ``[i, j]`` of reducer ``r``."""
    b = bld.require_kernel("T.reducer_update")
    loc = caller_loc()
    r = b.reducers.get(target.buffer) if isinstance(target, E.Load) else None
    if r is None or not isinstance(target, E.Load):
        raise TileLangSyntaxError(f"T.reducer_update expects an element of a reducer, got {target!r}", loc=loc,
                                  hint="write T.reducer_update(r[i], v) with r = T.alloc_reducer(...)")
    _update(r, target.indices, value, "T.reducer_update", loc)


def store_reducer(r: Reducer, indices: tuple[E.Expr, ...], value: E.Expr, loc: SourceLoc | None) -> None:
    """``r[i] = ...`` on a reducer: the first spelling's update (``r[i] += v`` for a sum reducer,
    ``r[i] = T.max(r[i], v)`` for a max reducer...)."""
    contribution = _contribution(r, indices, value)
    if contribution is None:
        spelling = UPDATE_SPELLING[r.kind].replace("r[", f"{r.buffer.name}[")
        raise TileLangSyntaxError(
            f"store to reducer `{r.buffer.name}` (op={r.kind!r}): a reducer is only updated", loc=loc,
            hint=f"write {spelling} or T.reducer_update({r.buffer.name}[i], v) inside T.Parallel")
    _update(r, indices, contribution, f"update of `{r.buffer.name}`", loc)


def _strip(e: E.Expr) -> E.Expr:
    while isinstance(e, E.Cast):
        e = e.a
    return e


def _contribution(r: Reducer, indices: tuple[E.Expr, ...], value: E.Expr) -> E.Expr | None:
    """``v`` of a stored ``r[i] <op> v`` (or ``v <op> r[i]``), else ``None``."""
    v = _strip(value)
    if not isinstance(v, E.BinOp) or v.op != _UPDATE_OPS[r.kind]:
        return None
    key = tuple(i.structural_key() for i in indices)
    for mine, other in ((v.a, v.b), (v.b, v.a)):
        m = _strip(mine)
        if isinstance(m, E.Load) and m.buffer is r.buffer and tuple(i.structural_key() for i in m.indices) == key:
            return other
    return None


def finalize_reducer(reducer: Any, dst: Any = None, batch: int = 1) -> None:
    """``T.finalize_reducer(r)``: close the reduction; ``r`` then reads as its result.
    ``T.finalize_reducer(r, dst)``: the result goes to ``dst`` (a tile of ``r``'s shape)."""
    from .surface import _region

    b = bld.require_kernel("T.finalize_reducer")
    loc = caller_loc()
    r = _reducer(reducer, "T.finalize_reducer", loc)
    name = r.buffer.name
    if r.state != "open":
        raise TileLangSyntaxError(f"T.finalize_reducer({name}): the reduction of `{name}` is not open", loc=loc,
                                  hint=f"open it with T.fill({name}, init) / T.clear({name}) / T.reducer_init({name})")
    if tuple(id(f) for f in b.frames) != r.frames:
        raise TileLangSyntaxError(
            f"T.finalize_reducer({name}) is not in the block that opened the reduction", loc=loc,
            hint="finalize a reducer at the same level as its T.fill / T.clear / T.reducer_init: not inside a "
            "loop or branch the opening is outside of, nor outside one it is in")
    if r.v2 and dst is None:
        raise TileLangSyntaxError(
            f"T.finalize_reducer({name}) of a reduction opened by T.reducer_init needs a destination", loc=loc,
            hint=f"write T.finalize_reducer({name}, dst) with dst = T.alloc_fragment(shape, dtype)")
    out = None
    if dst is not None:
        out = _region(dst, "T.finalize_reducer destination")
        Copy(Region.full(r.buffer), out, loc=loc).check()
        if out.buffer.scope == "global":
            raise TileLangSyntaxError("T.finalize_reducer: the destination is in global memory", loc=loc,
                                      hint="finalize into a T.alloc_fragment tile and T.copy it out")
    b.emit(FinalizeReducer(r.kind, Region.full(r.buffer), out, loc=loc))
    r.state = "dead" if r.v2 else "result"
