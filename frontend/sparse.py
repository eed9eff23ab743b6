"""``T.gemm_sp`` (and TileLang's ``T.gemm_sp_v2`` spelling): the 2:4 structured-sparse GEMM.

Builds ``core_ir.tileops.GemmSp`` (whose docstring defines the metadata format) after checking
the scopes and dtypes of its operands; ``GemmSp.check`` then checks the shapes.
"""

from __future__ import annotations

from typing import Any

from ..core_ir import dtypes
from ..core_ir.errors import NotSupportedError, TileLangTypeError
from ..core_ir.source import caller_loc
from ..core_ir.tileops import SPARSE_META_DTYPES, GemmSp
from . import builder as bld
from .surface import GemmWarpPolicy, _check_scope, _policy, _py_bool, _py_int, _region

#: the dtypes of A_sparse and B that T.gemm_sp multiplies
SPARSE_INPUT_DTYPES = (dtypes.float16, dtypes.bfloat16)


def gemm_sp(A_sparse: Any, E: Any, B: Any, C: Any, transpose_A: bool = False, transpose_E: bool = False,
            transpose_B: bool = False, policy: Any = GemmWarpPolicy.Square, clear_accum: bool = False,
            k_pack: int = 1, wg_wait: int = 0, annotations: dict[str, Any] | None = None) -> None:
    """``T.gemm_sp(A_sparse, E, B, C)``: ``C += op(A) @ op(B)`` with ``A`` 2:4 sparse along K, given
    as its kept values ``A_sparse`` and metadata ``E`` (``tilelang_x.utils.sparse.compress``).
    TileLang 0.1.15's argument order (``transpose_E`` before ``transpose_B``); ``transpose_E``
    must stay False."""
    _gemm_sp("T.gemm_sp", A_sparse, E, B, C, transpose_A, transpose_E, transpose_B, policy, clear_accum,
             {"k_pack": k_pack, "wg_wait": wg_wait, **(annotations or {})})


def gemm_sp_v2(A_sparse: Any, E: Any, B: Any, C: Any, transpose_A: bool = False, transpose_B: bool = False,
               transpose_E: bool = False, policy: Any = GemmWarpPolicy.Square, clear_accum: bool = False,
               k_pack: int = 1, wg_wait: int = 0) -> None:
    """TileLang's earlier spelling of ``T.gemm_sp`` (``transpose_B`` before ``transpose_E``)."""
    _gemm_sp("T.gemm_sp_v2", A_sparse, E, B, C, transpose_A, transpose_E, transpose_B, policy, clear_accum,
             {"k_pack": k_pack, "wg_wait": wg_wait})


def _gemm_sp(what: str, A_sparse: Any, E: Any, B: Any, C: Any, transpose_A: Any, transpose_E: Any, transpose_B: Any,
             policy: Any, clear_accum: Any, ints: dict[str, Any]) -> None:
    b = bld.require_kernel(what)
    loc = caller_loc()
    if _py_bool(transpose_E, f"{what} transpose_E", loc):
        raise NotSupportedError(f"{what}(transpose_E=True) is not supported by tilelang-x", loc=loc,
                                hint="store E as [M, K / e], what tilelang.utils.sparse.compress returns (and pass "
                                "transpose_B by keyword: in TileLang 0.1.15 the argument after transpose_A is "
                                "transpose_E)")
    ra, re, rb, rc = (_region(x, f"{what} {n}") for x, n in ((A_sparse, "A_sparse"), (E, "E"), (B, "B"), (C, "C")))
    hint = "copy the tile into a T.alloc_shared or T.alloc_fragment buffer first"
    for r, operand in ((ra, "operand A_sparse"), (re, "metadata E"), (rb, "operand B")):
        _check_scope(r, ("shared", "fragment"), what, operand, hint, loc)
    _check_scope(rc, ("fragment", "local"), what, "accumulator C",
                 "allocate the accumulator with T.alloc_fragment(shape, T.float32)", loc)
    a_dt, b_dt = ra.buffer.dtype, rb.buffer.dtype
    if a_dt not in SPARSE_INPUT_DTYPES or b_dt != a_dt:
        raise NotSupportedError(
            f"{what}: A_sparse `{ra.buffer.name}` is {a_dt.name} and B `{rb.buffer.name}` is {b_dt.name}; tilelang-x "
            "multiplies 2:4-sparse float16 or bfloat16 tiles (A_sparse and B of the same dtype)", loc=loc,
            hint="cast both operands to T.float16 or T.bfloat16, or use T.gemm on the dense matrix")
    if rc.buffer.dtype != dtypes.float32:
        raise TileLangTypeError(
            f"{what}: accumulator `{rc.buffer.name}` is {rc.buffer.dtype.name}; the sparse tensor-core product "
            "accumulates in float32", loc=loc, hint="allocate C with T.alloc_fragment(shape, T.float32)")
    if re.buffer.dtype.name not in SPARSE_META_DTYPES:
        raise TileLangTypeError(
            f"{what}: metadata `{re.buffer.name}` is {re.buffer.dtype.name}; E holds 4 bits per group of 4 columns "
            "in an integer dtype", loc=loc,
            hint="declare E as T.int16 ([M, K / 16]), T.uint8 ([M, K / 8]) or T.int32 ([M, K / 32])")
    for name, value in ints.items():  # how a GPU splits the work (and annotations): checked, not used
        if name in ("k_pack", "wg_wait"):
            _py_int(value, f"{what} {name}", loc)
    op = GemmSp(ra, re, rb, rc,
                trans_A=_py_bool(transpose_A, f"{what} transpose_A", loc),
                trans_B=_py_bool(transpose_B, f"{what} transpose_B", loc),
                policy=_policy(policy, loc),
                clear_accum=_py_bool(clear_accum, f"{what} clear_accum", loc),
                loc=loc)
    op.check()
    b.emit(op)
