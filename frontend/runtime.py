"""``__tlx__``: what the rewritten kernel code calls (see ``capture.py`` for the rewrites).

Each helper keeps Python's meaning for Python values, so meta-programming folds at trace time
(``if causal:`` runs one branch, ``a and b`` short-circuits), and builds IR for symbolic values
(an ``if`` on ``bx * 64 + i < n`` becomes an ``If`` node with both branches traced once).
"""

from __future__ import annotations

import builtins
import operator
import types
from collections.abc import Callable, Iterator
from typing import Any

from ..core_ir import dtypes
from ..core_ir import expr as E
from ..core_ir.buffer import Buffer
from ..core_ir.dtypes import DType
from ..core_ir.errors import TileLangSyntaxError, TileLangTypeError
from ..core_ir.source import caller_loc
from ..core_ir.stmt import Alloc, If, While
from . import builder as B
from . import pointers
from .frames import IRLoop, serial_loop
from .ref import Ref
from .spec import TensorSpec


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def is_symbolic(x: Any) -> bool:
    """Whether ``x`` is a value only known when the kernel runs."""
    if isinstance(x, E.Expr):
        return not isinstance(x, E.Const)
    return (type(x) is Buffer and x.scope == "var") or isinstance(x, Ref)


def _as_bool_expr(x: Any) -> E.Expr:
    return E.cast(E.convert(x), dtypes.bool_)


class IfBlock:
    """``if`` / ``else`` on a Python value (folds) or a symbolic one (an ``If`` node)."""

    __slots__ = ("cond", "symbolic", "builder", "depth", "frame", "then_stmt", "loc")

    def __init__(self, cond: Any, ir: bool = False) -> None:
        """``ir``: an ``If`` node even for a Python value (a ``with`` body cannot be skipped)."""
        self.symbolic = ir or is_symbolic(cond)
        self.frame: B.Frame | None = None
        self.then_stmt: Any = None
        if self.symbolic:
            self.loc = caller_loc()
            b = B.require("an `if` on a symbolic value")
            if not b.kernel_open:
                _outside_kernel(b, "an `if`", cond)
            self.builder = b
            self.cond = _as_bool_expr(cond)
            self.depth = b.depth
        else:
            self.cond = cond

    def __enter__(self) -> IfBlock:
        return self

    def then(self) -> bool:
        if not self.symbolic:
            return bool(self.cond)
        self.frame = self.builder.push("if", self.loc)
        return True

    def orelse(self) -> bool:
        if not self.symbolic:
            return not self.cond
        assert self.frame is not None
        self.then_stmt = self.builder.pop(self.frame)
        self.frame = self.builder.push("if", self.loc)
        return True

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if not self.symbolic:
            return False
        b = self.builder
        if exc_type is not None:
            b.unwind(self.depth)
            return False
        assert self.frame is not None
        last = b.pop(self.frame)
        if self.then_stmt is None:
            b.emit(If(self.cond, last, None, loc=self.loc))
        else:
            b.emit(If(self.cond, self.then_stmt, last, loc=self.loc))
        return False


def _outside_kernel(b: B.Builder, what: str, value: Any) -> None:
    if b.mode == "probe":
        raise TileLangSyntaxError(
            f"{what} on the symbolic value `{value}` before every tensor parameter is annotated",
            loc=caller_loc(),
            hint="annotate the tensor parameters (`A: T.Tensor((M, K), dtype)`) at the top of the function, "
            "before Python code that depends on T.const values",
        )
    raise TileLangSyntaxError(
        f"{what} on the symbolic value `{value}` outside `with T.Kernel(...)`",
        loc=caller_loc(),
        hint="branch on symbolic values inside the kernel body; outside it only Python values can be used",
    )


class PyLoop:
    """A ``for`` over a Python iterable: unrolled at trace time."""

    __slots__ = ("it", "depth")

    def __init__(self, it: Any, depth: int) -> None:
        self.it = it
        self.depth = depth

    def __iter__(self) -> Iterator[Any]:
        return iter(self.it)


