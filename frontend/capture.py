"""Capture of a kernel function's source and its rewrite into builder calls.

Python never evaluates the annotation of a local variable, and an ``if`` on a symbolic value
cannot be traced through ``bool()``. So the frontend reads the function's source, rewrites the
constructs that need it into calls on the runtime helper ``__tlx__`` (``runtime.py``) and compiles
the result with the original file name and line numbers: every frame of the rewritten function
still names the user's ``file:line``, which is what ``caller_loc()`` reports in errors.

The rewrites (everything else runs as ordinary Python against IR objects):

========================================  ================================================
source                                    rewritten
========================================  ================================================
``if c: A else: B``                       ``with __tlx__.if_(c) as b:`` ``if b.then(): A``
                                          ``if b.orelse(): B`` (Python ``c`` folds)
``for t in it:``                          ``l = __tlx__.loop(it, names)`` ``for t in l:``
``for t in range(a, b):``                 ``range`` → ``__tlx__.range_(range, a, b)`` (IR loop)
``while c:``                              ``w = __tlx__.while_()`` ``while w.test(c):``
``break`` / ``continue``                  ``if __tlx__.brk(l, "break"): break`` (IR loop: a ``Jump``)
``x = v``                                 ``x = __tlx__.bind(<old x>, v, "x")``
``x += v``                                ``x = __tlx__.aug(x, "+", v)``
``A: T.Tensor(...)``                      binds parameter ``A`` (``__tlx__.annotate``)
``x: T.int32 = v``                        ``x = __tlx__.ann_assign(T.int32, v, "x")``
``return v``                              ``return __tlx__.ret(v)``
``a and b`` / ``a or b`` / ``not a``      ``__tlx__.and_(a, lambda: b)`` ...
``a < b < c``                             ``__tlx__.chain(a, ("<", "<"), lambda: b, ...)``
``x if c else y``                         ``__tlx__.ifexp(c, lambda: x, lambda: y)``
``with m as (a, b):``                     ``with __tlx__.named(m, ("a", "b")) as (a, b):``
========================================  ================================================

The rewritten code object is cached per function code object, so re-tracing (a classic factory
called with new arguments, an eager function called with new shapes) costs no parsing.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core_ir.errors import TileLangSyntaxError
from ..core_ir.source import SourceLoc, caller_loc

RT = "__tlx__"


@dataclass
class Source:
    """The parsed definition of a function, with line numbers of its file."""

    tree: ast.FunctionDef
    filename: str
    firstlineno: int
    text: str
    nested: bool  # parsed inside ``if 1:`` (see ``get_source``)
    offset: int

    def parse(self) -> ast.FunctionDef:
        """A fresh copy of the tree (the rewrite changes it in place)."""
        pad = "\n" * self.offset
        if self.nested:
            tree = ast.parse(pad + "if 1:\n" + self.text).body[0].body  # type: ignore[attr-defined]
        else:
            tree = ast.parse(pad + textwrap.dedent(self.text)).body
        return next(n for n in tree if isinstance(n, ast.FunctionDef))


_source_cache: dict[Any, Source] = {}
_code_cache: dict[Any, types.CodeType] = {}
_lock = threading.Lock()


def _no_source(fn: Any, why: str) -> TileLangSyntaxError:
    return TileLangSyntaxError(
        f"cannot read the source of kernel function `{getattr(fn, '__qualname__', fn)}` ({why})",
        loc=caller_loc(),
        hint="define kernel functions with `def` in a .py file (not in a lambda, exec or an interactive prompt)",
    )


def get_source(fn: Callable[..., Any]) -> Source:
    """Parse the definition of ``fn`` (cached per code object)."""
    code = fn.__code__
    key = (code.co_filename, code)
    found = _source_cache.get(key)
    if found is not None:
        return found
    if code.co_name == "<lambda>":
        raise _no_source(fn, "it is a lambda")
    try:
        lines, lnum = inspect.getsourcelines(fn)
    except (OSError, TypeError) as exc:
        raise _no_source(fn, str(exc)) from None
    text = "".join(lines)
    tree: ast.AST | None = None
    offset = lnum - 1  # blank lines in front make the parsed line numbers those of the file
    nested = False
    try:
        tree = ast.parse("\n" * offset + textwrap.dedent(text))
    except SyntaxError:
        # a multi-line string less indented than the def defeats dedent: nest it instead
        try:
            offset -= 1
            nested = True
            tree = ast.parse("\n" * offset + "if 1:\n" + text)
            tree.body = tree.body[0].body  # type: ignore[attr-defined]
        except SyntaxError as exc:
            raise _no_source(fn, f"its source does not parse: {exc.msg}") from None
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]  # type: ignore[attr-defined]
    if not defs or defs[0].name != code.co_name:
        raise _no_source(fn, "the source found does not define it")
    fdef = defs[0]
    if isinstance(fdef, ast.AsyncFunctionDef):
        raise TileLangSyntaxError(
            f"kernel function `{fdef.name}` is `async`", loc=SourceLoc(code.co_filename, fdef.lineno, fdef.name),
            hint="define it with a plain `def`",
        )
    src = Source(fdef, code.co_filename, fdef.lineno, text, nested, offset)
    with _lock:
        _source_cache[key] = src
    return src


# ---- the rewriter ----------------------------------------------------------------------------

def visible_names(fn: Callable[..., Any]) -> dict[str, Any]:
    """The names ``fn``'s body sees: its module's globals and the cells of its closure (to evaluate
    its string annotations, ``from __future__ import annotations``)."""
    ns: dict[str, Any] = dict(fn.__globals__)
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            ns[name] = cell.cell_contents
        except ValueError:  # a cell not yet assigned
            pass
    return ns


def _at(new: Any, old: ast.AST) -> Any:
    """Place ``new`` at the first line of ``old``, as a one-line span: Python reports a method
    call at the end line of its callee, so a span reaching further down would name a later line
    in tracebacks and in ``caller_loc()``."""
    new.lineno = new.end_lineno = old.lineno  # type: ignore[attr-defined]
    new.col_offset = old.col_offset  # type: ignore[attr-defined]
    new.end_col_offset = old.col_offset + 1
    return new


def _rt(attr: str) -> ast.expr:
    return ast.Attribute(value=ast.Name(id=RT, ctx=ast.Load()), attr=attr, ctx=ast.Load())


def _call(func: ast.expr, *args: ast.expr) -> ast.Call:
    return ast.Call(func=func, args=list(args), keywords=[])


def _rtcall(attr: str, *args: ast.expr) -> ast.Call:
    return _call(_rt(attr), *args)


def _lambda(body: ast.expr) -> ast.Lambda:
    return ast.Lambda(
        args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                           defaults=[]),
        body=body,
    )


def _name(id_: str, store: bool = False) -> ast.Name:
    return ast.Name(id=id_, ctx=ast.Store() if store else ast.Load())


def _const(value: Any) -> ast.Constant:
    return ast.Constant(value=value)


def _target_names(target: ast.expr) -> Any:
    """``"x"`` for a name target, ``("a", "b")`` for a tuple of names, else ``None``."""
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in target.elts):
        return tuple(e.id for e in target.elts)  # type: ignore[attr-defined]
    return None


_CMP = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
}
_BINOP = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^", ast.BitAnd: "&",
    ast.MatMult: "@",
}


class _Rewriter(ast.NodeTransformer):
    def __init__(self, filename: str, funcname: str) -> None:
        self.filename = filename
        self.funcname = funcname
        self.counter = 0
        self.loops: list[str] = []
        self.depth = 0  # function nesting: 1 = the kernel function itself

    def tmp(self, kind: str) -> str:
        self.counter += 1
        return f"__tlx_{kind}{self.counter}"

    def error(self, node: ast.AST, message: str, hint: str) -> TileLangSyntaxError:
        return TileLangSyntaxError(
            message, loc=SourceLoc(self.filename, getattr(node, "lineno", 0), self.funcname), hint=hint
        )

    @staticmethod
    def located(nodes: list[ast.stmt], at: ast.AST) -> list[ast.stmt]:
        """Give new statements the location of the one they replace (their new children get it
        from them through ``fix_missing_locations``)."""
        for n in nodes:
            if getattr(n, "lineno", None) is None:
                _at(n, at)
        return nodes

    # ---- functions --------------------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        if self.depth == 0:
            self.depth = 1
            node.decorator_list = []
            node.returns = None
            a = node.args
            for arg in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]:
                arg.annotation = None
            a.defaults = []
            a.kw_defaults = [None] * len(a.kwonlyargs)
            node.body = self.body(node.body)
            return node
        saved = self.loops
        self.loops = []
        self.depth += 1
        try:
            self.generic_visit(node)
        finally:
            self.depth -= 1
            self.loops = saved
        return node

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> Any:
        raise self.error(node, "`async def` inside a kernel is not supported", "use a plain `def` or @T.macro")

    visit_ClassDef = visit_FunctionDef  # type: ignore[assignment]

    def body(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in stmts:
            r = self.visit(s)
            if r is None:
                continue
            if isinstance(r, list):
                out.extend(r)
            else:
                out.append(r)
        return out or [_at(ast.Pass(), stmts[0])]

    def visit_Yield(self, node: ast.AST) -> Any:
        if self.depth > 1:  # a generator helper defined inside the kernel is fine
            return self.generic_visit(node)
        raise self.error(node, "a kernel function cannot be a generator (`yield`)",
                         "remove the `yield`; kernel code runs once, at trace time")

    visit_YieldFrom = visit_Await = visit_Yield  # type: ignore[assignment]

    def visit_AsyncFor(self, node: ast.AST) -> Any:
        raise self.error(node, "`async for` is not supported in a kernel", "use `for ... in T.serial(...)`")

    def visit_AsyncWith(self, node: ast.AST) -> Any:
        raise self.error(node, "`async with` is not supported in a kernel", "use a plain `with`")

    def visit_Return(self, node: ast.Return) -> Any:
        self.generic_visit(node)
        if self.depth == 1:
            node.value = _at(_rtcall("ret", node.value or _const(None)), node)
        return node

    # ---- control flow -----------------------------------------------------------------------
    def visit_If(self, node: ast.If) -> Any:
        node.test = self.visit(node.test)
        then_body = self.body(node.body)
        else_body = self.body(node.orelse) if node.orelse else []
        b = self.tmp("b")
        stmts: list[ast.stmt] = [ast.If(test=_call(ast.Attribute(_name(b), "then", ast.Load())), body=then_body,
                                        orelse=[])]
        if else_body:
            stmts.append(ast.If(test=_call(ast.Attribute(_name(b), "orelse", ast.Load())), body=else_body,
                                orelse=[]))
        with_ = ast.With(items=[ast.withitem(context_expr=_rtcall("if_", node.test),
                                             optional_vars=_name(b, store=True))], body=stmts)
        return self.located([with_], node)

    def loop_body(self, node: ast.For | ast.While, prefix: str) -> str:
        """Rewrite a loop's body (inside it, ``break``/``continue`` refer to a fresh name made from
        ``prefix``) and its ``else``; returns that name."""
        loop = self.tmp(prefix)
        self.loops.append(loop)
        try:
            node.body = self.body(node.body)
        finally:
            self.loops.pop()
        node.orelse = self.body(node.orelse) if node.orelse else []
        return loop

    def visit_For(self, node: ast.For) -> Any:
        node.iter = self.visit(node.iter)
        node.target = self.visit(node.target)
        loop = self.loop_body(node, "l")
        it = node.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and not it.keywords:
            it = _at(_call(_rt("range_"), _name("range"), *it.args), it)
        assign = ast.Assign(targets=[_name(loop, store=True)],
                            value=_rtcall("loop", it, _const(_target_names(node.target)), _const(bool(node.orelse))))
        node.iter = _name(loop)
        return self.located([assign, node], node)

    def visit_While(self, node: ast.While) -> Any:
        node.test = self.visit(node.test)
        loop = self.loop_body(node, "w")
        assign = ast.Assign(targets=[_name(loop, store=True)], value=_rtcall("while_", _const(bool(node.orelse))))
        node.test = _at(_call(ast.Attribute(_name(loop), "test", ast.Load()), node.test), node)
        return self.located([assign, node], node)

    def _jump(self, node: ast.stmt, word: str) -> Any:
        if not self.loops:
            return node
        taken = ast.If(test=_rtcall("brk", _name(self.loops[-1]), _const(word)), body=[node], orelse=[])
        return self.located([taken], node)

    def visit_Break(self, node: ast.Break) -> Any:
        return self._jump(node, "break")

    def visit_Continue(self, node: ast.Continue) -> Any:
        return self._jump(node, "continue")

    def visit_With(self, node: ast.With) -> Any:
        for item in node.items:
            item.context_expr = self.visit(item.context_expr)
            names = _target_names(item.optional_vars) if item.optional_vars is not None else None
            if names is not None:
                item.context_expr = _at(_rtcall("named", item.context_expr, _const(names)),
                                                      item.context_expr)
        node.body = self.body(node.body)
        return node

    # ---- assignments ------------------------------------------------------------------------
    def _old_value(self, name: str, into: str, at: ast.AST) -> list[ast.stmt]:
        """``try: into = name`` / ``except NameError: into = UNSET``."""
        return [ast.Try(
            body=[ast.Assign(targets=[_name(into, store=True)], value=_name(name))],
            handlers=[ast.ExceptHandler(type=_name("NameError"), name=None,
                                        body=[ast.Assign(targets=[_name(into, store=True)], value=_rt("UNSET"))])],
            orelse=[], finalbody=[],
        )]

    def visit_Assign(self, node: ast.Assign) -> Any:
        node.value = self.visit(node.value)
        node.targets = [self.visit(t) for t in node.targets]
        if len(node.targets) != 1:
            return node
        target = node.targets[0]
        if isinstance(target, ast.Name):
            val, old = self.tmp("v"), self.tmp("o")
            stmts: list[ast.stmt] = [ast.Assign(targets=[_name(val, store=True)], value=node.value)]
            stmts += self._old_value(target.id, old, node)
            stmts.append(ast.Assign(targets=[target],
                                    value=_rtcall("bind", _name(old), _name(val), _const(target.id))))
            return self.located(stmts, node)
        names = _target_names(target)
        if isinstance(names, tuple):
            node.value = _at(_rtcall("name_all", node.value, _const(names)), node.value)
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        node.value = self.visit(node.value)
        if not isinstance(node.target, ast.Name):
            node.target = self.visit(node.target)
            return node
        op = _BINOP[type(node.op)]
        new = ast.Assign(targets=[_name(node.target.id, store=True)],
                         value=_rtcall("aug", _name(node.target.id), _const(op), node.value))
        return self.located([new], node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        annotation = self.visit(node.annotation)
        value = self.visit(node.value) if node.value is not None else None
        if isinstance(node.target, ast.Name) and node.simple:
            name = node.target.id
            if value is not None:
                new = ast.Assign(targets=[_name(name, store=True)],
                                 value=_rtcall("ann_assign", annotation, value, _const(name)))
                return self.located([new], node)
            old, new_v = self.tmp("o"), self.tmp("a")
            stmts = self._old_value(name, old, node)
            stmts.append(ast.Assign(targets=[_name(new_v, store=True)],
                                    value=_rtcall("annotate", _name(old), annotation, _const(name))))
            stmts.append(ast.If(
                test=ast.Compare(left=_name(new_v), ops=[ast.IsNot()], comparators=[_rt("UNSET")]),
                body=[ast.Assign(targets=[_name(name, store=True)], value=_name(new_v))], orelse=[]))
            return self.located(stmts, node)
        if value is None:
            return self.located([ast.Pass()], node)
        return self.located([ast.Assign(targets=[self.visit(node.target)], value=value)], node)

    # ---- expressions ------------------------------------------------------------------------
    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        values = [self.visit(v) for v in node.values]
        fn = "and_" if isinstance(node.op, ast.And) else "or_"
        new = _rtcall(fn, values[0], *[_at(_lambda(v), v) for v in values[1:]])
        return _at(new, node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        node.operand = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            return _at(_rtcall("not_", node.operand), node)
        return node

    def visit_Compare(self, node: ast.Compare) -> Any:
        node.left = self.visit(node.left)
        node.comparators = [self.visit(c) for c in node.comparators]
        if len(node.ops) == 1:
            if isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
                # `v == 1` on a T.alloc_var must compare its value, not the buffer's identity
                return _at(_rtcall("cmp", _const(_CMP[type(node.ops[0])]), node.left, node.comparators[0]), node)
            return node
        ops = ast.Tuple(elts=[_const(_CMP[type(o)]) for o in node.ops], ctx=ast.Load())
        new = _rtcall("chain", node.left, ops, *[_at(_lambda(c), c) for c in node.comparators])
        return _at(new, node)

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        test, body, orelse = self.visit(node.test), self.visit(node.body), self.visit(node.orelse)
        new = _rtcall("ifexp", test, _at(_lambda(body), body), _at(_lambda(orelse), orelse))
        return _at(new, node)


def _rewrite(fn: Callable[..., Any]) -> types.CodeType:
    src = get_source(fn)
    code = fn.__code__
    fdef = src.parse()
    fdef = _Rewriter(src.filename, code.co_name).visit(fdef)
    freevars = [v for v in code.co_freevars if v != RT]
    wrapper = ast.FunctionDef(
        name="__tlx_make__",
        args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=RT)] + [ast.arg(arg=v) for v in freevars],
                           vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=[fdef, ast.Return(value=_name(fdef.name))],
        decorator_list=[],
        returns=None,
    )
    if "type_params" in ast.FunctionDef._fields:
        wrapper.type_params = []
    _at(wrapper, fdef)
    module = ast.Module(body=[wrapper], type_ignores=[])
    ast.fix_missing_locations(module)
    try:
        compiled = compile(module, src.filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise TileLangSyntaxError(
            f"kernel function `{code.co_name}` cannot be compiled: {exc.msg}",
            loc=SourceLoc(src.filename, exc.lineno or src.firstlineno, code.co_name),
            hint="this Python construct is not supported in kernel code",
        ) from None
    make = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in make.co_consts if isinstance(c, types.CodeType) and c.co_name == code.co_name)
    return inner


def rewritten_code(fn: Callable[..., Any]) -> types.CodeType:
    """The rewritten code object of ``fn`` (cached per code object)."""
    code = fn.__code__
    key = (code.co_filename, code)
    found = _code_cache.get(key)
    if found is None:
        found = _rewrite(fn)
        with _lock:
            _code_cache[key] = found
    return found


def rewritten(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` rewritten for tracing: same globals, closure, defaults; calls into ``__tlx__``."""
    from .runtime import RUNTIME_CELL

    code = rewritten_code(fn)
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    closure = []
    for name in code.co_freevars:
        if name == RT:
            closure.append(RUNTIME_CELL)
        elif name in cells:
            closure.append(cells[name])
        else:  # cannot happen: the rewrite introduces no free variables but the runtime
            raise TileLangSyntaxError(f"kernel function `{fn.__name__}` refers to `{name}`, which is not visible")
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, tuple(closure))
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    return new
