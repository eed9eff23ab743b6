"""A reference evaluator of expressions: the value of an ``Expr`` for given variables and buffers,
on Python numbers or elementwise on numpy arrays."""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from typing import Any

import numpy as np

from .arith import COMPARE, dtype_range, round_float, trunc_div
from .dtypes import DType
from .expr import (
    FAST_MATH,
    INT_FUNCS,
    RNG_FUNC,
    AtomicLoad,
    BinOp,
    Call,
    Cast,
    Const,
    Expr,
    Load,
    Select,
    ThreadIndex,
    UnaryOp,
    Var,
    WarpOp,
    int_call,
)
from .philox import rng_rand

_MATH_SCALAR = {
    "exp": math.exp, "exp2": lambda x: 2.0**x, "exp10": lambda x: 10.0**x, "log": math.log,
    "log2": math.log2, "log10": math.log10, "log1p": math.log1p, "expm1": math.expm1,
    "sqrt": math.sqrt, "rsqrt": lambda x: 1.0 / math.sqrt(x), "tanh": math.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + math.exp(-x)), "abs": abs, "sin": math.sin, "cos": math.cos,
    "tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan, "sinh": math.sinh,
    "cosh": math.cosh, "erf": math.erf, "floor": math.floor, "ceil": math.ceil, "round": round,
    "trunc": math.trunc, "isnan": math.isnan, "isinf": math.isinf, "isfinite": math.isfinite,
    "pow": math.pow, "fmod": math.fmod, "atan2": math.atan2, "nearbyint": lambda x: float(round(x)),
}
_MATH_SCALAR.update({fast: _MATH_SCALAR[accurate] for fast, accurate in FAST_MATH.items()})


def evaluate(e: Expr, env: Mapping[Any, Any]) -> Any:
    """The value of ``e`` with ``env`` giving each ``Var`` (and each ``Buffer``, as an array
    indexable by a tuple). Integers are mathematical; ``//`` and ``%`` floor, ``/`` on integers
    truncates toward zero. Values may be numpy arrays, evaluated elementwise (layouts enumerate
    their domain this way); a Python division by zero raises ``ZeroDivisionError``."""
    vec = any(isinstance(v, np.ndarray) for v in env.values())
    return _Eval(env, vec).eval(e)


class _Eval:
    def __init__(self, env: Mapping[Any, Any], vec: bool) -> None:
        self.env = env
        self.vec = vec

    def eval(self, e: Expr) -> Any:
        if isinstance(e, Const):
            return e.value
        if isinstance(e, Var):
            if e not in self.env:
                raise KeyError(f"no value for variable `{e.name}`")
            return self.env[e]
        if isinstance(e, BinOp):
            if e.op in ("and", "or") and not self.vec:  # short-circuit, as generated code does
                a = bool(self.eval(e.a))
                if a == (e.op == "or"):
                    return a
                return bool(self.eval(e.b))
            return self.binop(e.op, self.eval(e.a), self.eval(e.b), e.dtype, e.a.dtype)
        if isinstance(e, UnaryOp):
            a = self.eval(e.a)
            if e.op == "neg":
                return -a
            if e.op == "not":
                return np.logical_not(a) if self.vec else not a
            return ~a
        if isinstance(e, Select):
            c = self.eval(e.cond)
            if self.vec:
                return np.where(c, self.eval(e.t), self.eval(e.f))
            return self.eval(e.t) if c else self.eval(e.f)
        if isinstance(e, Cast):
            return self.cast(self.eval(e.a), e.dtype, e.a.dtype)
        if isinstance(e, Call):
            args = [self.eval(a) for a in e.args]
            if e.name == RNG_FUNC:
                drawn = rng_rand(*args)
                return drawn if self.vec else int(drawn)
            if e.name in INT_FUNCS:
                dt = e.args[0].dtype
                fold = lambda v: int_call(e.name, Const(int(v), dt)).value
                return np.vectorize(fold)(args[0]) if self.vec else fold(args[0])
            if self.vec:
                name = FAST_MATH.get(e.name, e.name)
                fn = getattr(np, {"abs": "absolute", "round": "rint", "nearbyint": "rint"}.get(name, name))
                return fn(*args)
            return _MATH_SCALAR[e.name](*args)
        if isinstance(e, (Load, AtomicLoad)):
            idx = tuple(self.eval(i) for i in e.indices)
            return self.env[e.buffer][idx]
        if isinstance(e, ThreadIndex):  # given like a variable, keyed by the node
            if e not in self.env:
                raise KeyError(f"no value for thread index {e.dim}")
            return self.env[e]
        if isinstance(e, WarpOp):
            raise TypeError(f"T.{e.op} reads the other lanes of a warp: it has no value for one thread alone")
        raise TypeError(f"cannot evaluate {type(e).__name__}")

    def binop(self, op: str, a: Any, b: Any, dt: DType, adt: DType) -> Any:
        vec = self.vec
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "//":
            return np.floor_divide(a, b) if vec else a // b
        if op == "%":
            return np.mod(a, b) if vec else a % b
        if op == "/":
            if not adt.is_int:
                return a / b
            if vec:
                q = np.abs(a) // np.abs(b)
                return np.where((np.asarray(a) >= 0) == (np.asarray(b) >= 0), q, -q)
            return trunc_div(a, b)
        if op == "min":
            return np.minimum(a, b) if vec else min(a, b)
        if op == "max":
            return np.maximum(a, b) if vec else max(a, b)
        if op in COMPARE:
            return COMPARE[op](a, b)
        if op == "and":
            return np.logical_and(a, b)
        if op == "or":
            return np.logical_or(a, b)
        if op == "**":
            return a**b
        return {"&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift,
                ">>": operator.rshift}[op](a, b)

    def cast(self, v: Any, dt: DType, src: DType) -> Any:
        if dt.is_bool:
            return (np.asarray(v) != 0) if self.vec else bool(v)
        if dt.is_int:
            if src.is_float:
                v = np.trunc(v).astype(np.int64) if self.vec else math.trunc(v)
            elif self.vec:
                v = np.asarray(v).astype(np.int64)
            else:
                v = int(v)
            lo, hi = dtype_range(dt)
            if dt.bits >= 64 and self.vec:
                return v
            span = hi - lo + 1  # type: ignore[operator]
            return (v - lo) % span + lo  # type: ignore[operator]
        if self.vec:
            return np.asarray(v).astype(np.float64)
        r = round_float(float(v), dt)
        return float(v) if r is None else r