class WhileLoop:
    """``while``: a Python loop on a Python condition, a ``While`` node on a symbolic one."""

    __slots__ = ("has_else", "state", "cond", "frame", "builder", "depth", "loc")

    def __init__(self, has_else: bool) -> None:
        self.has_else = has_else
        self.state = 0  # 0: not tested yet, 1: Python loop, 2: symbolic loop (body traced), 3: done
        b = B.current()
        self.builder = b
        self.depth = b.depth if b is not None else 0

    def test(self, cond: Any) -> bool:
        if self.state == 0:
            if not is_symbolic(cond):
                self.state = 1
                return bool(cond)
            self.loc = caller_loc()
            b = B.require("a `while` on a symbolic value")
            if not b.kernel_open:
                _outside_kernel(b, "a `while`", cond)
            if self.has_else:
                raise TileLangSyntaxError(
                    "`while ... else` on a symbolic condition is not supported", loc=self.loc,
                    hint="move the `else` body after the loop",
                )
            self.builder = b
            self.cond = _as_bool_expr(cond)
            self.state = 2
            self.frame = b.push("while", self.loc, "while")
            return True
        if self.state == 1:
            if is_symbolic(cond):
                raise TileLangSyntaxError(
                    f"the `while` condition started as a Python value and became symbolic (`{cond}`)",
                    loc=caller_loc(),
                    hint="make the condition symbolic from the start (e.g. a T.alloc_var flag)",
                )
            return bool(cond)
        if self.state == 2:
            body = self.builder.pop(self.frame)
            self.builder.emit(While(self.cond, body, loc=self.loc))
            self.state = 3
        return False


_INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
    "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow, "<<": operator.ilshift,
    ">>": operator.irshift, "|": operator.ior, "^": operator.ixor, "&": operator.iand, "@": operator.imatmul,
}
_PLAIN: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "<<": operator.lshift,
    ">>": operator.rshift, "|": operator.or_, "^": operator.xor, "&": operator.and_,
}
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
    ">=": operator.ge, "is": operator.is_, "is not": operator.is_not,
    "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
}


def _short_circuit(op: str, first: Any, rest: tuple[Callable[[], Any], ...]) -> Any:
    """``first and <rest...>`` (``op`` "and") or ``first or <rest...>`` (``op`` "or"), each later
    operand a thunk: Python values decide as in Python (a later operand is not evaluated once the
    result is known); symbolic ones join into one IR expression."""
    decisive = op == "or"  # the truth value that ends the chain
    result = first
    for thunk in rest:
        if not is_symbolic(result):
            if bool(result) == decisive:
                return result
            result = thunk()
            continue
        rhs = thunk()
        if is_symbolic(rhs):
            result = E.binary(op, result, rhs)
        elif bool(rhs) == decisive:
            return decisive
        else:
            result = _as_bool_expr(result)
    return result


def _is_value(x: Any) -> bool:
    """Whether ``x`` can be stored into a ``T.alloc_var`` (or through a ``T.Ref``)."""
    return isinstance(x, (E.Expr, Ref)) or (type(x) is Buffer and x.scope == "var") or E.is_py_scalar(x)


