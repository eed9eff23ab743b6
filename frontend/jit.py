"""``@tilelang.jit`` for both programming styles, and ``tilelang.compile``.

*Classic* (a factory): the decorated function defines a ``@T.prim_func`` and returns it;
calling the jitted factory with static arguments returns a compiled ``JITKernel``, cached by
those arguments.

*Eager*: the decorated function is the kernel. Sizes are ``T.const`` names, tensors are typed
by annotations in the body, outputs are ``T.empty`` buffers that the function returns. Calling
it with tensors binds every ``T.const`` from their shapes in two phases: a *probe* trace (once
per set of non-tensor arguments) runs the body with the names as placeholder variables until
every tensor parameter is annotated, which tells which parameter dimension each name is; then
the shapes of the actual tensors give the values, and a second trace with Python ints (so
Python control flow over the sizes works) builds the function that is compiled, cached by
(non-tensor arguments, size values, dtypes, target) and run.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core_ir import expr as E
from ..core_ir.buffer import Buffer
from ..core_ir.dtypes import as_dtype
from ..core_ir.errors import ArgumentError, TileLangError, TileLangSyntaxError, UnboundConstError
from ..core_ir.source import SourceLoc, caller_loc
from ..core_ir.stmt import PrimFunc
from . import builder as bld
from .capture import get_source
from .function import bind_params, build_prim_func, def_loc, normalize_out_idx, trace

__all__ = ["JITFunc", "jit", "compile", "lazy_jit"]


def _freeze(value: Any) -> Any:
    """A hashable stand-in for an argument value (the kernel cache key)."""
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(k), _freeze(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(repr(v) for v in value)))
    try:
        hash(value)
    except TypeError:
        return ("repr", repr(value))
    return value


def is_tensor(value: Any) -> bool:
    """A torch tensor, numpy array or anything else with ``shape`` and ``dtype``."""
    if isinstance(value, (bool, int, float, str, Buffer, E.Expr)) or value is None:
        return False
    if type(value).__module__ == "numpy":
        return type(value).__name__ == "ndarray"  # not a numpy scalar
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _options(
    pass_configs: Any, compile_flags: Any, verbose: bool, dump: Any = None, dump_dir: Any = None
) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if dump:
        options["dump"] = dump
    if dump_dir:
        options["dump_dir"] = str(dump_dir)
    if pass_configs:
        from tilelang_x.pass_config import config_key

        options["pass_configs"] = {config_key(k): v for k, v in dict(pass_configs).items()}
    if compile_flags:
        options["compile_flags"] = [compile_flags] if isinstance(compile_flags, str) else list(compile_flags)
    if verbose:
        options["verbose"] = True
    return options


def _target(target: Any) -> Any:
    if target is not None:
        return target
    from .. import knobs

    return knobs.target.default


def _compile_func(func: PrimFunc, target: Any, options: dict[str, Any]) -> Any:
    from ..compiler import compile_prim_func

    return compile_prim_func(func, target=target, out_idx=func.out_idx, options=options or None)


# ---- style detection ----------------------------------------------------------------------------

def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


_LANGUAGE_MODULES = ("tilelang_x.language", "tilelang_x.frontend.language")


class _StyleScan(ast.NodeVisitor):
    """Looks for the marks of each style: a nested ``@T.prim_func`` (classic), or ``T.Kernel``,
    ``T.const``, ``T.empty`` and ``A: T.Tensor(...)`` in the function's own body (eager)."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.namespace = namespace
        self.prim_func = False
        self.eager = False
        self.depth = 0

    def is_language(self, node: ast.expr, names: tuple[str, ...]) -> bool:
        """``node`` is ``<T>.<one of names>`` (optionally called or indexed), ``T`` the language."""
        if isinstance(node, (ast.Call, ast.Subscript)):
            node = node.func if isinstance(node, ast.Call) else node.value
        if not (isinstance(node, ast.Attribute) and node.attr in names and isinstance(node.value, ast.Name)):
            return False
        module = self.namespace.get(node.value.id)
        if module is None:
            return node.value.id == "T"
        return getattr(module, "__name__", "") in _LANGUAGE_MODULES

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if self.depth > 0:
            if any(_decorator_name(d) == "prim_func" for d in node.decorator_list):
                self.prim_func = True
            return
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_With(self, node: ast.With) -> None:
        if any(self.is_language(i.context_expr, ("Kernel", "ClusterKernel")) for i in node.items):
            self.eager = True
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if self.is_language(node, ("const", "empty")):
            self.eager = True
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None and self.is_language(node.annotation, ("Tensor", "Buffer", "StridedTensor")):
            self.eager = True
        self.generic_visit(node)


