"""Compiling expressions into closures ``fn(env) -> value`` (see ``compile`` for the design): the
arithmetic tables, the slot numbering of variables and buffers, and one method per ``Expr`` node."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.buffer import Buffer, Region
from tilelang_x.core_ir.errors import BackendNotImplementedError, TileLangError
from tilelang_x.core_ir.packed import lane_operands, packed_parts
from tilelang_x.core_ir.philox import rng_rand
from tilelang_x.core_ir.source import SourceLoc
from tilelang_x.core_ir.stmt import PrimFunc

from . import numerics, packed
from .ieee import ieee_function
from .lanes import check_lanes, out_of_bounds, vec_load
from .runtime import FRAME, MASK, UNBOUND, is_vec
from .warp import warp_fn

Fn = Callable[[list], Any]


# ---- arithmetic --------------------------------------------------------------------------------

def _trunc_div(a: Any, b: Any) -> Any:
    return (a - np.fmod(a, b)) // b


_FLOAT_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": np.floor_divide, "%": np.remainder, "min": np.minimum, "max": np.maximum, "**": np.power,
}
_INT_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": _trunc_div,
    "//": np.floor_divide, "%": np.remainder, "min": np.minimum, "max": np.maximum, "**": np.power,
    "&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
}
_CMP_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
    ">=": operator.ge,
}


def _round_half_away(x: Any) -> Any:
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _unsigned(x: Any) -> np.ndarray:
    a = np.asarray(x)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def _popcount(x: Any) -> Any:
    return _scalarize(np.bitwise_count(_unsigned(x)).astype(np.asarray(x).dtype))


def _clz(x: Any) -> Any:
    """Leading zero bits in the width of ``x``'s dtype: halve the search window while the high part
    is nonzero."""
    u = _unsigned(x).astype(np.uint64)
    n = np.full(u.shape, 8 * np.asarray(x).dtype.itemsize, dtype=np.int32)
    for shift in (32, 16, 8, 4, 2, 1):
        high = u >> np.uint64(shift)
        nonzero = high != 0
        n -= np.where(nonzero, shift, 0).astype(np.int32)
        u = np.where(nonzero, high, u)
    return _scalarize(n - (u != 0).astype(np.int32))

_MATH: dict[str, Callable[..., Any]] = {
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(x.dtype.type(10), x), "log": np.log,
    "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "expm1": np.expm1, "sqrt": np.sqrt,
    "rsqrt": lambda x: np.reciprocal(np.sqrt(x)), "tanh": np.tanh,
    "sigmoid": lambda x: np.reciprocal(x.dtype.type(1) + np.exp(-x)), "abs": np.abs, "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "erf": lambda x: _erf(x).astype(x.dtype), "floor": np.floor,
    "ceil": np.ceil, "round": _round_half_away, "trunc": np.trunc, "isnan": np.isnan,
    "isinf": np.isinf, "isfinite": np.isfinite, "pow": np.power, "fmod": np.fmod, "atan2": np.arctan2,
    "nearbyint": np.rint, "popcount": _popcount, "clz": _clz,
}
_MATH.update({fast: _MATH[accurate] for fast, accurate in E.FAST_MATH.items()})


#: how ``T.atomic_<kind>(..., return_prev=True)`` combines the value into the element
_FETCH: dict[str, Callable[[Any, Any], Any]] = {"add": np.add, "max": np.maximum, "min": np.minimum}


# ---- the compiler ------------------------------------------------------------------------------

class ExprCompiler:
    """Turns expressions into closures; owns the slot numbering of variables and buffers."""

    def __init__(self, func: PrimFunc) -> None:
        self.func = func
        self.slots: dict[int, int] = {}
        self.objects: list[Any] = [None, None]  # slot -> the Var or Buffer (keeps ids alive)
        self._expr_cache: dict[int, tuple[Any, Fn]] = {}
        self._region_cache: dict[int, tuple[Region, Fn]] = {}
        self.private: dict[int, int] = {}  # id(buffer) -> env slot of its lane index grids
        self.thread_slots: dict[int, int] = {}  # thread dimension -> env slot of its per-thread indices
        self.nthreads = 0  # lanes of a kernel that runs one lane per thread (see ``threads``), else 0
        self.race_candidates: set[int] = set()  # ids of the storages the race check may follow (``Compiler``)

    # ---- slots ----------------------------------------------------------------------------------
    @property
    def nslots(self) -> int:
        return len(self.objects)

    def _slot(self, obj: Any) -> int:
        slot = self.slots.get(id(obj))
        if slot is None:
            slot = len(self.objects)
            self.slots[id(obj)] = slot
            self.objects.append(obj)
        return slot

    def var_slot(self, var: E.Var) -> int:
        return self._slot(var)

    def var_slot_if_known(self, var: E.Var) -> int | None:
        return self.slots.get(id(var))

    def buffer_slot(self, buf: Buffer) -> int:
        return self._slot(buf)

    def slot_dtype(self, slot: int) -> dtypes.DType:
        return self.objects[slot].dtype

    def shape_var_slots(self) -> list[tuple[E.Var, int]]:
        out = []
        for p in self.func.params:
            if isinstance(p, Buffer):
                for d in p.shape:
                    for v in E.free_vars(d):
                        out.append((v, self.var_slot(v)))
        return out

    # ---- late compilation for executors ---------------------------------------------------------
    def expr_fn(self, e: E.Expr) -> Fn:
        hit = self._expr_cache.get(id(e))
        if hit is None:
            hit = (e, self.expr(e, None))
            self._expr_cache[id(e)] = hit
        return hit[1]

    def region_fn(self, r: Region) -> Fn:
        hit = self._region_cache.get(id(r))
        if hit is None:
            fs = [self.expr(s, None) for s in r.starts]
            fe = [self.expr(x, None) for x in r.extents]

            def bounds(env: list) -> tuple[tuple, tuple]:
                return tuple(f(env) for f in fs), tuple(f(env) for f in fe)

            hit = (r, bounds)
            self._region_cache[id(r)] = hit
        return hit[1]

    # ---- expressions ----------------------------------------------------------------------------
    def coerce(self, e: E.Expr, dt: dtypes.DType) -> E.Expr:
        """``e`` as dtype ``dt`` (an explicit cast where the IR left a mismatch)."""
        return e if e.dtype == dt else E.Cast(e, dt)

    def expr(self, e: Any, loc: SourceLoc | None) -> Fn:
        """Compile expression ``e``; ``loc`` is the enclosing statement's, for errors."""
        if not isinstance(e, E.Expr):
            if isinstance(e, Buffer):
                e = e.as_expr()
            else:
                e = E.convert(e)
        method = getattr(self, "_" + type(e).__name__.lower(), None)
        if method is None:
            raise BackendNotImplementedError(f"the interpreter cannot evaluate {type(e).__name__} `{e}`", loc=loc)
        return method(e, loc)

    def _const(self, e: E.Const, loc: SourceLoc | None) -> Fn:
        v = numerics.scalar(e.value, e.dtype)
        return lambda env: v

    def _var(self, e: E.Var, loc: SourceLoc | None) -> Fn:
        k = self.var_slot(e)
        name = e.name

        def var(env: list) -> Any:
            v = env[k]
            if v is UNBOUND:
                raise TileLangError(f"variable `{name}` has no value here", loc=loc)
            return v

        return var

    def _binop(self, e: E.BinOp, loc: SourceLoc | None) -> Fn:
        op, dt = e.op, e.dtype
        if op in ("and", "or"):
            return self._logic(e, loc)
        if op in _CMP_OPS:
            common = dtypes.promote(e.a.dtype, e.b.dtype)
            fa, fb = self.expr(self.coerce(e.a, common), loc), self.expr(self.coerce(e.b, common), loc)
            f = _CMP_OPS[op]
            return lambda env: f(fa(env), fb(env))
        fa, fb = self.expr(self.coerce(e.a, dt), loc), self.expr(self.coerce(e.b, dt), loc)
        table = _INT_OPS if (dt.is_int or dt.is_bool) else _FLOAT_OPS
        f = table.get(op)
        if f is None:
            raise BackendNotImplementedError(f"operator `{op}` on {dt} in `{e}`", loc=loc)
        if dt.is_int and op in ("/", "//", "%"):
            return _checked_div(f, fa, fb, e, loc)
        if numerics.is_narrow(dt):
            rnd = numerics.round_to
            return lambda env: rnd(f(fa(env), fb(env)), dt)
        return lambda env: f(fa(env), fb(env))

    def _logic(self, e: E.BinOp, loc: SourceLoc | None) -> Fn:
        fa = self.expr(self.coerce(e.a, dtypes.bool_), loc)
        fb = self.expr(self.coerce(e.b, dtypes.bool_), loc)
        is_and = e.op == "and"

        def logic(env: list) -> Any:
            a = fa(env)
            if not is_vec(a):
                if bool(a) != is_and:  # short circuit: False and ..., True or ...
                    return np.bool_(a)
                return fb(env)
            old = env[MASK]
            lanes = a if is_and else ~a
            m = lanes if old is None else old & lanes
            if not m.any():
                return a
            env[MASK] = m
            try:
                b = fb(env)
            finally:
                env[MASK] = old
            return (a & b) if is_and else (a | b)

        return logic

    def _unaryop(self, e: E.UnaryOp, loc: SourceLoc | None) -> Fn:
        fa = self.expr(e.a, loc)
        if e.op == "neg":
            if numerics.is_narrow(e.dtype):
                return lambda env: -fa(env)  # negation is exact
            return lambda env: operator.neg(fa(env))
        if e.op == "not":
            return lambda env: np.logical_not(fa(env))
        if e.op == "~":
            return lambda env: np.invert(fa(env))
        raise BackendNotImplementedError(f"unary operator `{e.op}`", loc=loc)

    def _select(self, e: E.Select, loc: SourceLoc | None) -> Fn:
        fc = self.expr(self.coerce(e.cond, dtypes.bool_), loc)
        ft, ff = self.expr(self.coerce(e.t, e.dtype), loc), self.expr(self.coerce(e.f, e.dtype), loc)

        def select(env: list) -> Any:
            c = fc(env)
            if not is_vec(c):
                return ft(env) if c else ff(env)
            old = env[MASK]
            parts = []
            for lanes, fn in ((c, ft), (~c, ff)):
                m = lanes if old is None else old & lanes
                if m.any():
                    env[MASK] = m
                    try:
                        parts.append(fn(env))
                    finally:
                        env[MASK] = old
                else:
                    parts.append(None)
            t, f = parts
            if t is None:
                return f
            if f is None:
                return t
            return np.where(c, t, f)

        return select

    def _cast(self, e: E.Cast, loc: SourceLoc | None) -> Fn:
        fa = self.expr(e.a, loc)
        dt, src = e.dtype, e.a.dtype
        conv = numerics.convert
        return lambda env: conv(fa(env), dt, src)

    def _call(self, e: E.Call, loc: SourceLoc | None) -> Fn:
        if e.name == "reinterpret":
            return self._reinterpret(e, loc)
        if e.name == E.RNG_FUNC:
            fargs = [self.expr(a, loc) for a in e.args]
            return lambda env: _scalarize(rng_rand(*[g(env) for g in fargs]))
        ieee = E.ieee_parts(e.name)
        if ieee is not None:
            return self._ieee(e, ieee, loc)
        if e.name == E.FAST_RCP or packed_parts(e.name) is not None:
            return self._packed_or_rcp(e, loc)
        f = _MATH.get(e.name)
        if f is None:
            raise BackendNotImplementedError(f"the interpreter has no math function `{e.name}`", loc=loc)
        fargs = [self.expr(a, loc) for a in e.args]
        dt = e.dtype
        arg_dt = e.args[0].dtype if e.args else dt
        if arg_dt.is_float and arg_dt.bits <= 16:
            # compute in float32, round once to the narrow dtype
            conv = numerics.convert
            out_dt = dt
            f32 = np.float32

            def call_narrow(env: list) -> Any:
                args = [np.asarray(a, dtype=f32) if is_vec(a) else f32(a) for a in (g(env) for g in fargs)]
                r = _scalarize(f(*args))
                return r if out_dt.is_bool else conv(r, out_dt)

            return call_narrow
        if len(fargs) == 1:
            (fa,) = fargs
            if E.FAST_MATH.get(e.name, e.name) in ("exp10", "sigmoid", "round", "erf"):
                return lambda env: _scalarize(f(np.asarray(fa(env))))
            return lambda env: f(fa(env))
        return lambda env: f(*[g(env) for g in fargs])

    def _externcall(self, e: E.ExternCall, loc: SourceLoc | None) -> Fn:
        raise BackendNotImplementedError(
            f"the interpreter cannot call external device code: T.call_extern(..., {e.name!r}, ...)",
            loc=e.loc or loc, hint="kernels that use T.call_extern run on CUDA only: compile with target=\"cuda\"")

    def _reinterpret(self, e: E.Call, loc: SourceLoc | None) -> Fn:
        fa = self.expr(e.args[0], loc)
        src, dt = e.args[0].dtype, e.dtype
        to_bits, from_bits = numerics.to_bits, numerics.from_bits
        return lambda env: from_bits(to_bits(fa(env), src), dt)

    def _packed_or_rcp(self, e: E.Call, loc: SourceLoc | None) -> Fn:
        """``T.fast_rcp``, or one lane of a packed operation (``add2.1``: from the operands' lane 1)."""
        parts = packed_parts(e.name)
        if parts is None:
            f, operands = packed.fast_rcp, e.args
        else:
            f, operands = packed.lane_function(parts[0], e.dtype), lane_operands(e.args, parts[1])
        fargs = [self.expr(a, loc) for a in operands]
        return lambda env: f(*[g(env) for g in fargs])

    def _ieee(self, e: E.Call, parts: tuple[str, str], loc: SourceLoc | None) -> Fn:
        f = ieee_function(*parts, numerics.storage_dtype(e.dtype).type)
        fargs = [self.expr(a, loc) for a in e.args]
        return lambda env: f(*[g(env) for g in fargs])

    def _load(self, e: E.Load, loc: SourceLoc | None) -> Fn:
        buf = e.buffer
        bk = self.buffer_slot(buf)
        fidx = [self.expr(i, loc) for i in e.indices]
        where = e.loc or loc
        name = buf.name
        if len(fidx) != buf.ndim:
            raise TileLangError(f"{len(fidx)} indices for {buf.ndim}-d buffer `{name}`", loc=where)
        lane_slot = self.private.get(id(buf))
        race = buf if id(buf.storage) in self.race_candidates else None
        if lane_slot is not None:
            def private_load(env: list) -> Any:
                lanes = env[lane_slot]
                idx = lanes + tuple(f(env) for f in fidx)
                return vec_load(env, env[bk], idx, name, where, len(lanes))

            return private_load

        def load(env: list) -> Any:
            arr = env[bk]
            idx = tuple(f(env) for f in fidx)
            if arr is UNBOUND:
                raise TileLangError(f"buffer `{name}` is read before it is allocated", loc=where)
            for i, n in zip(idx, arr.shape):
                if is_vec(i):
                    return vec_load(env, arr, idx, name, where, race=race)
                if not 0 <= i < n:
                    out_of_bounds("read of", name, idx, arr.shape, where)
            if race is not None and env[FRAME].races is not None:
                frame = env[FRAME]
                frame.races.read(buf, arr, idx, frame.block_id, where)
            return arr[idx]

        return load

    def _threadindex(self, e: E.ThreadIndex, loc: SourceLoc | None) -> Fn:
        slot = self.thread_slots.get(e.dim)
        if slot is None:
            raise BackendNotImplementedError("the interpreter evaluates thread indices only in the statements of a "
                                             "T.Kernel body", loc=loc)
        return lambda env: env[slot]

    def _warpop(self, e: E.WarpOp, loc: SourceLoc | None) -> Fn:
        if not self.nthreads:
            raise BackendNotImplementedError(f"the interpreter evaluates T.{e.op} only in the statements of a "
                                             "T.Kernel body", loc=loc)
        return warp_fn(e, [self.expr(a, loc) for a in e.args], self.nthreads, loc)

    def _atomicfetch(self, e: E.AtomicFetch, loc: SourceLoc | None) -> Fn:
        """``T.atomic_<kind>(..., return_prev=True)``: one element updated, its value before
        returned. Lanes that run it together (a ``T.Parallel`` body, threads under a divergent
        branch) update one after another in lane order, each seeing the updates before its own,
        as one order a GPU's atomics may take. Every element must be in bounds."""
        buf = e.buffer
        bk = self.buffer_slot(buf)
        fidx = [self.expr(i, loc) for i in e.indices]
        fv = self.expr(e.value, loc)
        combine = _FETCH[e.kind]
        narrow = numerics.is_narrow(buf.dtype)
        where = e.loc or loc
        name = buf.name
        what = f"T.atomic_{e.kind}(..., return_prev=True) of"
        race = buf if id(buf.storage) in self.race_candidates else None

        def update(arr: np.ndarray, ix: tuple, v: Any) -> Any:
            old = arr[ix]
            new = combine(old, v)
            arr[ix] = numerics.round_to(new, buf.dtype) if narrow else new
            return old

        def fetch(env: list) -> Any:
            arr = env[bk]
            if arr is UNBOUND:
                raise TileLangError(f"buffer `{name}` is updated before it is allocated", loc=where)
            idx = tuple(f(env) for f in fidx)
            v = fv(env)
            frame, mask = env[FRAME], env[MASK]
            races = frame.races if race is not None else None
            if mask is None and not frame.grids and not is_vec(v) and not any(is_vec(i) for i in idx):
                for i, n in zip(idx, arr.shape):
                    if not 0 <= i < n:
                        out_of_bounds(what, name, idx, arr.shape, where)
                if races is not None:
                    races.atomic(buf, arr, idx, frame.block_id, where)
                return update(arr, idx, v)
            shapes = [frame.lane_shape, np.shape(v), *(np.shape(i) for i in idx)]
            shape = np.broadcast_shapes(*shapes, *([] if mask is None else [mask.shape]))
            active = np.ones(shape, dtype=bool) if mask is None else np.broadcast_to(mask, shape)
            sel = tuple(np.broadcast_to(np.asarray(i, dtype=np.int64), shape)[active] for i in idx)
            vals = np.broadcast_to(v, shape)[active]
            check_lanes(what, name, sel, arr.shape, where)
            if races is not None and len(vals):
                races.atomic(buf, arr, sel, frame.block_id, where)
            out = np.zeros(shape, dtype=arr.dtype)
            out[active] = [update(arr, ix, x) for ix, x in zip(zip(*sel), vals)]
            return out

        return fetch

    def _atomicload(self, e: E.AtomicLoad, loc: SourceLoc | None) -> Fn:
        """Blocks run one after another and a block's statements in order, so every load is atomic;
        the memory order changes nothing here."""
        return self._load(e, loc)  # type: ignore[arg-type]


def _scalarize(x: Any) -> Any:
    return x[()] if type(x) is np.ndarray and x.ndim == 0 else x


def _checked_div(f: Callable[[Any, Any], Any], fa: Fn, fb: Fn, e: E.BinOp, loc: SourceLoc | None) -> Fn:
    def div(env: list) -> Any:
        a, b = fa(env), fb(env)
        if is_vec(b):
            zero = b == 0
            if zero.any():
                mask = env[MASK]
                if mask is None or (zero & mask).any():
                    _div_zero(e, loc)
        elif b == 0:
            _div_zero(e, loc)
        return f(a, b)

    return div


def _div_zero(e: E.BinOp, loc: SourceLoc | None) -> None:
    raise TileLangError(f"integer division by zero in `{e}`", loc=loc)
