"""CUDA code of thread indices and warp operations (``core_ir.expr.ThreadIndex`` / ``WarpOp``).

Shuffles are CUDA's ``__shfl_*_sync`` with the full mask (every lane takes part); values are
shuffled in the type the kernel computes them in (``float`` for 16-bit floats, whose values stay
exact), 8- and 16-bit integers and bools as ``int``. Warp reductions call the butterflies of
``include/tlx_warp.h``, ``elect_sync`` the ``tlx_elect_one`` of ``include/tlx_elect.h``; the kernel
includes each only when it uses it. ``match_any_sync`` is ``__match_any_sync``, ``match_all_sync``
the full mask where that is the full mask in every lane; the block's votes are
``__syncthreads_count/and/or``.
"""

from __future__ import annotations

import os

from ...core_ir import expr as E
from ...core_ir.dtypes import DType

FULL = "0xffffffffu"
_SHUFFLES = {"shfl_sync": "__shfl_sync", "shfl_xor": "__shfl_xor_sync", "shfl_down": "__shfl_down_sync",
             "shfl_up": "__shfl_up_sync"}
_AXES = ("x", "y", "z")


def thread_index(e: E.ThreadIndex, block_rank: int) -> str:
    """``threadIdx.<axis>``; a 1-d block's index is the kernel's ``tx``."""
    return "tx" if block_rank == 1 and e.dim == 0 else f"((int)threadIdx.{_AXES[e.dim]})"


def warp_header(e: E.WarpOp) -> str | None:
    """The helper header ``e``'s code calls, if any."""
    if e.op.startswith("warp_reduce_"):
        name = "tlx_warp.h"
    elif e.op == "elect_sync":
        name = "tlx_elect.h"
    else:
        return None
    with open(os.path.join(os.path.dirname(__file__), "include", name)) as fh:
        return fh.read()


def warp_op(e: E.WarpOp, args: list[str], ctype: str) -> str:
    """The expression computing ``e`` from its operands' code ``args``; ``ctype`` is the C type
    ``e``'s dtype is computed in."""
    if e.op in E.BLOCK_VOTE_OPS:
        return f"__{e.op}({args[0]})"
    if e.op == "activemask":
        return "((unsigned long long)__activemask())"
    if e.op in ("any_sync", "all_sync"):
        return f"__{e.op}({FULL}, {args[0]})"
    if e.op == "ballot_sync":
        return f"((unsigned long long)__ballot_sync({FULL}, {args[0]}))"
    if e.op == "elect_sync":
        return "tlx_elect_one()"
    if e.op in ("match_any_sync", "match_all_sync"):
        dt = e.args[0].dtype
        narrow_float = dt.is_float and dt.bits < 32  # __match_any_sync has no half overload
        value = f"(int)({args[0]})" if _widened(dt) else f"(float)({args[0]})" if narrow_float else args[0]
        match = f"__match_any_sync({FULL}, {value})"
        # every lane agrees exactly when each lane's match is the whole warp
        return match if e.op == "match_any_sync" else f"(({match} == {FULL}) ? {FULL} : 0u)"
    value = f"(int)({args[0]})" if _widened(e.dtype) else args[0]
    if e.op in _SHUFFLES:
        out = f"{_SHUFFLES[e.op]}({FULL}, {value}, {args[1]}, {e.width})"
    else:
        out = f"tlx_warp_{e.op[len('warp_reduce_'):]}({value})"
    return f"(({ctype})({out}))" if _widened(e.dtype) else out


def _widened(dt: DType) -> bool:
    """Whether values of ``dt`` travel through the shuffle as ``int``."""
    return dt.is_bool or (dt.is_int and dt.bits < 32)
