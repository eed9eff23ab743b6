"""Compiling a ``PrimFunc`` into a tree of Python closures the interpreter runs.

Each expression becomes ``fn(env) -> value`` and each statement ``fn(env) -> None`` over one flat
environment list (see ``runtime``). Values are numpy scalars of the IR dtype's storage type, so
numpy's own arithmetic gives the IR's semantics (float16 computed in float16, int32 wrapping
like C), plus the few rules numpy lacks (rounding to bfloat16/float8 after every operation,
truncating integer ``/``, division-by-zero errors).

``T.Parallel`` nests are vectorized: a parallel loop binds its variable to a numpy index grid
(``np.arange`` shaped to broadcast against the other loops of the nest), so its body runs once for
all iterations. Loads become gathers, stores scatters, and an ``If`` whose condition differs per
lane narrows the active-lane mask (``env[0]``) that loads, stores and nested loops honour.
Sequential loops inside a parallel body still run in Python, once per iteration, for all lanes.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.buffer import Buffer, Region
from tilelang_x.core_ir.errors import (
    BackendNotImplementedError,
    OutOfBoundsError,
    TileLangError,
)
from tilelang_x.core_ir.source import SourceLoc
from tilelang_x.core_ir.stmt import Alloc, Annotate, For, If, Kernel, PrimFunc, Print, Seq, Stmt, Store, While
from tilelang_x.core_ir.tileops import Atomic, Copy, CumSum, Fill, Gemm, Reduce, TileOp

from . import numerics
from .lower import Executor, LowerContext
from .runtime import FRAME, MASK, UNBOUND, Program, is_vec

Fn = Callable[[list], Any]


class Par(NamedTuple):
    """Where a statement sits in a vectorized ``T.Parallel`` nest."""

    depth: int  # how many parallel loops enclose it
    ndim: int  # how many axes the nest's index grids have
    loop_slots: tuple[int, ...]  # the env slots of the enclosing parallel loop variables

LowerOp = Callable[[TileOp], Executor | None]


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

_MATH: dict[str, Callable[..., Any]] = {
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(x.dtype.type(10), x), "log": np.log,
    "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "expm1": np.expm1, "sqrt": np.sqrt,
    "rsqrt": lambda x: np.reciprocal(np.sqrt(x)), "tanh": np.tanh,
    "sigmoid": lambda x: np.reciprocal(x.dtype.type(1) + np.exp(-x)), "abs": np.abs, "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "erf": lambda x: _erf(x).astype(x.dtype), "floor": np.floor,
    "ceil": np.ceil, "round": _round_half_away, "trunc": np.trunc, "isnan": np.isnan,
    "isinf": np.isinf, "isfinite": np.isfinite, "pow": np.power, "fmod": np.fmod, "atan2": np.arctan2,
}


# ---- the compiler ------------------------------------------------------------------------------

class Compiler:
    """Turns IR into closures; owns the slot numbering of variables and buffers."""

    def __init__(self, func: PrimFunc, lower_op: LowerOp) -> None:
        self.func = func
        self.lower_op = lower_op
        self.slots: dict[int, int] = {}
        self.objects: list[Any] = [None, None]  # slot -> the Var or Buffer (keeps ids alive)
        self._expr_cache: dict[int, tuple[Any, Fn]] = {}
        self._region_cache: dict[int, tuple[Region, Fn]] = {}
        self.private: dict[int, int] = {}  # id(buffer) -> env slot of its lane index grids

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

    def written_params(self) -> set[int]:
        """Indices of the buffer parameters the kernel may write."""
        from tilelang_x.core_ir.visit import walk

        written: set[int] = set()
        for node in walk(self.func.body):
            if isinstance(node, Store):
                written.add(id(node.buffer))
            elif isinstance(node, (Copy, Fill, Reduce, CumSum, Atomic)):
                written.add(id(node.dst.buffer))
            elif isinstance(node, Gemm):
                written.add(id(node.C.buffer))
            elif isinstance(node, TileOp):
                written.update(id(r.buffer) for r in node.regions())
        return {i for i, p in enumerate(self.func.params) if id(p) in written}

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
            if e.name in ("exp10", "sigmoid", "round", "erf"):
                return lambda env: _scalarize(f(np.asarray(fa(env))))
            return lambda env: f(fa(env))
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
        if lane_slot is not None:
            def private_load(env: list) -> Any:
                lanes = env[lane_slot]
                idx = lanes + tuple(f(env) for f in fidx)
                return _vec_load(env, env[bk], idx, name, where, len(lanes))

            return private_load

        def load(env: list) -> Any:
            arr = env[bk]
            idx = tuple(f(env) for f in fidx)
            if arr is UNBOUND:
                raise TileLangError(f"buffer `{name}` is read before it is allocated", loc=where)
            for i, n in zip(idx, arr.shape):
                if is_vec(i):
                    return _vec_load(env, arr, idx, name, where)
                if not 0 <= i < n:
                    _oob("read of", name, idx, arr.shape, where)
            return arr[idx]

        return load

    # ---- statements -----------------------------------------------------------------------------
    def stmt(self, s: Stmt, par: Par | None = None) -> Fn | None:
        """Compile statement ``s``; ``par`` describes the vectorized parallel nest around it."""
        if isinstance(s, Seq):
            fns = [f for f in (self.stmt(c, par) for c in s.stmts) if f is not None]
            if not fns:
                return None
            if len(fns) == 1:
                return fns[0]

            def seq(env: list) -> None:
                for f in fns:
                    f(env)

            return seq
        if isinstance(s, Annotate):
            return None
        if isinstance(s, For):
            return self._for(s, par)
        if isinstance(s, If):
            return self._if(s, par)
        if isinstance(s, While):
            return self._while(s, par)
        if isinstance(s, Store):
            return self._store(s)
        if isinstance(s, Alloc):
            return self._alloc(s, par)
        if isinstance(s, Kernel):
            return self._kernel(s)
        if isinstance(s, Print):
            return self._print(s)
        if isinstance(s, TileOp):
            return self._tileop(s)
        raise BackendNotImplementedError(
            f"the interpreter cannot run statement {type(s).__name__}", loc=getattr(s, "loc", None)
        )

    def _for(self, s: For, par: Par | None) -> Fn | None:
        if s.kind == "parallel":
            return self._parallel(s, par)
        slot = self.var_slot(s.var)
        vt = numerics.storage_dtype(s.var.dtype).type
        fs = None if s.start is None else self.expr(s.start, s.loc)
        fe = self.expr(s.extent, s.loc)
        body = self.stmt(s.body, par)
        if body is None:
            return None

        def serial(env: list) -> None:
            lo = 0 if fs is None else fs(env)
            n = fe(env)
            if is_vec(lo) or is_vec(n):
                return _lane_varying_loop(env, slot, vt, lo, n, body)
            lo = int(lo)
            for k in range(lo, lo + int(n)):
                env[slot] = vt(k)
                body(env)

        return serial

    def _parallel(self, s: For, par: Par | None) -> Fn | None:
        depth, ndim, outer = (0, _parallel_depth(s), ()) if par is None else par
        slot = self.var_slot(s.var)
        vdt = numerics.storage_dtype(s.var.dtype)
        fs = None if s.start is None else self.expr(s.start, s.loc)
        fe = self.expr(s.extent, s.loc)
        body = self.stmt(s.body, Par(depth + 1, ndim, (*outer, slot)))
        if body is None:
            return None
        shape = [1] * ndim

        def parallel(env: list) -> None:
            lo = 0 if fs is None else fs(env)
            n = fe(env)
            frame = env[FRAME]
            old = env[MASK]
            if is_vec(lo) or is_vec(n):  # bounds that differ per lane of an outer loop: mask
                m_all = old if old is not None else np.True_
                lo_b, hi_b = np.broadcast_arrays(lo, lo + n, m_all)[:2]
                act = np.broadcast_to(m_all, lo_b.shape)
                if not act.any():
                    return
                a, b = int(lo_b[act].min()), int(hi_b[act].max())
                if b <= a:
                    return
                shape[depth] = b - a
                grid = np.arange(a, b, dtype=vdt).reshape(shape)
                m = (grid >= lo) & (grid < lo + n)
                env[MASK] = m if old is None else old & m
            else:
                lo, n = int(lo), int(n)
                if n <= 0:
                    return
                shape[depth] = n
                grid = np.arange(lo, lo + n, dtype=vdt).reshape(shape)
            env[slot] = grid
            frame.parallel_depth += 1
            try:
                body(env)
            finally:
                frame.parallel_depth -= 1
                env[MASK] = old

        return parallel

    def _if(self, s: If, par: Par | None) -> Fn | None:
        fc = self.expr(self.coerce(s.cond, dtypes.bool_), s.loc)
        then = self.stmt(s.then, par)
        other = None if s.otherwise is None else self.stmt(s.otherwise, par)
        if then is None and other is None:
            return None

        def branch(env: list) -> None:
            c = fc(env)
            if not is_vec(c):
                if c:
                    if then is not None:
                        then(env)
                elif other is not None:
                    other(env)
                return
            old = env[MASK]
            try:
                for lanes, fn in ((c, then), (None, other)):
                    if fn is None:
                        continue
                    if lanes is None:
                        lanes = ~c
                    m = lanes if old is None else old & lanes
                    if m.any():
                        env[MASK] = m
                        fn(env)
            finally:
                env[MASK] = old

        return branch

    def _while(self, s: While, par: Par | None) -> Fn:
        fc = self.expr(self.coerce(s.cond, dtypes.bool_), s.loc)
        body = self.stmt(s.body, par)

        def loop(env: list) -> None:
            old = env[MASK]
            active = old
            try:
                while True:
                    c = fc(env)
                    if is_vec(c):
                        active = c if active is None else active & c
                        if not active.any():
                            break
                        env[MASK] = active
                    elif not c:
                        break
                    if body is not None:
                        body(env)
            finally:
                env[MASK] = old

        return loop

    def _store(self, s: Store) -> Fn:
        buf = s.buffer
        bk = self.buffer_slot(buf)
        fidx = [self.expr(i, s.loc) for i in s.indices]
        fv = self.expr(self.coerce(s.value, buf.dtype), s.loc)
        where = s.loc
        name = buf.name
        if len(fidx) != buf.ndim:
            raise TileLangError(f"{len(fidx)} indices for {buf.ndim}-d buffer `{name}`", loc=where)
        lane_slot = self.private.get(id(buf))
        if lane_slot is not None:
            def private_store(env: list) -> None:
                lanes = env[lane_slot]
                idx = lanes + tuple(f(env) for f in fidx)
                _vec_store(env, env[bk], idx, fv(env), name, where, len(lanes))

            return private_store

        def store(env: list) -> None:
            arr = env[bk]
            idx = tuple(f(env) for f in fidx)
            v = fv(env)
            if arr is UNBOUND:
                raise TileLangError(f"buffer `{name}` is written before it is allocated", loc=where)
            if env[MASK] is not None or is_vec(v):
                return _vec_store(env, arr, idx, v, name, where)
            for i, n in zip(idx, arr.shape):
                if is_vec(i):
                    return _vec_store(env, arr, idx, v, name, where)
                if not 0 <= i < n:
                    _oob("write to", name, idx, arr.shape, where)
            arr[idx] = v

        return store

    def _alloc(self, s: Alloc, par: Par | None) -> Fn:
        buf = s.buffer
        bk = self.buffer_slot(buf)
        fshape = [self.expr(d, s.loc) for d in buf.shape]
        sdt = numerics.storage_dtype(buf.dtype)
        finit = None if s.init is None else self.expr(self.coerce(s.init, buf.dtype), s.loc)
        if par is not None:
            return self._private_alloc(s, par, bk, fshape, sdt, finit)

        def alloc(env: list) -> None:
            arr = np.zeros(tuple(int(f(env)) for f in fshape), dtype=sdt)
            if finit is not None:
                arr[...] = finit(env)
            env[bk] = arr

        return alloc

    def _private_alloc(self, s: Alloc, par: Par, bk: int, fshape: list[Fn], sdt: np.dtype, finit: Fn | None) -> Fn:
        """A buffer allocated inside a ``T.Parallel`` body: one copy per lane of the enclosing
        parallel loops. Its storage has the lane axes first; ``env[lane_slot]`` holds the index
        grids that select each lane's copy."""
        lane_slot = len(self.objects)
        self.objects.append(("lanes", s.buffer))
        self.private[id(s.buffer)] = lane_slot
        depth, ndim, loop_slots = par
        ndim_buf = s.buffer.ndim

        def alloc(env: list) -> None:
            lane_shape = [1] * ndim
            lanes: list[Any] = []
            for axis, slot in enumerate(loop_slots):
                n = env[slot].shape[axis]
                lane_shape[axis] = n
                shape = [1] * ndim
                shape[axis] = n
                lanes.append(np.arange(n).reshape(shape))
            lanes += [0] * (ndim - depth)
            arr = np.zeros(tuple(lane_shape) + tuple(int(f(env)) for f in fshape), dtype=sdt)
            env[bk] = arr
            env[lane_slot] = tuple(lanes)
            if finit is not None:
                _vec_store(env, arr, tuple(lanes) + (0,) * ndim_buf, finit(env), s.buffer.name, s.loc, ndim)

        return alloc

    def _kernel(self, s: Kernel) -> Fn:
        fgrid = [self.expr(g, s.loc) for g in s.grid]
        slots = [self.var_slot(v) for v in s.block_vars]
        types = [numerics.storage_dtype(v.dtype).type for v in s.block_vars]
        body = self.stmt(s.body)

        def kernel(env: list) -> None:
            dims = [int(f(env)) for f in fgrid]
            frame = env[FRAME]
            if body is None:
                return
            for rev in itertools.product(*[range(n) for n in reversed(dims)]):
                block = rev[::-1]
                for k, t, b in zip(slots, types, block):
                    env[k] = t(b)
                frame.block = block
                frame.first_block = not any(block)
                body(env)
            frame.first_block = True

        return kernel

    def _print(self, s: Print) -> Fn:
        value = s.value
        prefix = f"{s.loc}: " if s.loc is not None else ""
        msg = f"{s.msg}: " if s.msg else ""

        def show(env: list) -> None:
            frame = env[FRAME]
            if not frame.first_block:
                return
            if isinstance(value, Buffer):
                text = f"{value.name} =\n{np.array(frame.array(value))}"
            elif isinstance(value, Region):
                text = f"{value} =\n{np.array(frame.read(value, s.loc))}"
            elif isinstance(value, (E.Expr, int, float, bool)):
                text = f"{value} = {frame.eval(value)}"
            else:
                text = str(value)
            print(f"{prefix}{msg}{text}", flush=True)

        return show

    def _tileop(self, s: TileOp) -> Fn:
        executor = self.lower_op(s)
        if executor is None:
            raise BackendNotImplementedError(
                f"no executor for tile op `{getattr(s, 'name', type(s).__name__)}` on the interpreter",
                loc=s.loc,
                hint="a plugin that defines this op must answer tlx_lower_op for target 'interp'",
            )
        loc = s.loc

        def tileop(env: list) -> None:
            frame = env[FRAME]
            frame.loc = loc
            try:
                executor(frame)
            except TileLangError as err:
                raise err.with_loc(loc) from None
            finally:
                frame.loc = None

        return tileop


