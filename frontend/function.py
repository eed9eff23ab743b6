"""``@T.prim_func`` and ``@T.macro``: kernel functions traced into the core IR.

``T.prim_func`` turns the decorated function into a ``PrimFunc`` when the ``def`` runs (in the
classic style, inside the ``@tilelang.jit`` factory, whose arguments the body closes over):
parameter annotations (``A: T.Tensor((M, K), dtype)``, ``n: T.int32``) become the parameters,
and the rewritten body runs once against a ``Builder``.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

from ..core_ir import expr as E
from ..core_ir.buffer import Buffer
from ..core_ir.dtypes import DType, as_dtype
from ..core_ir.errors import TileLangError, TileLangSyntaxError
from ..core_ir.source import SourceLoc, _is_internal, caller_loc
from ..core_ir.stmt import COMPILE_FLAGS, IMPORTS, PASS_CONFIGS, POINTERS, WORKSPACES, PrimFunc
from . import builder as bld
from . import pointers, ref
from .capture import get_source, rewritten, visible_names
from .extern import check_externs
from .spec import TensorSpec
from .type_errors import located_type_error


def def_loc(fn: Callable[..., Any]) -> SourceLoc:
    """The ``def`` line of ``fn`` (after its decorators)."""
    try:
        line = get_source(fn).tree.lineno
    except TileLangError:
        line = fn.__code__.co_firstlineno
    return SourceLoc(fn.__code__.co_filename, line, fn.__name__)


def trace(fn: Callable[..., Any], builder: bld.Builder, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run the rewritten ``fn`` with ``builder`` active; returns what the function returned."""
    f = rewritten(fn)
    with bld.tracing(builder):
        try:
            return f(*args, **kwargs)
        except (TypeError, NameError) as exc:
            located = located_type_error(exc)
            if located is None:
                raise
            raise located from None


def _user_frame_locals() -> dict[str, Any]:
    frame = sys._getframe(1)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    return dict(frame.f_locals) if frame is not None else {}


def _text(annotation: Any) -> bool:
    """Whether ``annotation`` is annotation text to evaluate (a dtype such as ``T.int32`` is a
    ``str`` too, but a value already)."""
    from ..core_ir.dtypes import DType

    return isinstance(annotation, str) and not isinstance(annotation, DType)


def resolved_annotations(fn: Callable[..., Any]) -> dict[str, Any]:
    """The parameter annotations of ``fn``, evaluating string ones (``from __future__ import
    annotations``) in the function's globals, closure and the defining scope."""
    anns = dict(getattr(fn, "__annotations__", {}) or {})
    if not any(_text(v) for v in anns.values()):
        return anns
    ns = visible_names(fn)
    ns.update(_user_frame_locals())
    for key, value in anns.items():
        if _text(value):
            try:
                anns[key] = eval(value, ns)  # noqa: S307 - the user's own annotation text
            except TileLangError as err:  # a T.* call in the text refused it: its kind and hint, at the def
                if err.loc is not None and err.loc.file.startswith("<"):
                    err.loc = None  # the evaluated text's own `<string>` line
                raise err.with_loc(def_loc(fn)) from None
            except Exception as exc:  # noqa: BLE001
                raise TileLangSyntaxError(
                    f"cannot evaluate the annotation of `{key}` ({value!r}): {exc}",
                    loc=def_loc(fn),
                    hint="annotations of kernel parameters must be computable where the function is defined",
                ) from None
    return anns


def param_value(name: str, ann: Any, loc: SourceLoc | None) -> Buffer | E.Var | None:
    """The IR parameter an annotation declares; ``None`` for an unannotated parameter."""
    if ann is inspect.Parameter.empty:
        return None
    if isinstance(ann, TensorSpec):
        where = ann.loc if ann.loc is not None and not ann.loc.file.startswith("<") else loc
        return Buffer(name, ann.shape, ann.dtype, ann.scope, where, ann.strides)
    if isinstance(ann, DType):
        return E.Var(name, ann, loc)
    if isinstance(ann, type) and ann in (int, float, bool):
        return E.Var(name, as_dtype(ann), loc)
    raise TileLangSyntaxError(
        f"parameter `{name}` is annotated with {ann!r}, which is not a tensor type or a dtype",
        loc=loc,
        hint=f"write `{name}: T.Tensor((M, K), T.float16)` for a tensor or `{name}: T.int32` for a scalar",
    )


