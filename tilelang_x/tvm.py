"""``from tilelang import tvm``: the few TVM names TileLang's examples use around kernels.

``tvm.te.var("m")`` / ``tvm.tir.Var("m", "int32")`` make a size known only at run time, as
``T.dynamic("m")`` does (TileLang's dynamic-shape GEMM example declares M, N, K this way), and
``tvm.DataType`` is ``T.dtype``. TVM itself is not part of tilelang-x: any other name raises
``NotSupportedError``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from .core_ir.dtypes import as_dtype
from .core_ir.errors import NotSupportedError


def _var(name: str, dtype: Any = "int32", span: Any = None) -> Any:
    from .frontend.surface import dynamic

    return dynamic(name, dtype)


DataType = as_dtype
te = SimpleNamespace(var=_var)
tir = SimpleNamespace(Var=_var)


def __getattr__(name: str) -> Any:
    raise NotSupportedError(f"tvm.{name} is not supported by tilelang-x (TVM is not part of it)",
                            hint="declare run-time sizes with T.dynamic(\"m\") (or tvm.te.var(\"m\")), "
                            "dtypes with T.dtype(...)")