# ---- vectorized loads and stores -----------------------------------------------------------------

def _scalarize(x: Any) -> Any:
    return x[()] if type(x) is np.ndarray and x.ndim == 0 else x


def _oob(what: str, name: str, idx: tuple, shape: tuple, loc: SourceLoc | None, nl: int = 0) -> None:
    """Raise the out-of-bounds error; ``nl`` leading lane axes (of a lane-private buffer) are
    left out of the message."""
    index = ", ".join(str(int(i)) for i in idx[nl:])
    raise OutOfBoundsError(
        f"out-of-bounds {what} `{name}`[{index}]: the buffer's shape is {tuple(shape[nl:])}",
        loc=loc,
        hint="guard the access with an `if`, or use T.copy, whose global tails are guarded",
    )


def _check_lanes(what: str, name: str, idx: tuple, shape: tuple, loc: SourceLoc | None, nl: int = 0) -> None:
    """Raise for the first lane whose index is outside ``shape`` (``idx``: broadcast arrays or
    scalars, already restricted to the active lanes)."""
    bad = None
    for i, n in zip(idx, shape):
        if is_vec(i):
            if i.size and (i.min() < 0 or i.max() >= n):
                b = (i < 0) | (i >= n)
                bad = b if bad is None else bad | b
        elif not 0 <= i < n:
            _oob(what, name, tuple(np.ravel(i)[0] if is_vec(i) else i for i in idx), shape, loc, nl)
    if bad is not None:
        pos = np.unravel_index(int(np.argmax(bad)), bad.shape)
        lane = tuple(int(np.broadcast_to(i, bad.shape)[pos]) if is_vec(i) else int(i) for i in idx)
        _oob(what, name, lane, shape, loc, nl)