def bind_params(
    fn: Callable[..., Any], b: bld.Builder, call_args: dict[str, Any], annotations: dict[str, Any] | None,
    loc: SourceLoc,
) -> tuple[tuple[Any, ...], dict[str, Any], list[Any]]:
    """The arguments to trace ``fn`` with, and its kernel parameters in order.

    A parameter named in ``call_args`` gets that Python value and is no kernel parameter. Any
    other becomes the buffer / scalar its annotation declares (``annotations``), or a ``Slot``
    that an annotation in the body binds later.
    """
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    params: list[Any] = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TileLangSyntaxError(f"kernel function `{b.name}` cannot take *{p.name} / **{p.name}", loc=loc,
                                      hint="list every parameter by name")
        if p.name in call_args:
            value: Any = call_args[p.name]
        else:
            ann = p.empty if annotations is None else annotations.get(p.name, p.empty)
            if pointers.is_pointer_annotation(ann):
                value = pointers.declare(b, p.name, ann, loc)
            else:
                value = param_value(p.name, ann, loc)
            if value is None:
                value = bld.Slot(p.name, len(params))
                b.slots.append(value)
            params.append(value)
        if p.kind == p.KEYWORD_ONLY:
            kwargs[p.name] = value
        else:
            args.append(value)
    return tuple(args), kwargs, params


def build_prim_func(
    fn: Callable[..., Any],
    builder: bld.Builder | None = None,
    call_args: dict[str, Any] | None = None,
) -> tuple[PrimFunc, Any]:
    """Trace ``fn`` into a ``PrimFunc``; returns it with the value the function returned.

    With no ``builder`` (``T.prim_func``), parameters come from the signature's annotations;
    an eager ``@tilelang.jit`` function passes its builder and the Python values of its
    specialisation arguments (``call_args``), and the body's annotations declare the rest.
    ``T.empty`` buffers become extra parameters at the end, listed in ``out_idx``, and after them
    the ``T.alloc_global`` workspaces, listed in the ``workspaces`` attribute; the ``T.ptr``
    parameters are listed in the ``pointers`` attribute.
    """
    loc = def_loc(fn)
    b = builder or bld.Builder(fn.__name__, "prim")
    anns = resolved_annotations(fn) if builder is None else None
    args, kwargs, params = bind_params(fn, b, call_args or {}, anns, loc)
    ret = trace(fn, b, args, kwargs)
    for s in b.slots:
        if s.value is None:
            raise TileLangSyntaxError(
                f"parameter `{s.name}` of `{b.name}` has no type",
                loc=loc,
                hint=f"annotate it in the signature or at the top of the body: `{s.name}: T.Tensor((M, K), T.float16)`",
            )
    final = [p.value if isinstance(p, bld.Slot) else p for p in params]
    body = b.finish()
    check_externs(b.externs, body)
    if b.kernels == 0:
        raise TileLangSyntaxError(
            f"kernel function `{b.name}` has no `with T.Kernel(...)` block", loc=loc,
            hint="put the kernel body inside `with T.Kernel(grid, threads=128) as bx:`",
        )
    params = (*final, *b.outputs, *b.workspaces)
    outs = tuple(range(len(final), len(final) + len(b.outputs)))
    attrs: list[tuple[str, Any]] = []
    if b.workspaces:
        attrs.append((WORKSPACES, tuple(range(len(params) - len(b.workspaces), len(params)))))
    if b.pointers:
        for p in b.pointers.values():
            if p.made is None:
                raise TileLangSyntaxError(
                    f"pointer parameter `{p.buffer.name}` of `{b.name}` is never made into a tensor", loc=loc,
                    hint=f"give it a shape and dtype with `T.make_tensor({p.buffer.name}, shape, dtype)`, "
                    "or remove the parameter",
                )
        attrs.append((POINTERS, tuple(i for i, x in enumerate(params) if id(x) in b.pointers)))
    if b.imports:
        attrs.append((IMPORTS, tuple(b.imports)))
    if b.pass_configs:
        attrs.append((PASS_CONFIGS, tuple(sorted(b.pass_configs.items()))))
    if b.compile_flags:
        attrs.append((COMPILE_FLAGS, tuple(b.compile_flags)))
    _check_hidden_shapes(params, [*b.workspaces, *(p.buffer for p in b.pointers.values())])
    func = PrimFunc(b.name, params, body, outs, tuple(attrs), loc)
    return func, ret


