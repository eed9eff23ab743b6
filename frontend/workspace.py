"""``T.alloc_global``: a global-memory workspace that the runtime allocates for each call.

The buffer becomes a hidden parameter of the function, after the declared ones and the
``T.empty`` outputs, listed in its ``attrs`` under ``core_ir.stmt.WORKSPACES``. A call allocates
it (uninitialised, on the device of the other tensors) and passes it like any tensor; the caller
neither passes nor gets it. Every kernel of a function with several ``T.Kernel`` blocks gets the
same one, so the first can leave partial results there for the second.
"""

from __future__ import annotations

from typing import Any

from ..core_ir.buffer import Buffer
from ..core_ir.errors import TileLangSyntaxError
from ..core_ir.source import caller_loc
from . import builder as bld
from .spec import dtype_of, shape_of


def alloc_global(shape: Any, dtype: Any, scope: str = "global") -> Buffer:
    """``T.alloc_global(shape, dtype)``: a global workspace of the function, allocated (not
    zeroed) by the runtime on every call and shared by all of its kernels."""
    b = bld.require("T.alloc_global")
    loc = caller_loc()
    if scope != "global":
        raise TileLangSyntaxError(
            f"T.alloc_global allocates global memory; scope={scope!r} is not supported", loc=loc,
            hint="leave out `scope`, or use T.alloc_shared / T.alloc_fragment / T.alloc_local for other scopes",
        )
    buf = b.new_buffer("workspace", shape_of(shape, "T.alloc_global"), dtype_of(dtype), "global", loc)
    b.workspaces.append(buf)
    return buf
