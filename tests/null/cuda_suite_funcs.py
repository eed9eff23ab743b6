"""The suite kernels (tests/kernels) as PrimFuncs, for the CUDA codegen tests (no GPU needed).

Until ``tilelang_x.jit`` exists, its decorator is stood in by one that returns the builder
itself, so ``gemm.matmul(M, N, K)`` gives the ``PrimFunc``.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable

from tilelang_x.core_ir.stmt import PrimFunc


def _kernel_modules() -> dict[str, types.ModuleType]:
    import tilelang_x

    try:
        tilelang_x.jit  # noqa: B018
    except (AttributeError, ModuleNotFoundError):
        def jit(fn=None, **_):
            return fn if fn is not None else (lambda f: f)

        stub = types.ModuleType("tilelang_x.jit")
        stub.jit = jit
        sys.modules["tilelang_x.jit"] = stub
        tilelang_x.__dict__["jit"] = jit
    names = ("gemm", "elementwise", "reductions", "attention")
    return {n: importlib.import_module(f"tests.kernels.{n}") for n in names}


def _prim(obj: object) -> PrimFunc:
    if isinstance(obj, PrimFunc):
        return obj
    for attr in ("prim_func", "func", "get_prim_func"):
        got = getattr(obj, attr, None)
        if callable(got):
            got = got()
        if isinstance(got, PrimFunc):
            return got
    raise TypeError(f"cannot get a PrimFunc from {obj!r}")


def suite_funcs() -> dict[str, Callable[[], PrimFunc]]:
    m = _kernel_modules()
    g, e, r, a = m["gemm"], m["elementwise"], m["reductions"], m["attention"]
    from tilelang_x.core_ir import dtypes

    def mm(*args, **kw):
        return lambda: _prim(g.matmul(*args, **kw))

    return {
        "gemm_fp16_256": mm(256, 256, 256),
        "gemm_128x128x32_3stage": mm(1024, 1024, 1024),
        "gemm_fp16_tails": mm(200, 136, 96, block_M=64, block_N=64, block_K=32),
        "gemm_transpose_B": mm(256, 128, 128, trans_B=True, block_M=64, block_N=64),
        "gemm_bf16_fp32_accum": mm(128, 256, 128, in_dtype=dtypes.bfloat16, out_dtype=dtypes.float32,
                                   block_M=64, block_N=64),
        "gemm_relu_epilogue": mm(128, 128, 256, relu=True, block_M=64, block_N=64),
        "gemm_fp32_fma": mm(128, 128, 64, in_dtype=dtypes.float32, out_dtype=dtypes.float32, block_M=64,
                            block_N=64, block_K=16),
        "leaky_add_if_then_else": lambda: _prim(e.leaky_add(100, 70)),
        "vector_add_dynamic": lambda: _prim(e.vector_add()),
        "softmax_rows": lambda: _prim(r.softmax(64, 256)),
        "rms_norm": lambda: _prim(r.rms_norm(64, 512)),
        "cumsum": lambda: _prim(r.cumsum(32, 128)),
        "cumsum_reverse": lambda: _prim(r.cumsum(32, 128, reverse=True)),
        "column_sum_atomic_add": lambda: _prim(r.column_sum(200, 100)),
        "flash_attention": lambda: _prim(a.flash_attention(1, 2, 256, 64, False)),
        "flash_attention_causal": lambda: _prim(a.flash_attention(1, 2, 256, 64, True)),
        "flash_attention_pipelined": lambda: _prim(a.flash_attention(1, 2, 256, 64, True, num_stages=2)),
    }
