"""The vector epilogue (``lower/epilogue.py``, pass config ``tlx.vector_epilogue``), checked without a
GPU: the lowered fragment → global copy is run by a small evaluator for every thread and block
position, and the (global element, register slot) pairs it writes must equal those of the
element-wise copy (the switch turned off), tails included; the SASS shows the wide stores."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.kernels import dequant, gemm
from tests.null.cuda_helpers import sass_ops
from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.stages import StageContext, run_stages
from tilelang_x.core_ir.stmt import For, If, Seq, Store
from tilelang_x.core_ir.visit import walk
from tilelang_x.plugins.cuda.lir import Block, Evaluate, Intrin, PtrTo
from tilelang_x.target import Target

OFF = {"tlx.vector_epilogue": False}
#: the vector path alone (the staged epilogue, test_cuda_staged_epilogue.py, would take the sm_90a cases)
VEC = {"tlx.staged_epilogue": False}

_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
        "//": lambda a, b: a // b, "%": lambda a, b: a % b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, "==": lambda a, b: a == b, "and": lambda a, b: a and b,
        "^": lambda a, b: a ^ b, "&": lambda a, b: a & b, ">>": lambda a, b: a >> b, "<<": lambda a, b: a << b}


def _ev(e: E.Expr, env: dict[str, int]) -> Any:
    if isinstance(e, E.Const):
        return e.value
    if isinstance(e, E.Var):
        return env[e.name]
    if isinstance(e, E.BinOp):
        return _OPS[e.op](_ev(e.a, env), _ev(e.b, env))
    if isinstance(e, E.Cast):
        return _ev(e.a, env)
    if isinstance(e, E.Load):  # a register read: the slot it reads
        assert e.buffer.scope == "local"
        return ("slot", _ev(e.indices[0], env))
    raise AssertionError(f"unexpected {type(e).__name__} in an epilogue")


def _flat(buf: Any, idx: list[int]) -> int:
    out = 0
    for i, d in zip(idx, buf.shape):
        assert E.as_int(d) is not None
        out = out * E.as_int(d) + i
    return out


def _run(s: Any, env: dict[str, int]) -> Iterator[tuple[int, int]]:
    """(global flat index, register slot) of every element ``s`` writes."""
    if isinstance(s, Block):
        yield from _run(s.body, env)
    elif isinstance(s, Seq):
        for c in s.stmts:
            yield from _run(c, env)
    elif isinstance(s, For):
        start = E.as_int(s.start) if s.start is not None else 0
        for i in range(start, start + E.as_int(s.extent)):
            yield from _run(s.body, {**env, s.var.name: i})
    elif isinstance(s, If):
        if _ev(s.cond, env):
            yield from _run(s.then, env)
        elif s.otherwise is not None:
            yield from _run(s.otherwise, env)
    elif isinstance(s, Store):
        tag, slot = _ev(s.value, env)
        yield _flat(s.buffer, [_ev(i, env) for i in s.indices]), slot
    elif isinstance(s, Evaluate) and isinstance(s.value, Intrin) and s.value.fn.startswith("tlx_st"):
        ptr, *values = s.value.args
        assert isinstance(ptr, PtrTo)
        base = _flat(ptr.buffer, [_ev(i, env) for i in ptr.indices])
        w = int(s.value.fn[len("tlx_st"):])
        assert base % w == 0, "vector store not aligned"
        if len(values) == 1:  # a pointer to w consecutive registers
            first = _ev(values[0].indices[0], env)
            yield from ((base + j, first + j) for j in range(w))
        for j, a in enumerate(values if len(values) > 1 else ()):
            yield base + j, _ev(a, env)[1]
    else:
        raise AssertionError(f"unexpected {type(s).__name__} in an epilogue")


def _stored(m: Any) -> Any:
    """The buffer an element or vector store ``m`` writes, else ``None``."""
    if isinstance(m, Store):
        return m.buffer
    if isinstance(m, Evaluate) and isinstance(m.value, Intrin) and m.value.fn.startswith("tlx_st"):
        return getattr(m.value.args[0], "buffer", None)
    return None


def _epilogue(func: Any, arch: str, configs: dict[str, bool], dst: str = "") -> tuple[Any, Any, int]:
    """The last copy nest writing global memory (or the tile named ``dst``), the grid, the threads."""
    from tilelang_x.compiler import _core_stages
    from tilelang_x.plugins.cuda.passes import stages

    ctx = StageContext(Target("cuda", arch), {"pass_configs": configs})
    lowered = run_stages(func, _core_stages() + stages(ctx.target), ctx)
    blocks = [n for n in walk(lowered.body) if isinstance(n, Block) and n.label == "parallel" and any(
        b is not None and (b.name == dst if dst else b.scope == "global") for b in map(_stored, walk(n.body)))]
    assert blocks, "no epilogue found"
    grid = [E.as_int(g) for g in _kernel(lowered).grid]
    return blocks[-1], grid, ctx.data["cuda.threads"]


def _kernel(func: Any) -> Any:
    from tilelang_x.plugins.cuda.layout_inference import find_kernel

    return find_kernel(func.body)


def _writes(block: Any, grid: list[int], threads: int) -> set[tuple[int, int, int]]:
    out: set[tuple[int, int, int]] = set()
    names = ("bx", "by", "bz")
    import itertools

    for pos in itertools.product(*(range(g) for g in grid)):
        env = dict(zip(names, pos))
        for tx in range(threads):
            for flat, slot in _run(block, {**env, "tx": tx}):
                key = (flat, slot, tx)
                assert key not in out, f"element {flat} written twice"
                out.add(key)
    return out


def _gemm(*args: Any, **kw: Any) -> Any:
    return gemm.matmul.get_ir(*args, **kw)


CASES = {
    "wgmma_128x256_ws": (lambda: _gemm(256, 512, 128, block_M=128, block_N=256, block_K=64, num_stages=3,
                                       threads=256), "sm_90a", "tlx_st2"),
    "wgmma_tails_relu": (lambda: _gemm(200, 136, 96, block_M=64, block_N=64, block_K=32, relu=True), "sm_90a",
                         "tlx_st2"),
    "mma_tails": (lambda: _gemm(200, 136, 96, block_M=64, block_N=64, block_K=32), "sm_80", "tlx_st2"),
    "mma_fp32_out": (lambda: _gemm(128, 256, 128, out_dtype=dtypes.float32, block_M=64, block_N=64),
                     "sm_80", "tlx_st2"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_vector_epilogue_writes_what_the_element_copy_writes(name: str) -> None:
    make, arch, fn = CASES[name]
    vec, grid, threads = _epilogue(make(), arch, VEC)
    assert any(isinstance(n, Intrin) and n.fn == fn for n in walk(vec)), "the vector path was not taken"
    ref, grid_ref, threads_ref = _epilogue(make(), arch, OFF)
    assert not any(isinstance(n, Intrin) and n.fn.startswith("tlx_st") for n in walk(ref))
    assert (grid, threads) == (grid_ref, threads_ref)
    assert _writes(vec, grid, threads) == _writes(ref, grid, threads)


def test_odd_row_length_keeps_element_stores() -> None:
    vec, _, _ = _epilogue(_gemm(64, 137, 64, block_M=64, block_N=64, block_K=32), "sm_90a", VEC)
    assert not any(isinstance(n, Intrin) and n.fn.startswith("tlx_st") for n in walk(vec))


def _stores(func: Any, configs: dict[str, bool]) -> dict[str, int]:
    return sass_ops(func, r"\b(STG\.E(?:\.U16|\.64|\.128)?)\b", "sm_90a", configs)


def test_sass_wgmma_epilogue_stores_pairs() -> None:
    """128×256 tile, 256 consumer threads: 64 4-byte stores per thread instead of 128 2-byte ones."""
    func = _gemm(512, 512, 512, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)
    on, off = _stores(func, VEC), _stores(func, OFF)
    assert on.get("STG.E") == 64 and not on.get("STG.E.U16"), on
    assert off.get("STG.E.U16") == 128 and not off.get("STG.E"), off


def _w4a16() -> Any:
    return dequant.matmul_w4a16.get_ir(128, 256, 256, 128, block_M=64, block_N=128, block_K=64, num_stages=2,
                                       threads=128)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_fp16_fragment_to_shared_stores_packed_registers(arch: str) -> None:
    """W4A16's dequantized tile (fp16 registers, 8 adjacent values a thread) into its swizzled shared
    tile: one 16-byte store from 8 consecutive registers, writing what the element-wise copy writes."""
    vec, _, threads = _epilogue(_w4a16(), arch, {}, "W_shared")
    stores = [n for n in walk(vec) if isinstance(n, Intrin) and n.fn.startswith("tlx_st")]
    assert stores and all(n.fn == "tlx_st8" and len(n.args) == 2 and n.args[1].buffer.scope == "local"
                          for n in stores), stores
    ref, _, _ = _epilogue(_w4a16(), arch, OFF, "W_shared")
    assert not any(isinstance(n, Intrin) and n.fn.startswith("tlx_st") for n in walk(ref))
    assert _writes(vec, [1], threads) == _writes(ref, [1], threads)


def test_fp32_fragment_to_shared_keeps_element_stores() -> None:
    """A copy that converts (FlashAttention's fp32 ``acc_o`` into its fp16 ``O_shared`` on sm_80)
    stays element-wise: vector stores into shared memory are for registers moved as they are."""
    from tests.null.cuda_helpers import flash_attention_ir

    vec, _, _ = _epilogue(flash_attention_ir(), "sm_80", {}, "O_shared")
    assert not any(isinstance(n, Intrin) and n.fn.startswith("tlx_st") for n in walk(vec))


def test_sass_w4a16_dequantized_tile_stores_16_bytes() -> None:
    ops = sass_ops(_w4a16(), r"\b(STS(?:\.U16|\.64|\.128)?)\b", "sm_90a", {})
    assert ops.get("STS.128") and not ops.get("STS.U16"), ops
    off = sass_ops(_w4a16(), r"\b(STS(?:\.U16|\.64|\.128)?)\b", "sm_90a", OFF)
    assert off.get("STS.U16") and not off.get("STS.128"), off