def _in_bounds(idx: tuple, shape: tuple) -> bool:
    for i, n in zip(idx, shape):
        if is_vec(i):
            if i.size and (i.min() < 0 or i.max() >= n):
                return False
        elif not 0 <= i < n:
            return False
    return True


def _vec_load(env: list, arr: np.ndarray, idx: tuple, name: str, loc: SourceLoc | None, nl: int = 0) -> Any:
    mask = env[MASK]
    if mask is None or _in_bounds(idx, arr.shape):
        if mask is None:
            _check_lanes("read of", name, idx, arr.shape, loc, nl)
        return arr[idx]
    # only the active lanes load; the others read zero
    shape = np.broadcast_shapes(mask.shape, *[i.shape for i in idx if is_vec(i)])
    m = np.broadcast_to(mask, shape)
    sel = tuple(np.broadcast_to(i, shape)[m] if is_vec(i) else i for i in idx)
    _check_lanes("read of", name, sel, arr.shape, loc, nl)
    out = np.zeros(shape, dtype=arr.dtype)
    out[m] = arr[sel]
    return out


def _vec_store(env: list, arr: np.ndarray, idx: tuple, v: Any, name: str, loc: SourceLoc | None,
               nl: int = 0) -> None:
    mask = env[MASK]
    shapes = [i.shape for i in idx if is_vec(i)]
    if is_vec(v):
        shapes.append(v.shape)
    if mask is not None:
        shapes.append(mask.shape)
    shape = np.broadcast_shapes(*shapes)
    if mask is not None:
        m = np.broadcast_to(mask, shape)
        sel = tuple(np.broadcast_to(i, shape)[m] for i in idx)
        vals = np.broadcast_to(v, shape)[m]
    else:
        sel = tuple(np.broadcast_to(i, shape).reshape(-1) for i in idx)
        vals = np.broadcast_to(v, shape).reshape(-1)
    if not len(vals):
        return
    _check_lanes("write to", name, sel, arr.shape, loc, nl)
    arr[sel] = vals