def detect_style(fn: Callable[..., Any]) -> str:
    """``"classic"`` for a factory returning a ``T.prim_func``, ``"eager"`` for a kernel body."""
    try:
        tree = get_source(fn).tree
    except TileLangError:
        return "classic"
    scan = _StyleScan(fn.__globals__)
    scan.visit(tree)
    if scan.prim_func:
        return "classic"
    return "eager" if scan.eager else "classic"


# ---- eager style --------------------------------------------------------------------------------

@functools.cache
def _tensor_annotations(fn: Callable[..., Any]) -> dict[str, int]:
    """The parameters of eager kernel ``fn`` annotated in its body (``A: T.Tensor(...)``), with the
    annotation's line."""
    tree = get_source(fn).tree
    params = {a.arg for a in tree.args.args}
    scan = _StyleScan(fn.__globals__)
    return {node.target.id: node.lineno for node in tree.body
            if isinstance(node, ast.AnnAssign) and node.value is None and isinstance(node.target, ast.Name)
            and node.target.id in params and scan.is_language(node.annotation, ("Tensor", "Buffer", "StridedTensor"))}


@dataclass
class _Probe:
    """What the probe trace learned: where each ``T.const`` is a parameter dimension."""

    const_names: list[str]
    const_locs: dict[str, SourceLoc | None]
    const_dims: dict[str, list[tuple[str, int]]]
    param_ndim: dict[str, int]


@dataclass
class _Entry:
    """One specialisation of an eager function."""

    func: PrimFunc
    inputs: list[str]
    ret: Any
    kernel: Any = None