class Runtime:
    """The object the rewritten code knows as ``__tlx__``."""

    UNSET = UNSET

    # ---- control flow -----------------------------------------------------------------------
    @staticmethod
    def if_(cond: Any) -> IfBlock:
        return IfBlock(cond)

    @staticmethod
    def loop(it: Any, names: Any, has_else: bool) -> Any:
        if isinstance(it, IRLoop):
            if has_else:
                raise TileLangSyntaxError(
                    f"`for ... else` over {it.label} is not supported", loc=caller_loc(),
                    hint="move the `else` body after the loop",
                )
            it.names = names
            return it
        b = B.current()
        return PyLoop(it, b.depth if b is not None else 0)

    @staticmethod
    def range_(rng: Any, *args: Any) -> Any:
        if rng is builtins.range:
            b = B.current()
            if b is not None and b.kernel_open:
                return serial_loop("serial", "range", args)
            if any(is_symbolic(a) for a in args):
                if b is not None:
                    _outside_kernel(b, "a `range`", next(a for a in args if is_symbolic(a)))
                raise TileLangSyntaxError("`range` over a symbolic value outside a kernel", loc=caller_loc())
        return rng(*args)

    @staticmethod
    def while_(has_else: bool) -> WhileLoop:
        return WhileLoop(has_else)

    @staticmethod
    def brk(loop: Any, word: str) -> bool:
        """``break`` / ``continue`` of ``loop``: an IR loop's becomes a ``Jump`` (and the trace goes
        on through the rest of the body); a Python loop's is taken, so True."""
        if isinstance(loop, IRLoop) or (isinstance(loop, WhileLoop) and loop.state == 2):
            B.require_kernel(f"`{word}` in {getattr(loop, 'label', 'a `while` loop')}").jump(word, caller_loc())
            return False
        b = B.current()
        if b is not None and b.control_frames_above(loop.depth):
            raise TileLangSyntaxError(
                f"`{word}` under a symbolic `if` or an IR loop leaves a Python loop at trace time",
                loc=caller_loc(),
                hint="a Python loop is unrolled when the kernel is built, so it cannot stop on a value only "
                "known at run time; use an IR loop with an `if` around the rest of its body",
            )
        return True

    @staticmethod
    def ret(value: Any) -> Any:
        b = B.current()
        if b is not None and b.control_frames_above(b.fn_bases[-1]):
            raise TileLangSyntaxError(
                "`return` inside a symbolic `if` or an IR loop is not supported",
                loc=caller_loc(),
                hint="return at the end of the function; inside the kernel assign results to buffers",
            )
        return value

    @staticmethod
    def named(ctx: Any, names: Any) -> Any:
        if hasattr(type(ctx), "_tlx_names"):
            ctx._tlx_names = names
        return ctx

    # ---- assignments ------------------------------------------------------------------------
    @staticmethod
    def bind(old: Any, new: Any, name: str) -> Any:
        b = B.current()
        if b is None:
            return new
        if isinstance(new, Ref):
            new = new.claim()
        if isinstance(old, Ref) and not isinstance(new, Ref) and _is_value(new):
            old.store(new)
            return old
        if type(old) is Buffer and old.scope == "var" and type(new) is not Buffer and _is_value(new):
            b.store(old, (E.const(0),), E.cast(new, old.dtype))
            return old
        if type(new) is Buffer:
            b.name_buffer(new, name)
        elif isinstance(new, E.Load) and new.buffer.scope == "var":  # e.g. the variable of a return_prev atomic
            b.name_buffer(new.buffer, name)
        elif b.kernel_open and isinstance(new, E.Expr) and E.contains(new, E.WarpOp):
            # TileLang evaluates an assigned expression where it is assigned (a let binding); for a warp
            # operation that matters (its lanes must all reach it), so it is kept in a variable
            var = b.new_buffer(name, (1,), new.dtype, "var", caller_loc())
            b.emit(Alloc(var, new, loc=caller_loc()))
            return var
        return new

    @staticmethod
    def name_all(value: Any, names: tuple[str, ...]) -> Any:
        b = B.current()
        if b is not None and isinstance(value, (tuple, list)) and len(value) == len(names):
            for v, n in zip(value, names):
                b.name_buffer(v, n)
        return value

    @staticmethod
    def aug(old: Any, op: str, value: Any) -> Any:
        is_var = type(old) is Buffer and old.scope == "var"
        if is_var or isinstance(old, Ref):
            fn = _PLAIN.get(op)
            if fn is None:
                what = "T.alloc_var" if is_var else "T.Ref"
                raise TileLangSyntaxError(f"`{op}=` on a {what} is not supported", loc=caller_loc())
            if isinstance(old, Ref):
                old.store(fn(old.as_expr(), value))
                return old
            b = B.require(f"`{old.name} {op}= ...`")
            b.store(old, (E.const(0),), E.cast(fn(old.as_expr(), value), old.dtype))
            return old
        return _INPLACE[op](old, value)

    @staticmethod
    def annotate(old: Any, ann: Any, name: str) -> Any:
        """``name: ann`` without a value: binds a parameter that the body annotates."""
        b = B.current()
        if b is None:
            return UNSET
        if isinstance(old, B.Slot):
            loc = caller_loc()
            if isinstance(ann, TensorSpec):
                value: Any = Buffer(name, ann.shape, ann.dtype, ann.scope, loc, ann.strides)
            elif pointers.is_pointer_annotation(ann):
                value = pointers.declare(b, name, ann, loc)
            elif isinstance(ann, DType) or (isinstance(ann, type) and ann in (int, float, bool)):
                value = E.Var(name, ann if isinstance(ann, DType) else dtypes.as_dtype(ann), loc)
            else:
                raise TileLangSyntaxError(
                    f"parameter `{name}` is annotated with {ann!r}, which is not a tensor type or a dtype",
                    loc=loc,
                    hint=f"write `{name}: T.Tensor((M, K), T.float16)` for a tensor or `{name}: T.int32` for a scalar",
                )
            b.bind_slot(old, value)
            return value
        if isinstance(ann, TensorSpec):
            if old is UNSET:
                raise TileLangSyntaxError(
                    f"`{name}: T.Tensor(...)` annotates `{name}`, which is not a parameter of `{b.name}`",
                    loc=caller_loc(),
                    hint="tensor annotations without a value declare parameters; declare an output with "
                    f"`{name} = T.empty(shape, dtype)` or a tile with T.alloc_shared / T.alloc_fragment",
                )
            if type(old) is Buffer:
                return UNSET  # already typed in the signature
            raise TileLangSyntaxError(
                f"`{name}: T.Tensor(...)`: parameter `{name}` was passed {type(old).__name__} {old!r}, not a tensor",
                loc=caller_loc(),
                hint=f"pass a torch tensor for `{name}`",
            )
        return UNSET

    @staticmethod
    def ann_assign(ann: Any, value: Any, name: str) -> Any:
        """``name: ann = value``; a dtype annotation inside a kernel declares a T.alloc_var."""
        if isinstance(ann, DType):
            b = B.current()
            if b is not None and b.kernel_open:
                from .language import alloc_var

                var = alloc_var(ann, value)
                b.name_buffer(var, name)
                return var
            return E.cast(value, ann) if _is_value(value) else value
        b = B.current()
        if b is not None and type(value) is Buffer:
            b.name_buffer(value, name)
        return value

    # ---- expressions ------------------------------------------------------------------------
    @staticmethod
    def and_(first: Any, *rest: Callable[[], Any]) -> Any:
        return _short_circuit("and", first, rest)

    @staticmethod
    def or_(first: Any, *rest: Callable[[], Any]) -> Any:
        return _short_circuit("or", first, rest)

    @staticmethod
    def not_(x: Any) -> Any:
        if is_symbolic(x):
            return E.unary("not", x)
        return not x

    @staticmethod
    def cmp(op: str, a: Any, b: Any) -> Any:
        """``a == b`` / ``a != b``, reading a ``T.alloc_var`` or a ``T.Ref`` as its value."""
        if (type(a) is Buffer and a.scope == "var") or isinstance(a, Ref):
            a = a.as_expr()
        if (type(b) is Buffer and b.scope == "var") or isinstance(b, Ref):
            b = b.as_expr()
        return _COMPARE[op](a, b)

    @staticmethod
    def chain(left: Any, ops: tuple[str, ...], *rights: Callable[[], Any]) -> Any:
        sym: Any = None
        last: Any = True
        cur = left
        for op, thunk in zip(ops, rights):
            right = thunk()
            r = Runtime.cmp(op, cur, right)
            if is_symbolic(r):
                sym = r if sym is None else E.binary("and", sym, r)
            elif not r:
                return r
            else:
                last = r
            cur = right
        return sym if sym is not None else last

    @staticmethod
    def ifexp(cond: Any, then: Callable[[], Any], other: Callable[[], Any]) -> Any:
        if is_symbolic(cond):
            t, f = then(), other()
            for v in (t, f):
                if not _is_value(v):
                    raise TileLangTypeError(
                        f"`x if c else y` on the symbolic condition `{E.convert(cond)}` needs scalar values, "
                        f"got {type(v).__name__} {v!r}",
                        loc=caller_loc(),
                        hint="only scalars can be selected at run time; for buffers, branch with an `if` statement",
                    )
            return E.select(cond, t, f)
        return then() if cond else other()


RUNTIME = Runtime()
RUNTIME_CELL = types.CellType(RUNTIME)
