"""Binding call arguments to a kernel's parameters.

An ``ArgBinder`` is built once per compiled kernel from its ``PrimFunc``: for each parameter it
precomputes what to check (dtype, rank, static dims, dynamic dims to bind, device, contiguity),
so a call does little more than read each tensor's attributes. Every mistake raises
``ArgumentError`` naming the kernel's definition (``file:line``), the parameter and what to change.

Tensors may be torch tensors (any device) or numpy arrays (CPU only); torch is never imported
here unless a torch tensor was passed or an output must be allocated as one.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from .core_ir import expr as E
from .core_ir.arith import dtype_range
from .core_ir.buffer import Buffer
from .core_ir.dtypes import TORCH_NAMES, DType, as_dtype
from .core_ir.errors import ArgumentError, TileLangError
from .core_ir.stmt import POINTERS, WORKSPACES, PrimFunc

__all__ = ["ArgBinder", "ParamSpec", "eval_dim", "torch_dtype", "numpy_dtype", "normalize_out_idx"]

# dtype objects of torch / numpy seen so far -> DType (None: not representable in the IR)
_DTYPE_CACHE: dict[Any, DType | None] = {}
def arg_dtype(dtype: Any) -> DType | None:
    """The IR dtype of a torch / numpy dtype object (``None`` when the IR has no such dtype)."""
    try:
        return _DTYPE_CACHE[dtype]
    except KeyError:
        pass
    except TypeError:  # unhashable
        return _lookup_dtype(dtype)
    found = _lookup_dtype(dtype)
    _DTYPE_CACHE[dtype] = found
    return found


def _lookup_dtype(dtype: Any) -> DType | None:
    try:
        return as_dtype(dtype)
    except TileLangError:
        return None


def torch_dtype(dtype: DType) -> Any:
    """The torch dtype for an IR dtype."""
    return dtype.as_torch()


def numpy_dtype(dtype: DType) -> Any:
    """The numpy dtype for an IR dtype, or ``None`` (bfloat16, float8 have none)."""
    import numpy as np

    if dtype.name in ("bfloat16", "float8_e4m3", "float8_e5m2"):
        return None
    return np.dtype(dtype.name)


def eval_dim(e: Any, dims: dict[E.Var, int]) -> int | None:
    """The integer value of a shape expression with ``dims`` bound, or ``None`` if it cannot be
    computed (an unbound variable, a division by zero, a non-integer result)."""
    value = E.as_int(e)
    if value is not None:
        return value
    from .core_ir.evaluate import evaluate

    try:
        value = evaluate(e, dims)
    except (KeyError, ZeroDivisionError, TypeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def normalize_out_idx(func: PrimFunc, out_idx: Any) -> tuple[int, ...]:
    """``out_idx`` (an int, a sequence, or ``None`` for the function's own) as sorted,
    non-negative parameter indices; negative indices count from the end."""
    if out_idx is None:
        out_idx = func.out_idx
    if isinstance(out_idx, int):
        out_idx = (out_idx,)
    n = func.n_visible
    result = []
    for i in out_idx:
        if not isinstance(i, int) or isinstance(i, bool) or not -n <= i < n:
            raise TileLangError(
                f"out_idx {i!r} is out of range for kernel `{func.name}` with {n} parameters",
                loc=func.loc,
                hint=f"use indices in [-{n}, {n - 1}]; -1 is the last parameter",
            )
        j = i % n
        if not isinstance(func.params[j], Buffer):
            raise TileLangError(
                f"out_idx {i} names the scalar parameter `{func.params[j].name}` of `{func.name}`",
                loc=func.loc,
                hint="only tensor parameters can be outputs",
            )
        if j not in result:
            result.append(j)
    return tuple(sorted(result))


@dataclass
class ParamSpec:
    """What one parameter expects."""

    index: int
    name: str
    param: Buffer | E.Var
    dtype: DType
    is_output: bool
    shape: tuple[Any, ...] = ()  # per dim: int, Var or another Expr
    contiguous: bool = True
    strides: tuple[Any, ...] | None = None  # declared element strides (T.StridedTensor), as ``shape``
    is_workspace: bool = False  # T.alloc_global: allocated on every call, never passed
    is_pointer: bool = False  # T.ptr: takes memory for the tensor T.make_tensor made

    @property
    def is_tensor(self) -> bool:
        return isinstance(self.param, Buffer)

    def describe(self) -> str:
        if not self.is_tensor:
            return f"{self.dtype} scalar"
        return f"{self.dtype}[{', '.join(str(d) for d in self.shape)}]"


def _param_spec(index: int, param: Buffer | E.Var, is_output: bool, roles: dict[int, str]) -> ParamSpec:
    if isinstance(param, Buffer):
        shape = tuple(E.as_int(d) if E.as_int(d) is not None else d for d in param.shape)
        strides = None if param.strides is None else \
            tuple(E.as_int(d) if E.as_int(d) is not None else d for d in param.strides)
        return ParamSpec(index, param.name, param, param.dtype, is_output, shape, param.strides is None, strides,
                         roles.get(index) == WORKSPACES, roles.get(index) == POINTERS)
    return ParamSpec(index, param.name, param, param.dtype, is_output)


class ArgBinder:
    """Checks a call's arguments against a kernel's parameters and allocates its outputs."""

    def __init__(
        self, func: PrimFunc, out_idx: tuple[int, ...], device_type: str = "cpu", target_name: str = ""
    ) -> None:
        self.func = func
        self.out_idx = out_idx
        self.device_type = device_type
        self.target_name = target_name or device_type
        roles = {i: key for key in (WORKSPACES, POINTERS) for i in func.attr(key, ())}
        self.specs = [_param_spec(i, p, i in out_idx, roles) for i, p in enumerate(func.params)]
        self.visible = [s for s in self.specs if not s.is_workspace]  # what a caller may pass
        self.inputs = [s for s in self.visible if not s.is_output]
        self.outputs = [s for s in self.specs if s.is_output]
        self.workspaces = [s for s in self.specs if s.is_workspace]
        self.pointers = [s for s in self.specs if s.is_pointer]
        self._fast: Any = None  # generated on the first call with torch loaded (see fast_path)
        self._fast_ready = False

    # ---- errors ---------------------------------------------------------------------------
    def error(self, spec: ParamSpec | None, message: str, hint: str | None = None) -> ArgumentError:
        where = f"kernel `{self.func.name}`"
        if spec is not None:
            where += f", parameter `{spec.name}` ({spec.describe()})"
        return ArgumentError(f"{where}: {message}", loc=self.func.loc, hint=hint)

    def _count_error(self, got: int) -> ArgumentError:
        names = ", ".join(s.name for s in self.inputs) or "nothing"
        message = f"takes {len(self.inputs)} input(s) ({names}) but got {got}"
        hint = f"pass {names} in this order"
        if self.outputs:
            outs = ", ".join(s.name for s in self.outputs)
            hint += (
                f"; the output(s) {outs} are allocated and returned, or pass all "
                f"{len(self.visible)} parameters to write into tensors of your own"
            )
        return self.error(None, message, hint)

    # ---- binding --------------------------------------------------------------------------
    def bind(self, args: tuple[Any, ...]) -> tuple[list[Any], dict[str, int], Any]:
        """Check ``args`` and return ``(one value per parameter, dims, outputs)``: ``dims`` maps
        the name of each dynamic dimension (and integer scalar parameter) to its value; the
        outputs are what the call returns (``None`` when the caller passed every parameter)."""
        if not self._fast_ready:
            from .args_fast import fast_path

            self._fast = fast_path(self)
            self._fast_ready = self._fast is not None or "torch" in sys.modules
        if self._fast is not None:
            bound = self._fast(args)
            if bound is not None:
                return bound
        if len(args) == len(self.inputs):
            given = self.inputs
            allocate = True
        elif len(args) == len(self.visible) and self.outputs:
            given = self.visible
            allocate = False
        else:
            raise self._count_error(len(args))
        dims: dict[E.Var, int] = {}
        values: list[Any] = [None] * len(self.specs)
        like: Any = None  # the first tensor argument: outputs follow its kind and device
        like_spec: Any = None
        for spec, arg in zip(given, args):
            if spec.is_pointer:
                values[spec.index] = arg  # made into a tensor once every dim is bound
            elif spec.is_tensor:
                self._check_tensor(spec, arg, dims)
                if like is None:
                    like, like_spec = arg, spec
                else:
                    self._check_same_device(spec, arg, like_spec, like)
            else:
                arg = self._check_scalar(spec, arg, dims)
            values[spec.index] = arg
        if dims:
            self._check_derived_dims(given, args, dims)
        for spec in self.pointers:
            values[spec.index] = self._pointer_value(spec, values[spec.index], dims)
            if like is None:
                like, like_spec = values[spec.index], spec
            else:
                self._check_same_device(spec, values[spec.index], like_spec, like)
        for spec in self.workspaces:
            values[spec.index] = self._allocate(spec, dims, like)
        named = {var.name: value for var, value in dims.items()} if dims else {}
        if not allocate:
            return values, named, None
        outs = [self._allocate(spec, dims, like) for spec in self.outputs]
        for spec, out in zip(self.outputs, outs):
            values[spec.index] = out
        result = None if not outs else outs[0] if len(outs) == 1 else tuple(outs)
        return values, named, result

    def _pointer_value(self, spec: ParamSpec, arg: Any, dims: dict[E.Var, int]) -> Any:
        """The tensor ``T.make_tensor`` made over the memory ``arg`` points to; its errors name the
        line of the ``T.make_tensor``."""
        from .pointer_args import pointer_value

        def fail(message: str, hint: str) -> ArgumentError:
            return ArgumentError(f"kernel `{self.func.name}`, pointer parameter `{spec.name}`: {message}",
                                 loc=spec.param.loc, hint=hint)

        strides = None if spec.strides is None else tuple(eval_dim(s, dims) for s in spec.strides)
        return pointer_value(arg, self.output_shape(spec, dims), strides, spec.dtype, self.device_type, fail)

    def _check_tensor(self, spec: ParamSpec, arg: Any, dims: dict[E.Var, int]) -> None:
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(arg, torch.Tensor):
            is_torch = True
            shape = tuple(arg.shape)
            device = arg.device.type
        elif type(arg).__module__ == "numpy" and type(arg).__name__ == "ndarray":
            is_torch = False
            shape = arg.shape
            device = "cpu"
        else:
            raise self.error(
                spec,
                f"expected a tensor, got {type(arg).__name__}",
                hint="pass a torch tensor"
                + (" or a numpy array" if self.device_type == "cpu" else f" on the {self.device_type} device"),
            )
        dtype = arg_dtype(arg.dtype)
        if dtype != spec.dtype:
            target = f"torch.{torch_name(spec.dtype)}" if is_torch else f"numpy.{spec.dtype}"
            how = f".to({target})" if is_torch else f".astype({target})"
            raise self.error(spec, f"expected dtype {spec.dtype}, got {arg.dtype}", hint=f"convert it with `{how}`")
        if len(shape) != len(spec.shape):
            raise self.error(
                spec,
                f"expected a {len(spec.shape)}-d tensor, got {len(shape)}-d of shape {list(shape)}",
                hint="reshape it, or check the order of the arguments",
            )
        for axis, (want, got) in enumerate(zip(spec.shape, shape)):
            if isinstance(want, int):
                if want != got:
                    raise self.error(
                        spec,
                        f"dimension {axis} must be {want}, got {got} (shape {list(shape)})",
                        hint="the kernel was compiled for static shapes; pass a tensor of that shape "
                        "or compile it for this one",
                    )
            elif isinstance(want, E.Var):
                bound = dims.get(want)
                if bound is None:
                    dims[want] = int(got)
                elif bound != got:
                    raise self.error(
                        spec,
                        f"dimension {axis} is `{want.name}` = {got}, but another argument set "
                        f"`{want.name}` = {bound} (shape {list(shape)})",
                        hint=f"every tensor must agree on `{want.name}`",
                    )
        if device != self.device_type:
            hint = ".cpu()" if self.device_type == "cpu" else f".to('{self.device_type}')"
            raise self.error(
                spec,
                f"is on device {device!r}, but target {self.target_name} runs kernels on {self.device_type!r}",
                hint=f"move it with `{hint}`, or compile the kernel for a target on {device!r}",
            )
        if spec.contiguous:
            ok = arg.is_contiguous() if is_torch else arg.flags.c_contiguous
            if not ok:
                how = ".contiguous()" if is_torch else "numpy.ascontiguousarray(...)"
                raise self.error(spec, "is not contiguous (row-major)", hint=f"pass `{how}`")
        elif spec.strides is not None:
            self._check_strides(spec, arg, shape, is_torch, dims)

    def _check_same_device(self, spec: ParamSpec, arg: Any, first_spec: ParamSpec, first: Any) -> None:
        """Tensors on two GPUs (the kernel runs on one: the other's memory is out of its reach)."""
        torch = sys.modules.get("torch")
        if torch is None or not isinstance(arg, torch.Tensor) or not isinstance(first, torch.Tensor):
            return
        if arg.device != first.device:
            raise self.error(spec, f"is on {arg.device}, but parameter `{first_spec.name}` is on {first.device}",
                             hint=f"move every tensor to one device, e.g. `.to('{first.device}')`")

    def _actual_strides(self, spec: ParamSpec, arg: Any, is_torch: bool) -> tuple[int, ...]:
        if is_torch:
            return tuple(arg.stride())
        size = arg.itemsize
        if any(s % size for s in arg.strides):
            raise self.error(spec, f"has byte strides {arg.strides} that are not multiples of its element size {size}",
                             hint="pass `numpy.ascontiguousarray(...)` or a view with whole-element strides")
        return tuple(s // size for s in arg.strides)

    def _check_strides(
        self, spec: ParamSpec, arg: Any, shape: tuple[int, ...], is_torch: bool, dims: dict[E.Var, int]
    ) -> None:
        """The declared strides against the argument's (in elements). A dimension of extent 0 or 1
        is never stepped over, so its stride is not compared; a stride variable is bound like a
        dynamic dimension; other stride expressions are checked once every dim is bound."""
        assert spec.strides is not None
        actual = self._actual_strides(spec, arg, is_torch)
        for axis, want in enumerate(spec.strides):
            got = actual[axis]
            if isinstance(want, E.Var):
                bound = dims.get(want)
                if bound is None:
                    dims[want] = int(got)
                    continue
                want_value: int | None = bound
            elif isinstance(want, int):
                want_value = want
            else:
                continue  # an expression: _check_derived_dims
            if want_value != got and shape[axis] > 1:
                raise self._stride_error(spec, shape, actual, dims)

    def _stride_error(
        self, spec: ParamSpec, shape: tuple[int, ...], actual: tuple[int, ...], dims: dict[E.Var, int]
    ) -> ArgumentError:
        assert spec.strides is not None
        declared = [eval_dim(s, dims) for s in spec.strides]
        text = ", ".join(f"{s}" if v is None or isinstance(s, int) else f"{s}={v}"
                         for s, v in zip(spec.strides, declared))
        row_major = [1] * len(shape)
        for axis in range(len(shape) - 2, -1, -1):
            row_major[axis] = row_major[axis + 1] * shape[axis + 1]
        if declared == row_major:
            hint = "pass `.contiguous()` (the kernel declares row-major strides)"
        else:
            hint = (f"pass a tensor (view) with strides ({text}), or declare the strides it has: "
                    f"T.StridedTensor(shape, strides={tuple(actual)!r}), using T.dynamic variables for strides "
                    "that vary from call to call")
        return self.error(spec, f"has strides {tuple(actual)}, but the kernel declares strides ({text})", hint=hint)

    def _check_scalar(self, spec: ParamSpec, arg: Any, dims: dict[E.Var, int]) -> Any:
        dtype = spec.dtype
        value = arg.item() if hasattr(arg, "item") and getattr(arg, "ndim", 0) == 0 else arg
        if dtype.is_int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.error(spec, f"expected an integer, got {type(arg).__name__} {arg!r}")
            lo, hi = dtype_range(dtype)
            if not lo <= value <= hi:
                raise self.error(spec, f"{value} does not fit {dtype.name} (it would wrap around)",
                                 hint=f"pass a value from {lo} to {hi}, or declare the parameter with a wider type")
        elif dtype.is_bool:
            if not isinstance(value, (bool, int)):
                raise self.error(spec, f"expected a bool, got {type(arg).__name__} {arg!r}")
            value = bool(value)
        elif dtype.is_float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.error(spec, f"expected a number, got {type(arg).__name__} {arg!r}")
            value = float(value)
        var = spec.param
        assert isinstance(var, E.Var)
        if dtype.is_int:
            bound = dims.get(var)
            if bound is not None and bound != value:
                raise self.error(
                    spec, f"is {value}, but a tensor dimension `{var.name}` is {bound}",
                    hint="pass the value that matches the tensors' shapes",
                )
            dims[var] = value
        return value

    def _check_derived_dims(self, given: list[ParamSpec], args: tuple[Any, ...], dims: dict[E.Var, int]) -> None:
        for spec, arg in zip(given, args):
            if not spec.is_tensor or spec.is_pointer:  # a pointer's memory is checked by _pointer_value
                continue
            if spec.strides is not None and not spec.contiguous:
                torch = sys.modules.get("torch")
                is_torch = torch is not None and isinstance(arg, torch.Tensor)
                actual = self._actual_strides(spec, arg, is_torch)
                for axis, want in enumerate(spec.strides):
                    if isinstance(want, (int, E.Var)) or arg.shape[axis] <= 1:
                        continue
                    value = eval_dim(want, dims)
                    if value is not None and value != actual[axis]:
                        raise self._stride_error(spec, tuple(arg.shape), actual, dims)
            for axis, want in enumerate(spec.shape):
                if isinstance(want, (int, E.Var)):
                    continue
                value = eval_dim(want, dims)
                if value is not None and value != arg.shape[axis]:
                    raise self.error(
                        spec,
                        f"dimension {axis} must be {want} = {value}, got {arg.shape[axis]}",
                        hint="check the shapes of the arguments against the kernel's signature",
                    )

    def output_shape(self, spec: ParamSpec, dims: dict[E.Var, int]) -> tuple[int, ...]:
        """The concrete shape of output ``spec`` given the bound dims."""
        shape = []
        for axis, d in enumerate(spec.shape):
            value = eval_dim(d, dims)
            if value is None:
                raise self.error(
                    spec,
                    f"cannot allocate this output: dimension {axis} (`{d}`) is not set by any input",
                    hint="give it a static size, make it follow an input tensor's dimension, or pass "
                    "the output tensor yourself",
                )
            shape.append(value)
        return tuple(shape)

    def _allocate(self, spec: ParamSpec, dims: dict[E.Var, int], like: Any) -> Any:
        shape = self.output_shape(spec, dims)
        strides = None
        if spec.strides is not None:
            strides = tuple(eval_dim(s, dims) for s in spec.strides)
            if any(s is None for s in strides):
                raise self.error(
                    spec, f"cannot allocate this output: its strides {list(spec.strides)} are not set by any input",
                    hint="pass the output tensor yourself")
        torch = sys.modules.get("torch")
        use_numpy = like is not None and not (torch is not None and isinstance(like, torch.Tensor))
        if use_numpy:
            import numpy as np

            np_dtype = numpy_dtype(spec.dtype)
            if np_dtype is None:
                raise self.error(
                    spec, f"numpy has no {spec.dtype} dtype for this output", hint="pass torch tensors instead"
                )
            if strides is not None:
                size = max([1] + [(n - 1) * s + 1 for n, s in zip(shape, strides) if n > 0])  # type: ignore[operator]
                base = np.empty(size if all(shape) else 0, dtype=np_dtype)
                item = base.itemsize
                return np.lib.stride_tricks.as_strided(base, shape, [s * item for s in strides])  # type: ignore[operator]
            return np.empty(shape, dtype=np_dtype)
        import torch

        device = like.device if like is not None else torch.device(self.device_type)
        if strides is not None:
            return torch.empty_strided(shape, strides, dtype=torch_dtype(spec.dtype), device=device)
        return torch.empty(shape, dtype=torch_dtype(spec.dtype), device=device)


def torch_name(dtype: DType) -> str:
    return TORCH_NAMES.get(dtype.name, dtype.name)