class JITFunc:
    """What ``@tilelang.jit`` returns. Calling it compiles (and, in the eager style, runs)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        out_idx: Any = None,
        target: Any = None,
        target_host: Any = None,
        execution_backend: Any = None,
        verbose: bool = False,
        pass_configs: dict[str, Any] | None = None,
        debug_root_path: Any = None,
        compile_flags: Any = None,
        dump: Any = None,
        dump_dir: Any = None,
    ) -> None:
        if not callable(fn) or not hasattr(fn, "__code__"):
            raise TileLangSyntaxError(f"@tilelang.jit decorates a function, got {fn!r}")
        self.fn = fn
        self.out_idx = out_idx
        self.target = target
        self.execution_backend = execution_backend
        self.options = _options(pass_configs, compile_flags, verbose, dump, dump_dir)
        self._style: str | None = None
        self._sig: inspect.Signature | None = None
        self._kernels: dict[Any, Any] = {}
        self._probes: dict[Any, _Probe] = {}
        self._entries: dict[Any, _Entry] = {}
        self._fast: dict[Any, tuple[_Entry, list[str]]] = {}
        functools.update_wrapper(self, fn)

    # ---- public API -------------------------------------------------------------------------
    @property
    def style(self) -> str:
        """``"classic"`` (factory of a ``T.prim_func``) or ``"eager"`` (the kernel itself)."""
        if self._style is None:
            self._style = detect_style(self.fn)
        return self._style

    mode = style

    @bld.user_errors
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.style == "classic":
            return self.compile(*args, **kwargs)
        fast = None
        if not kwargs:
            # positional calls repeat: key them by shapes and dtypes, skipping the binding work
            try:
                fast = (_target(self.target),) + tuple(
                    (a.shape, a.dtype) if is_tensor(a) else ("=", _freeze(a)) for a in args)
                hit = self._fast.get(fast)
            except TypeError:
                fast = hit = None
            if hit is not None:
                return self._run(hit[0], dict(zip(hit[1], args)))
        entry, tensors = self._eager_entry(args, kwargs, need_tensors=True)
        if fast is not None:
            if len(self._fast) > 1024:
                self._fast.clear()
            names = list(self._signature().parameters)[: len(args)]
            if all(n in tensors or not is_tensor(a) for n, a in zip(names, args)):
                self._fast[fast] = (entry, names)
        return self._run(entry, tensors)

    @bld.user_errors
    def compile(self, *args: Any, **kwargs: Any) -> Any:
        """The compiled kernel for these arguments, without running it.

        Classic style: the factory's arguments. Eager style: tensors, or the sizes by name
        (``f.compile(M=1024, N=1024, K=512, block_M=64)``), plus the non-tensor arguments.
        """
        target = _target(self.target)
        if self.style == "classic":
            key = (_freeze(args), _freeze(kwargs), _freeze(target))
            kernel = self._kernels.get(key)
            if kernel is None:
                kernel = self._kernels[key] = _compile_func(self._classic_func(args, kwargs), target, self.options)
            return kernel
        entry, _ = self._eager_entry(args, kwargs, need_tensors=False)
        return self._entry_kernel(entry, target)

    @bld.user_errors
    def get_ir(self, *args: Any, **kwargs: Any) -> PrimFunc:
        """The tile-level ``PrimFunc`` these arguments produce (nothing is compiled)."""
        if self.style == "classic":
            return self._classic_func(args, kwargs)
        entry, _ = self._eager_entry(args, kwargs, need_tensors=False)
        return entry.func

    get_tir = get_ir

    def __repr__(self) -> str:
        return f"<tilelang_x.jit {self.fn.__qualname__} ({self.style})>"

    # ---- classic ----------------------------------------------------------------------------
    def _check_factory_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """A call that does not fit the factory's signature, most often tensors passed to the
        factory itself instead of to the kernel it returns."""
        sig = inspect.signature(self.fn)
        try:
            sig.bind(*args, **kwargs)
        except TypeError as exc:
            name = self.fn.__name__
            hint = f"call it as {name}{sig}"
            if any(hasattr(a, "shape") and hasattr(a, "dtype") for a in (*args, *kwargs.values())):
                hint = (f"`{name}` builds the kernel from its parameters: `kernel = {name}{sig}`, then call "
                        "`kernel(tensors...)`")
            raise TileLangSyntaxError(f"@tilelang.jit factory `{name}`: {exc}", loc=caller_loc(), hint=hint) from None

    def _classic_func(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> PrimFunc:
        self._check_factory_arguments(args, kwargs)
        func = self.fn(*args, **kwargs)
        if not isinstance(func, PrimFunc):
            raise TileLangSyntaxError(
                f"@tilelang.jit function `{self.fn.__name__}` returned {type(func).__name__}, not a T.prim_func",
                loc=def_loc(self.fn),
                hint="a factory defines `@T.prim_func def main(...)` and ends with `return main`; an eager kernel "
                "opens `with T.Kernel(...)` in its own body",
            )
        extra = normalize_out_idx(func, self.out_idx)
        outs = tuple(sorted(set(func.out_idx) | set(extra)))
        return func if outs == func.out_idx else dataclasses.replace(func, out_idx=outs)

    # ---- eager ------------------------------------------------------------------------------
    def _signature(self) -> inspect.Signature:
        if self._sig is None:
            self._sig = inspect.signature(self.fn)
        return self._sig

    def _split(self, args: tuple[Any, ...], kwargs: dict[str, Any], need_tensors: bool
               ) -> tuple[dict[str, Any], dict[str, Any], list[str], dict[str, int]]:
        sig = self._signature()
        params = sig.parameters
        param_kw = {k: v for k, v in kwargs.items() if k in params}
        sizes = {k: v for k, v in kwargs.items() if k not in params}
        loc = def_loc(self.fn)
        try:
            bound = sig.bind_partial(*args, **param_kw)
        except TypeError as exc:
            raise ArgumentError(f"`{self.fn.__name__}`: {exc}", loc=loc) from None
        bound.apply_defaults()
        tensors: dict[str, Any] = {}
        scalars: dict[str, Any] = {}
        missing: list[str] = []
        for name in params:
            if name not in bound.arguments:
                missing.append(name)
            elif is_tensor(bound.arguments[name]):
                tensors[name] = bound.arguments[name]
            else:
                scalars[name] = bound.arguments[name]
        if need_tensors and missing:
            raise ArgumentError(
                f"`{self.fn.__name__}` is missing argument{'s' if len(missing) > 1 else ''} "
                f"{', '.join(missing)}", loc=loc, hint="pass a tensor for every tensor parameter",
            )
        for k, v in sizes.items():
            if E.as_int(v) is None or isinstance(v, bool):
                raise ArgumentError(
                    f"`{self.fn.__name__}` got keyword {k}={v!r}: it is not a parameter, and a T.const size must "
                    "be an int", loc=loc,
                )
            sizes[k] = int(E.as_int(v))  # type: ignore[arg-type]
        return tensors, scalars, missing, sizes

    def _probe(self, key: Any, scalars: dict[str, Any]) -> _Probe:
        found = self._probes.get(key)
        if found is not None:
            return found
        b = bld.Builder(self.fn.__name__, "probe")
        b.stop_when_bound = True
        args, kwargs, _ = bind_params(self.fn, b, scalars, None, def_loc(self.fn))
        if b.slots:
            try:
                trace(self.fn, b, args, kwargs)
            except bld.StopTrace:
                pass
        by_var = {id(v): name for name, v in b.const_vars.items()}
        dims: dict[str, list[tuple[str, int]]] = {}
        ndim: dict[str, int] = {}
        for slot in b.slots:
            if isinstance(slot.value, Buffer):
                ndim[slot.name] = slot.value.ndim
                for d, extent in enumerate(slot.value.shape):
                    name = by_var.get(id(extent))
                    if name is not None:
                        dims.setdefault(name, []).append((slot.name, d))
        probe = _Probe(list(b.const_vars), dict(b.const_locs), dims, ndim)
        self._probes[key] = probe
        return probe

    def _const_values(self, probe: _Probe, tensors: dict[str, Any], sizes: dict[str, int]) -> dict[str, int]:
        values: dict[str, int] = {}
        source: dict[str, str] = {}
        loc = def_loc(self.fn)
        for pname, tensor in tensors.items():
            n = probe.param_ndim.get(pname)
            if n is not None and len(tensor.shape) != n:
                raise ArgumentError(
                    f"`{self.fn.__name__}`: argument `{pname}` has {len(tensor.shape)} dimensions "
                    f"(shape {tuple(tensor.shape)}) but is annotated with {n}", loc=loc,
                )
        for cname, places in probe.const_dims.items():
            for pname, d in places:
                if pname not in tensors:
                    continue
                v = int(tensors[pname].shape[d])
                where = f"{pname}.shape[{d}]"
                if cname in values and values[cname] != v:
                    raise ArgumentError(
                        f"`{self.fn.__name__}`: T.const `{cname}` is {values[cname]} from {source[cname]} "
                        f"but {v} from {where}",
                        loc=probe.const_locs.get(cname) or loc,
                        hint="pass tensors whose shapes agree on every shared size",
                    )
                values[cname] = v
                source[cname] = where
        for cname, v in sizes.items():
            if cname in values and values[cname] != v:
                raise ArgumentError(
                    f"`{self.fn.__name__}`: {cname}={v} was passed but {source[cname]} is {values[cname]}",
                    loc=probe.const_locs.get(cname) or loc,
                )
            values[cname] = v
        for cname in probe.const_names:
            if cname not in values:
                placed = probe.const_dims.get(cname)
                if placed:
                    how = f"pass a tensor for `{placed[0][0]}` or {cname}=<int>"
                else:
                    how = (f"use `{cname}` directly as a dimension of an annotated tensor parameter, "
                           f"or pass {cname}=<int> as a keyword argument")
                raise UnboundConstError(
                    f"T.const `{cname}` of `{self.fn.__name__}` has no value", loc=probe.const_locs.get(cname) or loc,
                    hint=how,
                )
        return values

    def _check_tensor_arguments(self, scalars: dict[str, Any]) -> None:
        """A parameter annotated as a tensor that was given something else (otherwise the trace
        would stop first at a T.const its shape was to bind)."""
        for pname, line in _tensor_annotations(self.fn).items():
            if pname in scalars:
                value = scalars[pname]
                raise ArgumentError(
                    f"`{self.fn.__name__}`: argument `{pname}` is {type(value).__name__} {value!r}, but `{pname}` "
                    "is annotated as a tensor", loc=SourceLoc(self.fn.__code__.co_filename, line, self.fn.__name__),
                    hint="pass a torch tensor (or a numpy array on the interpreter)")

    def _eager_entry(self, args: tuple[Any, ...], kwargs: dict[str, Any], need_tensors: bool
                     ) -> tuple[_Entry, dict[str, Any]]:
        tensors, scalars, missing, sizes = self._split(args, kwargs, need_tensors)
        p1 = (tuple(sorted(tensors)), tuple(missing), tuple((k, _freeze(v)) for k, v in scalars.items()))
        probe = self._probe(p1, scalars)
        self._check_tensor_arguments(scalars)
        values = self._const_values(probe, tensors, sizes)
        dtypes = tuple((k, str(t.dtype)) for k, t in tensors.items())
        key = (p1, tuple(sorted(values.items())), dtypes)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = self._build(scalars, values, tensors)
        return entry, tensors

    def _build(self, scalars: dict[str, Any], values: dict[str, int], tensors: dict[str, Any]) -> _Entry:
        b = bld.Builder(self.fn.__name__, "eager", values)
        func, ret = build_prim_func(self.fn, b, scalars)
        inputs = [s.name for s in b.slots]
        for slot in b.slots:
            value = slot.value
            tensor = tensors.get(slot.name)
            if tensor is None or not isinstance(value, Buffer) or id(value) in b.pointers:
                continue  # a T.ptr parameter's argument is checked against the made tensor at the call
            try:
                got = as_dtype(tensor.dtype)
            except TileLangError:
                got = None
            if got != value.dtype:
                raise ArgumentError(
                    f"`{self.fn.__name__}`: argument `{slot.name}` has dtype {tensor.dtype} but is annotated "
                    f"{value.dtype}", loc=value.loc, hint=f"pass a {value.dtype} tensor, or change the annotation",
                )
            if len(tensor.shape) != value.ndim:
                raise ArgumentError(
                    f"`{self.fn.__name__}`: argument `{slot.name}` has {len(tensor.shape)} dimensions but is "
                    f"annotated with {value.ndim}", loc=value.loc,
                )
        return _Entry(func, inputs, self._ret_spec(ret, func, b))

    def _ret_spec(self, ret: Any, func: PrimFunc, b: bld.Builder) -> Any:
        outputs = {id(buf): k for k, buf in enumerate(b.outputs)}
        inputs = {id(s.value): s.name for s in b.slots}

        def one(x: Any) -> Any:
            if type(x) is Buffer:
                if id(x) in outputs:
                    return ("out", outputs[id(x)])
                if id(x) in inputs:
                    return ("in", inputs[id(x)])
            raise TileLangSyntaxError(
                f"`{self.fn.__name__}` returns {x!r}; an eager kernel returns the buffers it declared with T.empty",
                loc=func.loc, hint="end the function with `return C` (or `return C, D`) for C = T.empty(...)",
            )

        if ret is None:
            return None
        if isinstance(ret, (tuple, list)):
            return tuple(one(x) for x in ret)
        return one(ret)

    def _entry_kernel(self, entry: _Entry, target: Any) -> Any:
        key = _freeze(target)
        if entry.kernel is None or entry.kernel[0] != key:
            entry.kernel = (key, _compile_func(entry.func, target, self.options))
        return entry.kernel[1]

    def _run(self, entry: _Entry, tensors: dict[str, Any]) -> Any:
        kernel = self._entry_kernel(entry, _target(self.target))
        result = kernel(*[tensors[name] for name in entry.inputs])
        n_out = len(entry.func.out_idx)
        if n_out == 0:
            outs: list[Any] = []
        elif n_out == 1:
            outs = [result]
        else:
            outs = list(result)

        def pick(spec: Any) -> Any:
            return outs[spec[1]] if spec[0] == "out" else tensors[spec[1]]

        spec = entry.ret
        if spec is None:
            return None if not outs else outs[0] if len(outs) == 1 else tuple(outs)
        if isinstance(spec, tuple) and spec and isinstance(spec[0], tuple):
            return tuple(pick(s) for s in spec)
        if isinstance(spec, tuple) and not spec:
            return ()
        return pick(spec)


def jit(
    func: Callable[..., Any] | None = None,
    *,
    out_idx: Any = None,
    target: Any = None,
    target_host: Any = None,
    execution_backend: Any = None,
    verbose: bool = False,
    pass_configs: dict[str, Any] | None = None,
    debug_root_path: Any = None,
    compile_flags: Any = None,
    dump: Any = None,
    dump_dir: Any = None,
) -> Any:
    """``@tilelang.jit`` / ``@tilelang.jit(out_idx=[-1], target="cuda")``.

    ``target`` defaults to the ``TILELANG_X_TARGET`` knob (``auto``). TileLang's
    ``execution_backend``, ``target_host`` and ``debug_root_path`` are accepted and ignored;
    ``pass_configs``, ``compile_flags`` and ``verbose`` go to the backend as options.
    ``dump`` (stage names, a comma-separated string or ``"all"``) writes the IR after those
    stages to ``dump_dir``, like ``TILELANG_X_DUMP`` / ``TILELANG_X_DUMP_DIR``.
    """
    config = dict(out_idx=out_idx, target=target, target_host=target_host, execution_backend=execution_backend,
                  verbose=verbose, pass_configs=pass_configs, debug_root_path=debug_root_path,
                  compile_flags=compile_flags, dump=dump, dump_dir=dump_dir)

    def wrap(fn: Callable[..., Any]) -> Any:
        if isinstance(fn, PrimFunc):
            return compile(fn, out_idx=out_idx, target=target, verbose=verbose, pass_configs=pass_configs,
                           compile_flags=compile_flags, dump=dump, dump_dir=dump_dir)
        return JITFunc(fn, **config)

    return wrap if func is None else wrap(func)


lazy_jit = jit


@bld.user_errors
def compile(
    func: PrimFunc,
    out_idx: int | Sequence[int] | None = None,
    target: Any = None,
    *,
    target_host: Any = None,
    execution_backend: Any = None,
    verbose: bool = False,
    pass_configs: dict[str, Any] | None = None,
    compile_flags: Any = None,
    dump: Any = None,
    dump_dir: Any = None,
) -> Any:
    """``tilelang.compile(prim_func, out_idx=None, target=None)`` → a ``JITKernel``."""
    if not isinstance(func, PrimFunc):
        raise TileLangSyntaxError(
            f"tilelang.compile takes a T.prim_func, got {type(func).__name__}",
            hint="decorate the kernel with @T.prim_func, or use @tilelang.jit on a factory",
        )
    extra = normalize_out_idx(func, out_idx)
    outs = tuple(sorted(set(func.out_idx) | set(extra)))
    if outs != func.out_idx:
        func = dataclasses.replace(func, out_idx=outs)
    return _compile_func(func, _target(target), _options(pass_configs, compile_flags, verbose, dump, dump_dir))
