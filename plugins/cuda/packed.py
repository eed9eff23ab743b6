"""CUDA code of TileLang's packed x2 math (``core_ir.packed``) and ``T.fast_rcp``.

A lane ``Call`` (``add2.1``) of 16-bit floats packs both lanes of each operand into one register,
runs the paired instruction of ``include/tlx_packed.h`` and takes its lane; the two lanes' calls
are the same pure expression, which the CUDA compiler computes once. float32 lanes use one
correctly rounded instruction per lane (the paired float32 forms need sm_100).
"""

from __future__ import annotations

import functools
import os

from ...core_ir.dtypes import DType
from ...core_ir.packed import LANES, lane_operands

#: float32 lane: operation -> CUDA function
_FLOAT32 = {"add2": "__fadd_rn", "sub2": "__fsub_rn", "mul2": "__fmul_rn", "fma2": "__fmaf_rn",
            "max2": "tlx_max2_f", "min2": "tlx_min2_f", "abs2": "fabsf"}
#: 16-bit float dtype -> suffix of its tlx_packed.h functions
_SUFFIX = {"float16": "h", "bfloat16": "b"}


@functools.lru_cache(maxsize=1)
def packed_header() -> str:
    with open(os.path.join(os.path.dirname(__file__), "include", "tlx_packed.h")) as fh:
        return fh.read()


def _use_header(extra_headers: list[str]) -> None:
    if packed_header() not in extra_headers:
        extra_headers.append(packed_header())


def packed_call(op: str, lane: int, elem: DType, args: list[str], extra_headers: list[str]) -> str:
    """Lane ``lane`` of packed ``op`` on lanes of dtype ``elem``; ``args`` is the code of every
    operand's lanes in order (``x0, x1, y0, y1``), each computed in float."""
    _use_header(extra_headers)
    suffix = _SUFFIX.get(elem.name)
    if suffix is None:
        return f"{_FLOAT32[op]}({', '.join(lane_operands(tuple(args), lane))})"
    pairs = [f"tlx_cvt_{suffix}2({', '.join(args[i:i + LANES])})" for i in range(0, len(args), LANES)]
    return f"tlx_{suffix}2_lane(tlx_{op}_{suffix}({', '.join(pairs)}), {lane})"


def fast_rcp_call(arg: str, extra_headers: list[str]) -> str:
    _use_header(extra_headers)
    return f"tlx_fast_rcp({arg})"
