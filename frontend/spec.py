"""``T.Tensor`` / ``T.Buffer``: the type of a tensor parameter, written in a signature or as an
in-body annotation. Both ``T.Tensor((M, K), dt)`` and ``T.Tensor[(M, K), dt]`` are accepted."""

from __future__ import annotations

from typing import Any

from ..core_ir import expr as E
from ..core_ir.buffer import BufferData
from ..core_ir.dtypes import DType, as_dtype
from ..core_ir.errors import TileLangError, TileLangTypeError
from ..core_ir.source import caller_loc


def dtype_of(value: Any) -> DType:
    """``as_dtype`` with the user's line attached to the error."""
    if isinstance(value, DType):
        return value
    try:
        return as_dtype(value)
    except TileLangError as err:
        from .pointers import is_pointer_annotation  # pointers.py imports this module

        if is_pointer_annotation(value):
            raise TileLangTypeError(
                "`T.ptr` is not an element dtype: tensors of pointers (pointer tables) are not supported",
                loc=caller_loc(),
                hint="stack the groups' data in one tensor and pass their row offsets in an int32 tensor "
                "(TileLang's example_grouped_gemm_fwd), or pass each pointer as its own `x_ptr: T.ptr` "
                "parameter typed by T.make_tensor",
            ) from None
        raise err.with_loc(caller_loc()) from None


def shape_of(shape: Any, what: str) -> tuple[E.Expr, ...]:
    """A shape argument (an int, an expression, or a list/tuple of them) as a tuple of exprs."""
    if isinstance(shape, (list, tuple)):
        dims = tuple(shape)
    else:
        dims = (shape,)
    out = []
    for d in dims:
        if isinstance(d, bool) or not (isinstance(d, (int, E.Expr)) or E.is_py_scalar(d) and E.as_int(d) is not None):
            raise TileLangTypeError(
                f"{what}: shape entry {d!r} is not an integer or an integer expression",
                loc=caller_loc(),
                hint=f"the shape comes first: {what}(shape, dtype)" if isinstance(d, DType) else
                "write the shape as a tuple of ints, T.const / T.dynamic names or expressions of them",
            )
        e = E.convert(d)
        if not e.dtype.is_int:
            raise TileLangTypeError(f"{what}: shape entry {d} has dtype {e.dtype}, not an integer", loc=caller_loc())
        v = E.as_int(e)
        if v is not None and v < 0:
            raise TileLangTypeError(f"{what}: negative dimension {v}", loc=caller_loc())
        out.append(e)
    return tuple(out)


class TensorSpec:
    """What a ``T.Tensor(...)`` annotation says: shape, dtype, strides and scope."""

    __slots__ = ("shape", "dtype", "strides", "scope", "loc")

    def __init__(self, shape: Any, dtype: Any = "float32", strides: Any = None, scope: str = "global",
                 what: str = "T.Tensor") -> None:
        self.loc = caller_loc()
        self.shape = shape_of(shape, what)
        self.dtype = dtype_of(dtype)
        self.strides = None if strides is None else shape_of(strides, what + " strides")
        self.scope = scope

    def __repr__(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        return f"T.Tensor(({dims}{',' if len(self.shape) == 1 else ''}), {self.dtype})"


class TensorProxy:
    """``T.Tensor`` itself: call it or index it to get a ``TensorSpec``."""

    def __init__(self, name: str, scope: str = "global") -> None:
        self._name = name
        self._scope = scope

    def __call__(self, shape: Any, dtype: Any = "float32", data: Any = None, strides: Any = None,
                 **_: Any) -> Any:
        """A ``TensorSpec``; with ``data=buf.data`` (TileLang's form, inside a kernel) a view of
        ``buf``'s memory with this shape and dtype, as ``T.view``. A third positional argument that
        is not ``buf.data`` is taken as the strides."""
        if isinstance(data, BufferData):
            from .view import view

            return view(data.buffer, shape, dtype)
        return TensorSpec(shape, dtype, strides if data is None else data, self._scope, what=f"T.{self._name}")

    def __getitem__(self, key: Any) -> TensorSpec:
        if isinstance(key, tuple) and len(key) == 2 and not isinstance(key[1], (int, E.Expr)):
            return TensorSpec(key[0], key[1], None, self._scope, what=f"T.{self._name}")
        if isinstance(key, tuple) and len(key) == 3 and isinstance(key[1], (list, tuple)):
            return TensorSpec(key[0], key[2], key[1], self._scope, what=f"T.{self._name}")
        return TensorSpec(key, "float32", None, self._scope, what=f"T.{self._name}")

    def __repr__(self) -> str:
        return f"T.{self._name}"


class StridedTensorProxy(TensorProxy):
    """``T.StridedTensor[(shape), (strides), dtype]`` / ``T.StridedTensor(shape, strides, dtype)``."""

    def __call__(self, shape: Any, strides: Any = None, dtype: Any = "float32", **_: Any) -> TensorSpec:  # type: ignore[override]
        return TensorSpec(shape, dtype, strides, self._scope, what=f"T.{self._name}")
