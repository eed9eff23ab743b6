"""``tilelang_x.jit`` and ``tilelang_x.compile`` (implemented in ``tilelang_x.frontend.jit``).

Importing this module makes ``tilelang_x.jit`` (the package attribute) this module; so that
``@tilelang.jit`` keeps working after ``import tilelang_x.jit``, the module is callable and
behaves as the ``jit`` function.
"""

import sys
import types
from typing import Any

from tilelang_x.frontend.jit import JITFunc, compile, jit, lazy_jit

__all__ = ["JITFunc", "compile", "jit", "lazy_jit"]


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return jit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
