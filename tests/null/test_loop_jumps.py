# ruff: noqa: F841
"""``break`` / ``continue`` / ``T.loop_break`` in IR loops: the IR they build, where the verifier
refuses them, how the interpreter runs them, and the barriers CUDA sync insertion carries along
them (a ``continue`` into the next iteration, a ``break`` past the loop)."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source
from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.buffer import Buffer
from tilelang_x.core_ir.errors import VerificationError
from tilelang_x.core_ir.stmt import For, Jump, Kernel, PrimFunc
from tilelang_x.core_ir.verify import verify


@tilelang.jit(out_idx=[-1], target="interp")
def nested_jumps(n: int):
    """Out[r, c]: how the loops below count, for row ``r`` of ``A`` (``c`` picks the counter)."""

    @T.prim_func
    def main(A: T.Tensor((4, n), T.int32), Out: T.Tensor((4, 4), T.int32)):
        with T.Kernel(4, threads=32) as bx:
            inner_runs = T.alloc_var(T.int32, 0)
            odd = T.alloc_var(T.int32, 0)
            steps = T.alloc_var(T.int32, 0)
            stepped = T.alloc_var(T.int32, 0)
            for i in T.serial(n):
                for j in range(n):
                    if j > i:
                        break  # leaves the inner loop only
                    inner_runs += 1
                if A[bx, i] % 2 == 0:
                    continue
                odd += 1
            for s in range(1, n, 3):
                if A[bx, s] < 0:
                    T.loop_break()
                stepped += 1
            while steps < 100:
                steps += 1
                if steps < 7:
                    continue
                break
            Out[bx, 0] = inner_runs
            Out[bx, 1] = odd
            Out[bx, 2] = stepped
            Out[bx, 3] = steps

    return main


def test_interpreter_runs_break_and_continue_as_python_does() -> None:
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-5, 20, (4, 10), generator=g, dtype=torch.int32)
    a[0] = torch.arange(10)
    out = nested_jumps(10)(a)
    for r in range(4):
        row = a[r].tolist()
        stepped = 0
        for s in range(1, 10, 3):
            if row[s] < 0:
                break
            stepped += 1
        expected = [sum(i + 1 for i in range(10)), sum(v % 2 != 0 for v in row), stepped, 7]
        assert out[r].tolist() == expected, (r, row)


def test_ir_prints_the_jumps() -> None:
    text = nested_jumps.get_ir(6).script()
    assert text.count("break") == 3 and text.count("continue") == 2, text


def _loop_with(body_fn) -> PrimFunc:
    a = Buffer("A", (8,), dtypes.int32, "global")
    bx, i = E.Var("bx"), E.Var("i")
    return PrimFunc("k", (a,), Kernel((E.const(1),), (bx,), (32,), body_fn(i)))


def test_verifier_refuses_jumps_where_no_loop_can_stop() -> None:
    verify(_loop_with(lambda i: For(i, E.const(8), "serial", Jump("continue"))))
    with pytest.raises(VerificationError, match="`break` inside a T.Parallel loop"):
        verify(_loop_with(lambda i: For(i, E.const(8), "parallel", Jump("break"))))
    with pytest.raises(VerificationError, match="`continue` outside a loop"):
        verify(_loop_with(lambda i: Jump("continue")))
    with pytest.raises(VerificationError, match="unknown jump 'goto'"):
        verify(_loop_with(lambda i: For(i, E.const(8), "serial", Jump("goto"))))


@T.prim_func
def carried_by_continue(A: T.Tensor((8, 64), T.float32), flag: T.Tensor((8,), T.int32),
                        Out: T.Tensor((64,), T.float32)):
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_shared((64,), T.float32)
        acc = T.alloc_fragment((64,), T.float32)
        T.clear(acc)
        for k in T.serial(8):
            if flag[k] != 0:
                T.copy(A[k, 0:64], S)  # marker: copy in the branch
                for i in T.Parallel(64):
                    acc[i] += S[63 - i]
                continue
            T.sync_threads()
        T.copy(acc, Out)


@T.prim_func
def carried_past_break(A: T.Tensor((8, 64), T.float32), flag: T.Tensor((8,), T.int32),
                       Out: T.Tensor((64,), T.float32)):
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_shared((64,), T.float32)
        for k in T.serial(8):
            T.copy(A[k, 0:64], S)
            if flag[k] != 0:
                break
            T.sync_threads()
        for i in T.Parallel(64):
            Out[i] = S[63 - i]


def _kernel_body(func: PrimFunc, arch: str) -> list[str]:
    src, _ = cuda_source(func, arch)
    return [ln.strip() for ln in src[src.index("__global__"):].splitlines()]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_continue_carries_its_hazard_into_the_next_iteration(arch: str) -> None:
    # iteration k reads S after `continue`; iteration k + 1 copies into S: a barrier must come first
    lines = _kernel_body(carried_by_continue, arch)
    branch = lines.index(next(ln for ln in lines if ln.startswith("if (flag[k] != 0)")))
    assert lines[branch + 1] == "__syncthreads();", lines[branch:branch + 4]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_break_carries_its_hazard_past_the_loop(arch: str) -> None:
    # the block leaves the loop right after copying into S; the loop after reads S from other threads
    lines = _kernel_body(carried_past_break, arch)
    read = lines.index(next(ln for ln in lines if ln.startswith("Out[")))
    assert lines[read - 1] == "__syncthreads();" and lines[read - 2] == "}", lines[read - 4:read + 1]