def _check_hidden_shapes(params: tuple[Any, ...], hidden: list[Buffer]) -> None:
    """The sizes of workspaces and pointer tensors come from the other arguments: each variable in
    their shapes and strides must be a scalar parameter or set by a tensor parameter's shape."""
    if not hidden:
        return
    known: set[E.Var] = set()
    for p in params:
        if isinstance(p, E.Var):
            known.add(p)
        elif not any(p is h for h in hidden):
            for e in p.shape + (p.strides or ()):
                known |= E.free_vars(e)
    for buf in hidden:
        for e in buf.shape + (buf.strides or ()):
            missing = sorted(v.name for v in E.free_vars(e) if v not in known)
            if missing:
                raise TileLangSyntaxError(
                    f"the size of `{buf.name}` uses `{missing[0]}`, which no parameter sets", loc=buf.loc,
                    hint="use constants, scalar parameters (`n: T.int32`) or T.dynamic / T.const names that the "
                    "shape of a tensor parameter sets",
                )


def normalize_out_idx(func: PrimFunc, out_idx: Any) -> tuple[int, ...]:
    """``out_idx`` as sorted non-negative indices of buffer parameters (errors name ``func``)."""
    if out_idx is None:
        return ()
    items = [out_idx] if isinstance(out_idx, int) else list(out_idx)
    n = func.n_visible
    result = set()
    for i in items:
        if isinstance(i, bool) or not isinstance(i, int) or not -n <= i < n:
            raise TileLangSyntaxError(
                f"out_idx entry {i!r} is out of range for `{func.name}`, which has {n} parameters",
                loc=func.loc, hint=f"use indices in [-{n}, {n - 1}] (negative ones count from the end)",
            )
        k = i % n
        if not isinstance(func.params[k], Buffer):
            raise TileLangSyntaxError(
                f"out_idx names parameter {k} of `{func.name}`, a scalar; only tensors can be outputs",
                loc=func.loc,
            )
        result.add(k)
    return tuple(sorted(result))


@bld.user_errors
def prim_func(fn: Callable[..., Any] | None = None, *, private: bool = False, **_: Any) -> Any:
    """``@T.prim_func``: trace the function into a ``PrimFunc`` right away."""
    if fn is None:
        return lambda f: prim_func(f, private=private)
    if isinstance(fn, PrimFunc):
        return fn
    if not callable(fn) or not hasattr(fn, "__code__"):
        raise TileLangSyntaxError(f"@T.prim_func decorates a function, got {fn!r}", loc=caller_loc())
    func, _ = build_prim_func(fn)
    return func


class Macro:
    """``@T.macro``: a helper whose body is inlined (traced) where it is called."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self._refs: frozenset[str] | None = None
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        f = rewritten(self.fn)
        self._check_arguments(args, kwargs)
        if self._refs is None:
            self._refs = ref.ref_params(self.fn, def_loc(self.fn))
        args, kwargs = ref.macro_arguments(self.fn, self._refs, args, kwargs)
        b = bld.current()
        if b is None:
            return f(*args, **kwargs)
        b.fn_bases.append(b.depth)
        try:
            return f(*args, **kwargs)
        finally:
            b.fn_bases.pop()

    def _check_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Python's own TypeError for a call that does not fit the macro's signature would name
        our frames; this names the caller's line and the signature."""
        sig = inspect.signature(self.fn)
        try:
            sig.bind(*args, **kwargs)
        except TypeError as exc:
            name = self.fn.__name__
            raise TileLangSyntaxError(f"T.macro `{name}`: {exc}", loc=caller_loc(),
                                      hint=f"call it as {name}{sig}") from None

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    def __repr__(self) -> str:
        return f"<T.macro {self.fn.__qualname__}>"


def macro(fn: Callable[..., Any] | None = None, **_: Any) -> Any:
    """``@T.macro``: an inlined helper; ``if``/loops/assignments in it behave as in a kernel."""
    if fn is None:
        return lambda f: Macro(f)
    return Macro(fn)
