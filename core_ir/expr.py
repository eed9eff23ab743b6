"""Scalar expressions of the IR.

Nodes are immutable. Python operators on an ``Expr`` build new nodes, so kernel code such as
``by * block_M + i`` is ordinary Python running against these objects. ``==`` builds a comparison
node, whose truth value (``bool(a == b)``) is structural equality, as TVM users expect; every
other symbolic value refuses ``bool()`` with an error that says what to write instead.

Variables compare by identity; all other nodes structurally (``structural_key``).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import dtypes
from .dtypes import DType, promote
from .errors import TileLangSyntaxError, TileLangTypeError
from .source import SourceLoc, caller_loc

if TYPE_CHECKING:
    from .buffer import Buffer

ARITH_OPS = ("+", "-", "*", "/", "//", "%", "min", "max", "**")
COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")
LOGIC_OPS = ("and", "or")
BIT_OPS = ("&", "|", "^", "<<", ">>")
BINARY_OPS = ARITH_OPS + COMPARE_OPS + LOGIC_OPS + BIT_OPS
UNARY_OPS = ("neg", "not", "~")

#: Math intrinsics a ``Call`` may name, with their arity.
MATH_FUNCS: dict[str, int] = {
    "exp": 1, "exp2": 1, "exp10": 1, "log": 1, "log2": 1, "log10": 1, "log1p": 1, "expm1": 1,
    "sqrt": 1, "rsqrt": 1, "tanh": 1, "sigmoid": 1, "abs": 1, "sin": 1, "cos": 1, "tan": 1,
    "asin": 1, "acos": 1, "atan": 1, "sinh": 1, "cosh": 1, "erf": 1, "floor": 1, "ceil": 1,
    "round": 1, "trunc": 1, "isnan": 1, "isinf": 1, "isfinite": 1, "pow": 2, "fmod": 2,
    "atan2": 2, "nearbyint": 1, "__exp": 1, "__exp10": 1, "__log": 1, "__log2": 1, "__log10": 1,
    "__tan": 1, "__cos": 1, "__sin": 1,
}
#: TileLang's IEEE-rounded arithmetic and its arity. A ``Call``'s name carries the rounding mode
#: after a dot: ``ieee_add.rz``.
IEEE_FUNCS: dict[str, int] = {
    "ieee_add": 2, "ieee_sub": 2, "ieee_mul": 2, "ieee_fmaf": 3, "ieee_frcp": 1, "ieee_fsqrt": 1,
    "ieee_frsqrt": 1, "ieee_fdiv": 2,
}
#: to nearest (ties to even), toward zero, up (toward +inf), down (toward -inf)
ROUNDING_MODES = ("rn", "rz", "ru", "rd")
#: TileLang's fast-math functions and the accurate function each approximates (backends without a
#: faster version compute that one).
FAST_MATH: dict[str, str] = {name: name[2:] for name in MATH_FUNCS if name.startswith("__")}
BOOL_RESULT_FUNCS = ("isnan", "isinf", "isfinite")
#: C++'s memory orders, as TileLang spells them (``memory_order=`` of the atomics)
MEMORY_ORDERS = ("relaxed", "consume", "acquire", "release", "acq_rel", "seq_cst")
#: Integer intrinsics a ``Call`` may name: one integer argument; ``popcount`` keeps its dtype,
#: ``clz`` (leading zero bits, the width for 0) is an int32, as in TVM.
INT_FUNCS = ("popcount", "clz")
#: ``T.fast_rcp``'s ``Call``: the approximate float32 reciprocal
FAST_RCP = "fast_rcp"
#: ``T.rng_rand``'s ``Call``: ``(seed, subsequence, offset)``, three uint64 operands, a uint32 result
#: (Philox4x32-10, ``core_ir.philox``); a pure function of its operands
RNG_FUNC = "rng_rand"


class Expr:
    """Base of every scalar expression node; carries ``dtype``."""

    __slots__ = ()
    dtype: DType

    # ---- structure -------------------------------------------------------------------------
    def children(self) -> tuple[Expr, ...]:
        return ()

    def structural_key(self) -> tuple:
        raise NotImplementedError

    def __hash__(self) -> int:
        return hash(self.structural_key())

    def same_as(self, other: Any) -> bool:
        """Structural equality (``Var``s by identity)."""
        return isinstance(other, Expr) and self.structural_key() == other.structural_key()

    def __bool__(self) -> bool:
        raise TileLangSyntaxError(
            f"the symbolic value `{self}` has no Python truth value",
            loc=caller_loc(),
            hint="use it in an `if` inside the kernel body (it becomes an IR branch), or use "
            "T.if_then_else(cond, a, b) inside expressions",
        )

    def __repr__(self) -> str:
        from .printer import expr_to_str

        return expr_to_str(self)

    __str__ = __repr__

    def astype(self, dtype: DType | str) -> Expr:
        """``T.cast(self, dtype)``, as TVM expressions spell it."""
        return cast(self, dtype)

    # ---- arithmetic ------------------------------------------------------------------------
    def __add__(self, o: Any) -> Expr:
        return binary("+", self, o)

    def __radd__(self, o: Any) -> Expr:
        return binary("+", o, self)

    def __sub__(self, o: Any) -> Expr:
        return binary("-", self, o)

    def __rsub__(self, o: Any) -> Expr:
        return binary("-", o, self)

    def __mul__(self, o: Any) -> Expr:
        return binary("*", self, o)

    def __rmul__(self, o: Any) -> Expr:
        return binary("*", o, self)

    def __truediv__(self, o: Any) -> Expr:
        return binary("/", self, o)

    def __rtruediv__(self, o: Any) -> Expr:
        return binary("/", o, self)

    def __floordiv__(self, o: Any) -> Expr:
        return binary("//", self, o)

    def __rfloordiv__(self, o: Any) -> Expr:
        return binary("//", o, self)

    def __mod__(self, o: Any) -> Expr:
        return binary("%", self, o)

    def __rmod__(self, o: Any) -> Expr:
        return binary("%", o, self)

    def __pow__(self, o: Any) -> Expr:
        return binary("**", self, o)

    def __rpow__(self, o: Any) -> Expr:
        return binary("**", o, self)

    def __neg__(self) -> Expr:
        return unary("neg", self)

    def __pos__(self) -> Expr:
        return self

    def __abs__(self) -> Expr:
        return call("abs", self)

    def __invert__(self) -> Expr:
        return unary("not" if self.dtype.is_bool else "~", self)

    def __and__(self, o: Any) -> Expr:
        return binary("&", self, o)

    def __rand__(self, o: Any) -> Expr:
        return binary("&", o, self)

    def __or__(self, o: Any) -> Expr:
        return binary("|", self, o)

    def __ror__(self, o: Any) -> Expr:
        return binary("|", o, self)

    def __xor__(self, o: Any) -> Expr:
        return binary("^", self, o)

    def __rxor__(self, o: Any) -> Expr:
        return binary("^", o, self)

    def __lshift__(self, o: Any) -> Expr:
        return binary("<<", self, o)

    def __rshift__(self, o: Any) -> Expr:
        return binary(">>", self, o)

    def __rlshift__(self, o: Any) -> Expr:
        return binary("<<", o, self)

    def __rrshift__(self, o: Any) -> Expr:
        return binary(">>", o, self)

    def __lt__(self, o: Any) -> Expr:
        return binary("<", self, o)

    def __le__(self, o: Any) -> Expr:
        return binary("<=", self, o)

    def __gt__(self, o: Any) -> Expr:
        return binary(">", self, o)

    def __ge__(self, o: Any) -> Expr:
        return binary(">=", self, o)

    def __eq__(self, o: Any) -> Expr:  # type: ignore[override]
        return binary("==", self, o)

    def __ne__(self, o: Any) -> Expr:  # type: ignore[override]
        return binary("!=", self, o)


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class Var(Expr):
    """A named scalar variable: loop and block indices, shape variables, scalar parameters."""

    name: str
    dtype: DType = dtypes.int32
    loc: SourceLoc | None = field(default=None, compare=False)

    def structural_key(self) -> tuple:
        return ("var", id(self))

    def __hash__(self) -> int:
        return id(self)


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class Const(Expr):
    """A literal of a given dtype."""

    value: int | float | bool
    dtype: DType = dtypes.int32

    def structural_key(self) -> tuple:
        # float.hex tells 0.0 from -0.0 (which compare equal) and makes nan equal to itself
        value = self.value.hex() if isinstance(self.value, float) else self.value
        return ("const", value, self.dtype.name)

    def __bool__(self) -> bool:
        return bool(self.value)

    def __int__(self) -> int:
        return int(self.value)

    def __float__(self) -> float:
        return float(self.value)

    def __index__(self) -> int:
        if not self.dtype.is_int:
            raise TypeError(f"{self} is not an integer")
        return int(self.value)


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class BinOp(Expr):
    """``a <op> b``; ``op`` is one of ``BINARY_OPS``. ``/`` truncates on integers, ``//`` and
    ``%`` are floor division and floor modulo."""

    op: str
    a: Expr
    b: Expr
    dtype: DType

    def children(self) -> tuple[Expr, ...]:
        return (self.a, self.b)

    def structural_key(self) -> tuple:
        return ("bin", self.op, self.a.structural_key(), self.b.structural_key(), self.dtype.name)

    def __bool__(self) -> bool:
        if self.op == "==":
            return self.a.same_as(self.b)
        if self.op == "!=":
            return not self.a.same_as(self.b)
        return Expr.__bool__(self)


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class UnaryOp(Expr):
    """``neg``, logical ``not`` or bitwise ``~``."""

    op: str
    a: Expr
    dtype: DType

    def children(self) -> tuple[Expr, ...]:
        return (self.a,)

    def structural_key(self) -> tuple:
        return ("un", self.op, self.a.structural_key())


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class Select(Expr):
    """``T.if_then_else(cond, t, f)``."""

    cond: Expr
    t: Expr
    f: Expr
    dtype: DType

    def children(self) -> tuple[Expr, ...]:
        return (self.cond, self.t, self.f)

    def structural_key(self) -> tuple:
        return ("sel", self.cond.structural_key(), self.t.structural_key(), self.f.structural_key())


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class Cast(Expr):
    """Conversion of ``a`` to ``dtype``."""

    a: Expr
    dtype: DType

    def children(self) -> tuple[Expr, ...]:
        return (self.a,)

    def structural_key(self) -> tuple:
        return ("cast", self.dtype.name, self.a.structural_key())


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class Call(Expr):
    """An intrinsic by name: a math function (``MATH_FUNCS``), an integer function
    (``INT_FUNCS``), IEEE-rounded arithmetic (``IEEE_FUNCS``, the mode in the name:
    ``ieee_add.rz``), ``reinterpret`` (the bits of its argument read as ``dtype``), the random
    draw ``RNG_FUNC``, the approximate reciprocal ``FAST_RCP`` or a lane of a packed operation
    (``core_ir.packed``: ``add2.0``)."""

    name: str
    args: tuple[Expr, ...]
    dtype: DType

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def structural_key(self) -> tuple:
        return ("call", self.name, tuple(a.structural_key() for a in self.args), self.dtype.name)


class Element(Expr):
    """Base of the reads of one buffer element, ``buffer[indices]``."""

    __slots__ = ()
    buffer: Buffer
    indices: tuple[Expr, ...]

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.buffer.dtype

    def children(self) -> tuple[Expr, ...]:
        return self.indices

    def element_key(self) -> tuple:
        return id(self.buffer), tuple(i.structural_key() for i in self.indices)


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class Load(Element):
    """``buffer[indices]``: one element of a buffer."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    loc: SourceLoc | None = field(default=None, compare=False)

    def structural_key(self) -> tuple:
        return ("load", *self.element_key())


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class AtomicLoad(Element):
    """``T.atomic_load(buffer[indices], memory_order=order)``: one element of a global or shared
    buffer read atomically. Not a ``Load``: passes that rebuild or merge plain loads (copy
    vectorization, pipelining) must not turn it into one."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    order: str
    loc: SourceLoc | None = field(default=None, compare=False)

    def structural_key(self) -> tuple:
        return ("atomic_load", *self.element_key(), self.order)


#: the read-modify-write kinds ``T.atomic_*(..., return_prev=True)`` takes
FETCH_KINDS = ("add", "max", "min")


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class AtomicFetch(Element):
    """``T.atomic_<kind>(buffer[indices], value, return_prev=True)``: atomically combines
    ``value`` (already of the buffer's dtype) into one element of a global or shared buffer, and
    is the element's value before. It has a side effect, so it stands only as the whole ``init``
    of the ``Alloc`` of a ``var`` buffer (the frontend puts it there; ``verify`` checks it):
    evaluated once, where that statement runs. Passes must not copy, fold or move it."""

    kind: str
    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr
    loc: SourceLoc | None = field(default=None, compare=False)

    def children(self) -> tuple[Expr, ...]:
        return (*self.indices, self.value)

    def structural_key(self) -> tuple:
        return ("atomic_fetch", self.kind, *self.element_key(), self.value.structural_key())


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class ThreadIndex(Expr):
    """``T.get_thread_binding(dim)``: the index of the executing thread along dimension ``dim``
    (0, 1, 2: x, y, z) of the block shape ``T.Kernel(threads=...)``. Its value differs between the
    threads of a block (see ``core_ir.uniformity``)."""

    dim: int
    dtype: DType = dtypes.int32

    def structural_key(self) -> tuple:
        return ("thread", self.dim)


#: Warp-collective operations (``WarpOp.op``): shuffles take ``(value, lane or offset)``, the
#: reductions, votes and the matches ``(value)``, ``activemask`` and ``elect_sync`` nothing.
SHUFFLE_OPS = ("shfl_sync", "shfl_xor", "shfl_down", "shfl_up")
WARP_REDUCE_OPS = ("sum", "max", "min", "bitand", "bitor")
VOTE_OPS = ("any_sync", "all_sync", "ballot_sync", "activemask")
#: ``match_any_sync``: the uint32 mask of the lanes whose value equals the caller's, bit for bit;
#: ``match_all_sync``: the full mask when every lane of the warp holds the same value, else 0;
#: ``elect_sync``: true in one lane of the warp (the lowest; ``T.shuffle_elect``'s per-warp part)
MATCH_OPS = ("match_any_sync", "match_all_sync", "elect_sync")
#: Barriers of the whole block that vote (``__syncthreads_count/and/or``): ``(predicate)``, a bool;
#: the int32 result (the count of threads whose predicate holds, or 1 / 0) is the same in every
#: thread. ``WarpOp.width`` is 0 for them.
BLOCK_VOTE_OPS = ("syncthreads_count", "syncthreads_and", "syncthreads_or")
WARP_SIZE = 32


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class WarpOp(Expr):
    """A warp-collective operation: every lane of a warp of 32 threads executes it together and
    reads the others' operands. ``op`` is one of ``SHUFFLE_OPS`` (``width``: the lanes split into
    groups of ``width``), ``warp_reduce_<kind>`` for the ``WARP_REDUCE_OPS`` or one of ``VOTE_OPS``
    and ``MATCH_OPS``; or, collective over the whole block, one of ``BLOCK_VOTE_OPS``.

    Not a pure function of its operands: passes must not fold it, merge it with another one,
    hoist it out of a loop or move it across control flow."""

    op: str
    args: tuple[Expr, ...]
    width: int
    dtype: DType

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def structural_key(self) -> tuple:
        return ("warp", self.op, tuple(a.structural_key() for a in self.args), self.width, self.dtype.name)


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class ClusterRank(Expr):
    """``T.block_rank_in_cluster()``: the executing block's rank in its thread-block cluster
    (``T.Kernel(..., cluster_dims=...)``), x fastest; 0 without clusters. The same in every thread
    of a block."""

    dtype: DType = dtypes.uint32
    loc: SourceLoc | None = field(default=None, compare=False)

    def structural_key(self) -> tuple:
        return ("cluster_rank",)


@dataclass(frozen=True, eq=False, slots=True, repr=False)
class ExternCall(Expr):
    """``T.call_extern(dtype, name, *args)``: a call of the device function ``name`` that
    ``T.import_source`` code (or the backend's headers) defines. ``void`` calls (TileLang's dtype
    ``"void"`` / ``"handle"``) have no value and stand only in ``T.evaluate``.

    Not a pure function: passes must not fold it, merge it with another call (its structural
    key is its identity), hoist it out of a loop or drop it."""

    name: str
    args: tuple[Expr, ...]
    dtype: DType
    void: bool = False
    loc: SourceLoc | None = field(default=None, compare=False)

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def structural_key(self) -> tuple:
        return ("extern", self.name, id(self))


# ---- construction helpers ------------------------------------------------------------------

def const(value: Any, dtype: DType | str | None = None) -> Const:
    """A literal; the dtype defaults to int32 (int64 when it does not fit), float32 or bool."""
    if dtype is not None:
        dt = dtypes.as_dtype(dtype)
    elif isinstance(value, bool):
        dt = dtypes.bool_
    elif isinstance(value, int):
        dt = dtypes.int32 if -(2**31) <= value < 2**31 else dtypes.int64
    elif isinstance(value, float):
        dt = dtypes.float32
    else:
        raise TileLangTypeError(f"cannot make a constant from {value!r}")
    return Const(_coerce(value, dt), dt)


def _coerce(value: Any, dt: DType) -> int | float | bool:
    if dt.is_bool:
        return bool(value)
    if dt.is_int:
        return int(value)
    return float(value)


def is_py_scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float)) or type(value).__module__ == "numpy" and hasattr(value, "item")


def convert(value: Any, like: DType | None = None) -> Expr:
    """Turn a Python scalar (or a ``var``-scope buffer, read as its value) into an ``Expr``.

    ``like`` gives the dtype a Python literal takes when it meets an expression.
    """
    if isinstance(value, Expr):
        return value
    as_expr = getattr(value, "as_expr", None)
    if as_expr is not None:
        return as_expr()
    if is_py_scalar(value):
        if hasattr(value, "item"):
            value = value.item()
        if like is not None and not isinstance(value, bool):
            if like.is_float or (like.is_int and isinstance(value, int)):
                return Const(_coerce(value, like), like)
        return const(value)
    raise TileLangTypeError(
        f"cannot use {type(value).__name__} value {value!r} in a kernel expression",
        loc=caller_loc(),
        hint=_tuple_hint(value) or "kernel expressions take numbers, loop/block indices, buffer elements and T.* calls",
    )


def _tuple_hint(value: Any) -> str | None:
    """A tuple of index variables is what one name bound to several loop or block indices holds."""
    if isinstance(value, tuple) and value and all(isinstance(v, Var) for v in value):
        return (f"this name holds {len(value)} index variables: unpack them, `with T.Kernel(gx, gy) as (bx, by)` / "
                "`for i, j in T.Parallel(m, n)`, or index the tuple (bx[0])")
    return None


def cast(value: Any, dtype: DType | str) -> Expr:
    """``T.cast(value, dtype)``."""
    dt = dtypes.as_dtype(dtype)
    e = convert(value)
    if e.dtype == dt:
        return e
    if isinstance(e, Const):
        return Const(_coerce(e.value, dt), dt)
    return Cast(e, dt)


def _operands(a: Any, b: Any) -> tuple[Expr, Expr]:
    a_is_expr = isinstance(a, Expr) or hasattr(a, "as_expr")
    b_is_expr = isinstance(b, Expr) or hasattr(b, "as_expr")
    if a_is_expr and not b_is_expr:
        ea = convert(a)
        return ea, convert(b, ea.dtype)
    if b_is_expr and not a_is_expr:
        eb = convert(b)
        return convert(a, eb.dtype), eb
    return convert(a), convert(b)


_FOLD = {
    "+": lambda x, y: x + y,
    "-": lambda x, y: x - y,
    "*": lambda x, y: x * y,
    "min": min,
    "max": max,
    "==": lambda x, y: x == y,
    "!=": lambda x, y: x != y,
    "<": lambda x, y: x < y,
    "<=": lambda x, y: x <= y,
    ">": lambda x, y: x > y,
    ">=": lambda x, y: x >= y,
    "and": lambda x, y: bool(x) and bool(y),
    "or": lambda x, y: bool(x) or bool(y),
}


def fold_int(op: str, x: int, y: int) -> int | None:
    """``x <op> y`` on Python integers, or ``None`` where the operation has no value to fold to
    (division by zero, a shift count outside [0, 64), a negative power). ``/`` truncates toward
    zero (C division; ``arith.trunc_div``, inlined: arith imports numpy)."""
    if op in ("//", "%", "/") and y == 0:
        return None
    if op in ("<<", ">>") and not 0 <= y < 64:
        return None
    if op == "/":
        q = abs(x) // abs(y)
        return q if (x >= 0) == (y >= 0) else -q
    fn = _INT_FOLD.get(op)
    return None if fn is None or (op == "**" and y < 0) else fn(x, y)


_INT_FOLD = {
    "+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y, "//": lambda x, y: x // y,
    "%": lambda x, y: x % y, "min": min, "max": max, "&": lambda x, y: x & y, "|": lambda x, y: x | y,
    "^": lambda x, y: x ^ y, "<<": lambda x, y: x << y, ">>": lambda x, y: x >> y, "**": lambda x, y: x**y,
}


def binary(op: str, a: Any, b: Any) -> Expr:
    """Build ``a <op> b`` with dtype promotion, explicit casts and constant folding."""
    ea, eb = _operands(a, b)
    if op in LOGIC_OPS:
        ea, eb = cast(ea, dtypes.bool_), cast(eb, dtypes.bool_)
        dt = dtypes.bool_
    elif op in ("&", "|", "^") and ea.dtype.is_bool and eb.dtype.is_bool:
        op = {"&": "and", "|": "or", "^": "!="}[op]
        dt = dtypes.bool_
    else:
        common = promote(ea.dtype, eb.dtype)
        if op in BIT_OPS and not common.is_int:
            raise TileLangTypeError(
                f"bitwise `{op}` needs integer operands, got {ea.dtype} and {eb.dtype}",
                loc=caller_loc(),
            )
        ea, eb = cast(ea, common), cast(eb, common)
        dt = dtypes.bool_ if op in COMPARE_OPS else common
    if isinstance(ea, Const) and isinstance(eb, Const):
        x, y = ea.value, eb.value
        folded: Any = None
        if op in _FOLD:
            folded = _FOLD[op](x, y)
        elif ea.dtype.is_int:
            folded = fold_int(op, int(x), int(y))
        elif op == "/" and y != 0:
            folded = x / y
        if folded is not None:
            return Const(_coerce(folded, dt), dt)
    return BinOp(op, ea, eb, dt)


def unary(op: str, a: Any) -> Expr:
    ea = convert(a)
    if op == "not":
        ea = cast(ea, dtypes.bool_)
    elif op == "~" and not ea.dtype.is_int:
        raise TileLangTypeError(f"bitwise `~` needs an integer operand, got {ea.dtype}", loc=caller_loc())
    if isinstance(ea, Const):
        if op == "neg":
            return Const(-ea.value, ea.dtype)
        if op == "not":
            return Const(not ea.value, dtypes.bool_)
        if op == "~" and ea.dtype.is_int:
            return Const(~int(ea.value), ea.dtype)
    return UnaryOp(op, ea, ea.dtype)


def call(name: str, *args: Any) -> Expr:
    """A math intrinsic; integer arguments of float functions are cast to float32."""
    arity = MATH_FUNCS.get(name)
    if arity is None or arity != len(args):
        raise TileLangSyntaxError(f"unknown math function {name}/{len(args)}", loc=caller_loc())
    exprs = [convert(a) for a in args]
    if len(exprs) == 2:
        exprs = list(_operands(args[0], args[1]))
        common = promote(exprs[0].dtype, exprs[1].dtype)
        exprs = [cast(e, common) for e in exprs]
    if name in ("abs",) and exprs[0].dtype.is_int:
        dt = exprs[0].dtype
    else:
        exprs = [e if e.dtype.is_float else cast(e, dtypes.float32) for e in exprs]
        dt = dtypes.bool_ if name in BOOL_RESULT_FUNCS else exprs[0].dtype
    if all(isinstance(e, Const) for e in exprs) and name in _CONST_MATH:
        return Const(_coerce(_CONST_MATH[name](*[e.value for e in exprs]), dt), dt)
    return Call(name, tuple(exprs), dt)


_CONST_MATH = {
    "exp": math.exp, "exp2": lambda x: 2.0**x, "log": math.log, "log2": math.log2,
    "sqrt": math.sqrt, "abs": abs, "floor": math.floor, "ceil": math.ceil,
    "nearbyint": lambda x: float(round(x)) if math.isfinite(x) else x,
}


def ieee_call(name: str, args: tuple[Any, ...], mode: Any) -> Expr:
    """``T.ieee_add(x, y, rounding_mode)`` and the other ``IEEE_FUNCS``: float32 or float64
    operands (integers become float32), correctly rounded in ``mode``."""
    if mode not in ROUNDING_MODES:
        raise TileLangSyntaxError(f"T.{name} rounding_mode={mode!r}", loc=caller_loc(),
                                  hint=f"use one of {', '.join(repr(m) for m in ROUNDING_MODES)}")
    exprs = [convert(a) for a in args if isinstance(a, Expr) or hasattr(a, "as_expr")]
    common = exprs[0].dtype if exprs else dtypes.float32
    for e in exprs[1:]:
        common = promote(common, e.dtype)
    if common.is_int or common.is_bool:
        common = dtypes.float32
    allowed = ("float32",) if name == "ieee_frsqrt" else ("float32", "float64")
    if common.name not in allowed:
        raise TileLangTypeError(f"T.{name} computes in {' or '.join(allowed)}, got {common}", loc=caller_loc(),
                                hint="cast the operands with T.cast(x, T.float32)")
    operands = tuple(cast(convert(a, common), common) for a in args)
    return Call(f"{name}.{mode}", operands, common)


def fast_rcp(x: Any) -> Expr:
    """``T.fast_rcp(x)``: ``1 / x`` of a float32 ``x`` (integers become float32), approximate."""
    e = convert(x)
    if e.dtype.is_int or e.dtype.is_bool:
        e = cast(e, dtypes.float32)
    if e.dtype != dtypes.float32:
        raise TileLangTypeError(f"T.fast_rcp computes in float32, got {e.dtype}", loc=caller_loc(),
                                hint="cast the operand with T.cast(x, T.float32)")
    return Call(FAST_RCP, (e,), dtypes.float32)


def ieee_parts(name: str) -> tuple[str, str] | None:
    """``(function, rounding mode)`` of an IEEE-rounded ``Call`` name, else ``None``."""
    base, _, mode = name.partition(".")
    return (base, mode) if base in IEEE_FUNCS else None


def int_call(name: str, x: Any) -> Expr:
    """``T.popcount(x)`` / ``T.clz(x)`` on an integer ``x``."""
    e = convert(x)
    if not e.dtype.is_int:
        raise TileLangTypeError(f"T.{name} needs an integer operand, got {e.dtype}", loc=caller_loc())
    dt = e.dtype if name == "popcount" else dtypes.int32
    if isinstance(e, Const):
        bits = int(e.value) & ((1 << e.dtype.bits) - 1)
        return Const(bin(bits).count("1") if name == "popcount" else e.dtype.bits - bits.bit_length(), dt)
    return Call(name, (e,), dt)


def reinterpret(dtype: DType | str, value: Any) -> Expr:
    """``T.reinterpret(dtype, value)``: the bits of ``value`` read as ``dtype`` of the same width."""
    dt = dtypes.as_dtype(dtype)
    e = convert(value)
    if e.dtype.bits != dt.bits or dt.is_bool or e.dtype.is_bool:
        raise TileLangTypeError(
            f"T.reinterpret of a {e.dtype} value as {dt}: the widths differ ({e.dtype.bits} and {dt.bits} bits)",
            loc=caller_loc(),
            hint="reinterpret between dtypes of the same width (e.g. uint16 and float16); T.cast converts values",
        )
    if e.dtype == dt:
        return e
    if isinstance(e, Const):
        bits = _bits_of(e.value, e.dtype)
        if bits is not None:
            folded = _from_bits(bits, dt)
            if folded is not None:
                return Const(folded, dt)
    return Call("reinterpret", (e,), dt)


_STRUCT_FLOATS = {"float16": "e", "float32": "f", "float64": "d"}


def _bits_of(value: int | float | bool, dt: DType) -> int | None:
    """The bit pattern of a constant, or ``None`` for formats folding leaves to the backends."""
    if dt.is_int:
        return int(value) & ((1 << dt.bits) - 1)
    fmt = _STRUCT_FLOATS.get(dt.name)
    if fmt is None:
        return None
    return int.from_bytes(struct.pack("<" + fmt, float(value)), "little")


def _from_bits(bits: int, dt: DType) -> int | float | None:
    if dt.is_int:
        return bits - (1 << dt.bits) if dt.kind == "int" and bits >> (dt.bits - 1) else bits
    fmt = _STRUCT_FLOATS.get(dt.name)
    if fmt is None:
        return None
    return struct.unpack("<" + fmt, bits.to_bytes(dt.bytes, "little"))[0]


def select(cond: Any, t: Any, f: Any) -> Expr:
    """``T.if_then_else``: ``t`` where ``cond`` holds, else ``f``."""
    c = cast(convert(cond), dtypes.bool_)
    et, ef = _operands(t, f)
    common = promote(et.dtype, ef.dtype)
    et, ef = cast(et, common), cast(ef, common)
    if isinstance(c, Const):
        return et if c.value else ef
    return Select(c, et, ef, common)


def as_int(value: Any) -> int | None:
    """The Python int a value or constant expression stands for, or ``None`` when symbolic."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, Const) and value.dtype.is_int:
        return int(value.value)
    if hasattr(value, "__index__") and not isinstance(value, Expr):
        return int(value)
    return None


def free_vars(e: Expr) -> set[Var]:
    """The ``Var``s that occur in ``e`` (buffer indices included)."""
    out: set[Var] = set()
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, Var):
            out.add(node)
        else:
            stack.extend(node.children())
    return out


def contains(e: Expr, kinds: type | tuple[type, ...]) -> bool:
    """Whether a node of ``kinds`` (e.g. ``WarpOp``, ``Element``) occurs in ``e``."""
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, kinds):
            return True
        stack.extend(node.children())
    return False