def _lane_varying_loop(env: list, slot: int, vt: type, lo: Any, n: Any, body: Fn) -> None:
    """A sequential loop inside a parallel body whose bounds differ per lane: run from the
    smallest start to the largest end, each lane active only inside its own range."""
    old = env[MASK]
    hi = lo + n
    base = old if old is not None else np.True_
    lo_b, hi_b, act = np.broadcast_arrays(lo, hi, base)
    if not act.any():
        return
    a, b = int(lo_b[act].min()), int(hi_b[act].max())
    try:
        for k in range(a, b):
            kk = vt(k)
            m = (lo <= kk) & (kk < hi)
            m = m if old is None else old & m
            if not np.any(m):
                continue
            env[MASK] = m
            env[slot] = kk
            body(env)
    finally:
        env[MASK] = old


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


def _parallel_depth(s: Stmt) -> int:
    """How many parallel loops nest inside ``s`` (``s`` included), at most."""
    if isinstance(s, For):
        inner = _parallel_depth(s.body)
        return inner + 1 if s.kind == "parallel" else inner
    if isinstance(s, Seq):
        return max((_parallel_depth(c) for c in s.stmts), default=0)
    if isinstance(s, If):
        return max(_parallel_depth(s.then), 0 if s.otherwise is None else _parallel_depth(s.otherwise))
    if isinstance(s, While):
        return _parallel_depth(s.body)
    return 0


# ---- entry point -------------------------------------------------------------------------------

def build_program(func: PrimFunc, target: Any, lower_op: Callable[..., Any] | None = None,
                  options: dict[str, Any] | None = None) -> Program:
    """Compile ``func`` for the interpreter. ``lower_op(target=, op=, ctx=)`` answers the
    executor of each tile op (the plugin hook relay's ``tlx_lower_op``); by default the registry's
    hook is asked."""
    ctx = LowerContext(target=target, func=func, options=dict(options or {}))
    if lower_op is None:
        lower_op = _registry_lower_op()

    def lower(op: TileOp) -> Executor | None:
        return lower_op(target=target, op=op, ctx=ctx)

    comp = Compiler(func, lower)
    for p in func.params:  # parameters take the first slots, in order
        if isinstance(p, Buffer):
            comp.buffer_slot(p)
        else:
            comp.var_slot(p)
    comp.shape_var_slots()
    body = comp.stmt(func.body)
    return Program(func, comp, body if body is not None else (lambda env: None))


def _registry_lower_op() -> Callable[..., Any]:
    from tilelang_x.registry import hook

    return hook().tlx_lower_op
