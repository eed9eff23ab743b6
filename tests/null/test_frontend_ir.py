# Kernel code is written as users write it (unused block and loop variables included).
# ruff: noqa: F841, F842, B007, E741
"""The frontend's IR for both programming styles: structure, folding, loops, variables."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels.elementwise import vector_add
from tests.kernels.gemm import matmul_relu
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.buffer import Buffer, Region
from tilelang_x.core_ir.stmt import Alloc, Annotate, For, If, Kernel, PrimFunc, Print, Seq, Store, While
from tilelang_x.core_ir.tileops import Atomic, Copy, CumSum, Fill, Gemm, Reduce
from tilelang_x.core_ir.visit import walk


def nodes(func: PrimFunc, kind: type) -> list:
    return [n for n in walk(func.body) if isinstance(n, kind)]


def ints(exprs) -> list:
    return [E.as_int(e) for e in exprs]


# ---- kernels written as a user would (the suite's shared ones are imported above) -------------

# unlike the suite's GEMM: `order`/`stage` on the pipelined loop, whose structure the tests check
@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M=128, block_N=128, block_K=32, dtype=T.float16, accum_dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3, order=[0, 1, 2], stage=[0, 0, 1]):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


# unlike the suite's: (batch, seq, heads, dim) layout, and V copied from a 4-d point
@tilelang.jit(out_idx=[3])
def flash_attention(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64, num_stages=1, threads=128):
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    shape = [batch, seq_len, heads, dim]
    dtype = T.float16
    accum_dtype = T.float32

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             Output: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
            scores_max = T.alloc_fragment([block_M], accum_dtype)
            scores_max_prev = T.alloc_fragment([block_M], accum_dtype)
            scores_scale = T.alloc_fragment([block_M], accum_dtype)
            scores_sum = T.alloc_fragment([block_M], accum_dtype)
            logsum = T.alloc_fragment([block_M], accum_dtype)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))
            loop_range = (
                T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                if is_causal else T.ceildiv(seq_len, block_N)
            )
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_shared)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0,
                                                     -T.infinity(acc_s.dtype))
                else:
                    T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(scores_max, scores_max_prev)
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[bz, by, k * block_N, 0], V_shared)  # 4-d point with the extents of V_shared
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return main


# unlike the suite's: no weight, and reduce_sum's default dim
@tilelang.jit(out_idx=[-1])
def rms_norm(M, N, blk_m=4, eps=1e-6):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            A_local = T.alloc_fragment((blk_m, N), T.float32)
            A_pow = T.alloc_fragment((blk_m, N), T.float32)
            inv_rms = T.alloc_fragment((blk_m,), T.float32)
            T.copy(A[bx * blk_m:(bx + 1) * blk_m, :], A_local)
            for i, j in T.Parallel(blk_m, N):
                A_pow[i, j] = A_local[i, j] * A_local[i, j]
            T.reduce_sum(A_pow, inv_rms)
            for i in T.Parallel(blk_m):
                inv_rms[i] = T.rsqrt(inv_rms[i] / N + eps)
            for i, j in T.Parallel(blk_m, N):
                A_local[i, j] *= inv_rms[i]
            T.copy(A_local, B[bx * blk_m:(bx + 1) * blk_m, :])

    return main


# ---- classic style ----------------------------------------------------------------------------

def test_classic_gemm_structure():
    f = matmul.get_ir(256, 512, 128)
    assert isinstance(f, PrimFunc) and f.name == "main"
    assert [p.name for p in f.params] == ["A", "B", "C"]
    assert f.out_idx == (2,)
    assert ints(f.params[1].shape) == [128, 512]
    (kernel,) = nodes(f, Kernel)
    assert ints(kernel.grid) == [4, 2] and kernel.threads == (128,)
    assert [v.name for v in kernel.block_vars] == ["bx", "by"]
    (loop,) = nodes(f, For)
    assert loop.kind == "pipelined" and E.as_int(loop.extent) == 4 and loop.var.name == "k"
    assert loop.ann() == {"num_stages": 3, "order": (0, 1, 2), "stage": (0, 0, 1)}
    copies = nodes(f, Copy)
    assert len(copies) == 3
    a_copy = copies[0]
    assert a_copy.src.buffer is f.params[0] and a_copy.dst.buffer.name == "A_shared"
    assert ints(a_copy.src.extents) == [128, 32]  # taken from A_shared
    assert ints(copies[2].dst.extents) == [128, 128] and copies[2].dst.buffer is f.params[2]
    (gemm,) = nodes(f, Gemm)
    assert (gemm.trans_A, gemm.trans_B, gemm.policy, gemm.clear_accum) == (False, False, "Square", False)
    (fill,) = nodes(f, Fill)
    assert fill.value.same_as(E.Const(0.0, T.float32))
    allocs = {a.buffer.name: a.buffer.scope for a in nodes(f, Alloc)}
    assert allocs == {"A_shared": "shared", "B_shared": "shared", "C_local": "fragment"}
    text = f.script()
    assert "for k in T.Pipelined(4" in text and "with T.Kernel(4, 2, threads=128) as (bx, by):" in text


def test_classic_script_is_deterministic_and_args_specialise():
    assert matmul.get_ir(256, 256, 256).script() == matmul.get_ir(256, 256, 256).script()
    assert matmul.get_ir(256, 256, 256).script() != matmul.get_ir(256, 256, 512).script()


def test_flash_attention_ir():
    causal = flash_attention.get_ir(2, 4, 256, 64, True)
    plain = flash_attention.get_ir(2, 4, 256, 64, False)
    # Python `if is_causal:` folds: only the taken branch is in the IR
    assert not nodes(causal, If) and not nodes(plain, If)
    assert any(isinstance(n, E.Select) for n in walk(causal.body))
    assert not any(isinstance(n, E.Select) for n in walk(plain.body))
    assert len(nodes(plain, Fill)) == len(nodes(causal, Fill)) + 1  # T.clear(acc_s)
    # 4-d slices of Q into a 2-d shared tile: unit dims squeeze, the slice extent folds to 64
    q_copy = nodes(causal, Copy)[0]
    assert q_copy.src.buffer.name == "Q" and ints(q_copy.src.extents) == [1, 64, 1, 64]
    v_copy = [c for c in nodes(causal, Copy) if c.src.buffer.name == "V"][0]
    assert ints(v_copy.src.extents) == [1, 1, 64, 64]  # point V[bz, by, k*64, 0] takes V_shared's extents
    reduces = nodes(causal, Reduce)
    assert [(r.kind, r.dim, r.clear) for r in reduces] == [("max", 1, False), ("sum", 1, True)]
    gemms = nodes(causal, Gemm)
    assert [(g.trans_B, g.policy) for g in gemms] == [(True, "FullRow"), (False, "FullRow")]
    assert any(isinstance(n, E.Call) and n.name == "exp2" for n in walk(causal.body))
    (pipe,) = [f for f in nodes(causal, For) if f.kind == "pipelined"]
    assert isinstance(pipe.extent, E.BinOp) and pipe.extent.op == "min"  # causal loop bound
    (pipe_plain,) = [f for f in nodes(plain, For) if f.kind == "pipelined"]
    assert E.as_int(pipe_plain.extent) == 4
    fill_max = nodes(causal, Fill)[2]
    assert fill_max.value.value == -float("inf")


def test_flash_attention_frontend_is_fast():
    start = time.perf_counter()
    flash_attention.get_ir(1, 8, 1024, 128, True)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    flash_attention.get_ir(1, 8, 2048, 128, False)
    warm = time.perf_counter() - start
    assert warm < 0.05, warm
    assert cold < 0.15, cold


def test_rms_norm_reduce_sum_default_dim():
    f = rms_norm.get_ir(64, 512)
    (r,) = nodes(f, Reduce)
    assert (r.kind, r.dim, r.clear) == ("sum", 1, True)  # dim=-1 normalised
    assert r.src.buffer.name == "A_pow" and r.dst.buffer.name == "inv_rms"


def test_dynamic_dim_stays_symbolic():
    f = vector_add.get_ir()
    a, b, c = f.params
    (n,) = a.shape
    assert isinstance(n, E.Var) and n.name == "n"
    assert b.shape[0] is n and c.shape[0] is n
    (kernel,) = nodes(f, Kernel)
    assert n in E.free_vars(kernel.grid[0])
    (branch,) = nodes(f, If)
    assert isinstance(branch.cond, E.BinOp) and branch.cond.op == "<"
    assert isinstance(branch.then, Store) and branch.then.buffer is c


# ---- eager style ------------------------------------------------------------------------------

def test_eager_gemm_binds_consts_from_tensors():
    a = torch.zeros(256, 192, dtype=torch.float16)
    b = torch.zeros(192, 128, dtype=torch.float16)
    f = matmul_relu.get_ir(a, b, block_M=64, block_N=64)
    assert matmul_relu.style == "eager"
    assert [p.name for p in f.params] == ["A", "B", "C"]
    assert f.out_idx == (2,)
    assert [ints(p.shape) for p in f.params] == [[256, 192], [192, 128], [256, 128]]
    (kernel,) = nodes(f, Kernel)
    assert ints(kernel.grid) == [2, 4]
    (pipe,) = [x for x in nodes(f, For) if x.kind == "pipelined"]
    assert E.as_int(pipe.extent) == 6
    parallel = [x for x in nodes(f, For) if x.kind == "parallel"]
    assert [x.var.name for x in parallel] == ["i", "j"]


def test_eager_get_ir_from_size_keywords():
    f = matmul_relu.get_ir(M=128, N=64, K=32, block_M=64, block_N=64)
    assert [ints(p.shape) for p in f.params] == [[128, 32], [32, 64], [128, 64]]
    g = matmul_relu.get_ir(np.zeros((128, 32), np.float16), np.zeros((32, 64), np.float16), block_M=64,
                            block_N=64)
    assert g.script() == f.script()


@tilelang.jit
def two_outputs(X, scale: float = 2.0):
    M, N = T.const("M N")
    X: T.Tensor[(M, N), T.float32]
    Y = T.empty((M, N), T.float32)
    S = T.empty((M,), T.float32)
    if N % 32 == 0:  # Python control flow over a T.const: folds in the second trace
        block = 32
    else:
        block = N
    with T.Kernel(M, threads=block) as bx:
        row = T.alloc_fragment((N,), T.float32)
        total = T.alloc_fragment((1,), T.float32)
        T.copy(X[bx, :], row)
        for j in T.Parallel(N):
            row[j] = row[j] * scale
        T.reduce_sum(row, total, dim=0)
        T.copy(row, Y[bx, :])
        S[bx] = total[0]
    return Y, S


def test_eager_python_control_flow_over_consts_and_tuple_return():
    f = two_outputs.get_ir(torch.zeros(8, 64))
    assert f.out_idx == (1, 2) and [p.name for p in f.params] == ["X", "Y", "S"]
    (kernel,) = nodes(f, Kernel)
    assert kernel.threads == (32,)
    g = two_outputs.get_ir(torch.zeros(8, 20))
    assert nodes(g, Kernel)[0].threads == (20,)
    h = two_outputs.get_ir(torch.zeros(8, 64), scale=3.0)
    assert "3.0" in h.script() and "2.0" in f.script()


@tilelang.jit
def mixed_dynamic(A):
    K = T.const("K")
    m = T.dynamic("m")
    A: T.Tensor((m, K), T.float32)
    B = T.empty((m, K), T.float32)
    with T.Kernel(T.ceildiv(m, 32), threads=128) as bx:
        for i, j in T.Parallel(32, K):
            if bx * 32 + i < m:
                B[bx * 32 + i, j] = A[bx * 32 + i, j] + 1
    return B


def test_eager_mixed_dynamic_stays_symbolic():
    f = mixed_dynamic.get_ir(torch.zeros(100, 16))
    a = f.params[0]
    assert isinstance(a.shape[0], E.Var) and a.shape[0].name == "m" and E.as_int(a.shape[1]) == 16
    # the dynamic dim is not part of the specialisation: another m gives the same entry
    assert mixed_dynamic.get_ir(torch.zeros(7, 16)) is f


# ---- Python values fold, symbolic ones become IR ----------------------------------------------

def branches(flag):
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32), n: T.int32):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                if flag:
                    A[i] = 1.0
                elif n > 3:
                    A[i] = 2.0
                else:
                    A[i] = 3.0
                if i < n and (flag or i > 2):
                    A[i] = 4.0
                if flag and i > 2:
                    A[i] = 5.0
                if not flag:
                    A[i] = 6.0
                A[i] = A[i] if flag else A[i] + 1
                A[i] = 7.0 if i < 8 else 8.0

    return main


def test_python_if_folds_symbolic_if_builds_ir():
    on, off = branches(True), branches(False)
    on_ifs, off_ifs = nodes(on, If), nodes(off, If)
    # on: `if flag` folds to A[i]=1; `i < n and (True or ...)` -> i < n; `flag and i > 2` -> i > 2
    assert len(on_ifs) == 2
    assert on_ifs[0].cond.op == "<" and on_ifs[1].cond.op == ">"
    stores = [s.value for s in nodes(on, Store)]
    assert E.as_int(E.cast(stores[0], T.int32)) == 1
    # off: `elif n > 3` is an IR branch with an else; `i < n and (False or i > 2)`; no `flag and`
    assert [i.otherwise is not None for i in off_ifs] == [True, False]
    assert off_ifs[1].cond.op == "and"
    off_values = [s.value for s in nodes(off, Store)]
    assert any(isinstance(v, E.Const) and v.value == 6.0 for v in off_values)
    assert not any(isinstance(v, E.Const) and v.value == 6.0 for v in stores)
    # x if c else y: Python condition picks one side, a symbolic one makes a Select
    assert isinstance(stores[-1], E.Select)
    assert isinstance(stores[-2], E.Load)
    assert isinstance(off_values[-2], E.BinOp)


def test_chained_comparison_and_short_circuit():
    holder = None

    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(4, threads=64) as bx:
            for i in T.Parallel(64):
                if 0 <= bx * 16 + i < 64:
                    A[i] = 1.0
                if holder is not None and holder.missing:  # short-circuits: never evaluates .missing
                    A[i] = 2.0
                if 1 < 2 < 3:
                    A[i] = 3.0

    (branch,) = nodes(main, If)
    assert branch.cond.op == "and"
    assert {branch.cond.a.op, branch.cond.b.op} == {">=", "<"}
    assert [s.value.value for s in nodes(main, Store)] == [1.0, 3.0]


# ---- loops ------------------------------------------------------------------------------------

def test_loop_kinds_and_ranges():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32), n: T.int32):
        with T.Kernel(1, threads=32) as bx:
            for i in range(4):
                A[i] = 0.0
            for i in range(2, n):
                A[i] = 1.0
            for i in T.serial(1, 9, 2):
                A[i] = 2.0
            for i in T.unroll(8):
                A[i] = 3.0
            for i in T.vectorized(4):
                A[i] = 4.0
            for i, j in T.grid(2, 3):
                A[i * 3 + j] = 5.0
            for v in [0.5, 1.5]:  # a Python list unrolls at trace time
                A[0] = v

    loops = [x for x in walk(main.body) if isinstance(x, For)]
    kinds = [(x.kind, E.as_int(x.start) if x.start is not None else None, str(x.extent)) for x in loops]
    assert kinds == [
        ("serial", None, "4"), ("serial", 2, "n - 2"), ("serial", None, "4"), ("unroll", None, "8"),
        ("vectorized", None, "4"), ("serial", None, "2"), ("serial", None, "3"),
    ]
    step = loops[2]
    (store,) = [s for s in walk(step.body) if isinstance(s, Store)]
    assert str(store.indices[0]) == "1 + i * 2" and step.var.name == "i"
    top = [s for s in main.body.body.stmts if isinstance(s, Store)] if isinstance(main.body.body, Seq) else []
    assert [s.value.value for s in top] == [0.5, 1.5]


def test_parallel_nest_and_loop_names():
    @T.prim_func
    def main(A: T.Tensor((8, 16, 4), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            for a, b, c in T.Parallel(8, 16, 4):
                A[a, b, c] = 0.0

    (outer,) = [x for x in main.body.body.stmts] if isinstance(main.body.body, Seq) else [main.body.body]
    assert isinstance(outer, For) and outer.kind == "parallel" and outer.var.name == "a"
    assert outer.body.var.name == "b" and outer.body.body.var.name == "c"
    assert [E.as_int(x) for x in (outer.extent, outer.body.extent, outer.body.body.extent)] == [8, 16, 4]


def test_while_symbolic_and_python():
    @T.prim_func
    def main(A: T.Tensor((64,), T.int32)):
        with T.Kernel(1, threads=1) as bx:
            k = T.alloc_var(T.int32, 0)
            while k < A[0]:
                k += 1
            steps = 0
            while steps < 3:  # Python: unrolled
                A[steps] = steps
                steps += 1

    (loop,) = nodes(main, While)
    assert isinstance(loop.cond, E.BinOp) and loop.cond.op == "<"
    assert isinstance(loop.body, Store) and loop.body.buffer.name == "k"
    top = [s for s in walk(main.body) if isinstance(s, Store) and s.buffer.name == "A"]
    assert [ints(s.indices) for s in top] == [[0], [1], [2]]


# ---- variables --------------------------------------------------------------------------------

def test_alloc_var_assignment_becomes_store():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=1) as bx:
            acc = T.alloc_var(T.float32)
            cnt: T.int32 = 5
            acc = 0
            for i in T.serial(64):
                acc += A[i]
                cnt = cnt + 1
            A[0] = acc
            tmp = acc * 2  # a plain Python name holding an expression
            A[1] = tmp

    allocs = nodes(main, Alloc)
    assert [(a.buffer.name, a.buffer.scope, a.buffer.dtype.name) for a in allocs] == [
        ("acc", "var", "float32"), ("cnt", "var", "int32")]
    assert allocs[0].init is None and E.as_int(allocs[1].init) == 5
    stores = nodes(main, Store)
    assert [s.buffer.name for s in stores] == ["acc", "acc", "cnt", "A", "A"]
    assert stores[0].value.same_as(E.Const(0.0, T.float32))
    assert isinstance(stores[1].value, E.BinOp) and stores[1].value.op == "+"
    assert isinstance(stores[3].value, E.Load) and stores[3].value.buffer.name == "acc"
    assert isinstance(stores[4].value, E.BinOp)


def test_buffers_take_their_variable_names():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            first, second = T.alloc_shared((8,), T.float32), T.alloc_fragment((8,), T.float32)
            alias = first
            T.copy(A[0:8], alias)
            T.copy(first, second)

    assert [a.buffer.name for a in nodes(main, Alloc)] == ["first", "second"]


# ---- macros, closures, globals ----------------------------------------------------------------

SCALE = 3.0


@T.macro
def scale_row(buf, row, factor):
    for j in T.Parallel(16):
        if j < row:
            buf[row, j] = buf[row, j] * factor
    return buf[row, 0] + 1


def test_macro_inlines_and_sees_globals():
    offset = 2

    @T.prim_func
    def main(A: T.Tensor((16, 16), T.float32)):
        with T.Kernel(16, threads=16) as bx:
            first = scale_row(A, bx, SCALE)
            A[bx, 1] = first + offset

    loops = nodes(main, For)
    assert len(loops) == 1 and loops[0].kind == "parallel"
    assert len(nodes(main, If)) == 1
    last = nodes(main, Store)[-1]
    assert "3.0" in main.script()
    assert isinstance(last.value, E.BinOp) and E.as_int(E.cast(last.value.b, T.int32)) == 2


def test_tensor_annotation_spellings_and_scalar_params():
    @T.prim_func
    def main(A: T.Tensor[(4, 8), T.float16], B: T.Buffer((4, 8), "float16"), n: T.int32, x: T.float32):
        with T.Kernel(1, threads=32) as bx:
            for i, j in T.Parallel(4, 8):
                B[i, j] = A[i, j] * x + n

    a, b, n, x = main.params
    assert isinstance(a, Buffer) and isinstance(b, Buffer)
    assert ints(a.shape) == ints(b.shape) == [4, 8] and a.dtype == b.dtype == T.float16
    assert isinstance(n, E.Var) and n.dtype == T.int32 and isinstance(x, E.Var) and x.dtype == T.float32


# ---- remaining tile ops, annotations ----------------------------------------------------------

def test_cumsum_atomic_annotations_print():
    @T.prim_func
    def main(X: T.Tensor((32, 64), T.float32), S: T.Tensor((64,), T.float32), C: T.Tensor((32, 64), T.float32)):
        with T.Kernel(2, threads=128) as bx:
            T.use_swizzle(8, order="column")
            tile = T.alloc_shared((16, 64), T.float32)
            frag = T.alloc_fragment((16, 64), T.float32)
            T.annotate_layout({tile: "swizzled"})
            T.copy(X[bx * 16, 0], tile)
            T.cumsum(tile, dim=1)
            T.cumsum(tile, frag, dim=-1, reverse=True)
            for j in T.Parallel(64):
                T.atomic_add(S[j], frag[0, j])
            T.atomic_max(C[bx * 16, 0], frag)
            T.print(frag, msg="frag")

    swizzle, layout = nodes(main, Annotate)
    assert swizzle.kind == "swizzle" and swizzle.data == (8, "column", True)
    assert layout.kind == "layout" and layout.data[0][0].name == "tile" and layout.data[0][1] == "swizzled"
    c1, c2 = nodes(main, CumSum)
    assert (c1.src.buffer is c1.dst.buffer, c1.dim, c1.reverse) == (True, 1, False)
    assert (c2.dst.buffer.name, c2.dim, c2.reverse) == ("frag", 1, True)
    scalar, tile = nodes(main, Atomic)
    assert scalar.kind == "add" and ints(scalar.dst.extents) == [1] and isinstance(scalar.value, E.Load)
    assert tile.kind == "max" and isinstance(tile.value, Region) and ints(tile.dst.extents) == [16, 64]
    (p,) = nodes(main, Print)
    assert p.msg == "frag" and p.value.name == "frag"


def test_gemm_options():
    @T.prim_func
    def main(A: T.Tensor((64, 32), T.float16)):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((32, 64), T.float16)
            b = T.alloc_fragment((64, 32), T.float16)
            c = T.alloc_fragment((64, 64), T.float32)
            T.gemm(a, b, c, transpose_A=True, transpose_B=True, policy=T.GemmWarpPolicy.FullCol,
                   clear_accum=True, k_pack=2, wg_wait=1)

    (g,) = nodes(main, Gemm)
    assert (g.trans_A, g.trans_B, g.policy, g.clear_accum, g.k_pack, g.wg_wait) == (
        True, True, "FullCol", True, 2, 1)


def test_copy_rank_and_region_sugar():
    @T.prim_func
    def main(Q: T.Tensor((2, 128, 4, 32), T.float16), O: T.Tensor((2, 4, 128, 32), T.float16)):
        with T.Kernel(2, 4, 2, threads=128) as (bx, by, bz):
            q = T.alloc_shared((64, 32), T.float16)
            T.copy(Q[bz, bx * 64:(bx + 1) * 64, by, :], q)
            T.copy(q, O[bz, by, bx * 64, 0])
            T.copy(q[0:32, :], O[bz, by, 0:32, :])

    c1, c2, c3 = nodes(main, Copy)
    assert ints(c1.src.extents) == [1, 64, 1, 32]
    assert ints(c2.dst.extents) == [1, 1, 64, 32] and str(c2.dst.starts[2]) == "bx * 64"
    assert ints(c3.src.extents) == [32, 32] and ints(c3.dst.extents) == [1, 1, 32, 32]


def test_expression_helpers():
    assert T.ceildiv(10, 4) == 3 and T.min(3, 5) == 3 and T.max(1, 7, 4) == 7
    n = T.dynamic("n")
    assert str(T.ceildiv(n, 4)) == "(n + 3) // 4"
    assert T.exp(n).dtype == T.float32 and T.isnan(T.cast(n, T.float16)).dtype == T.bool
    assert T.if_then_else(True, 1, 2).value == 1
    assert T.infinity(T.float16).value == float("inf") and T.infinity(T.float16).dtype == T.float16
    assert T.cast(n, "int64").dtype == T.int64
    assert T.symbolic is T.dynamic
    for name in ("exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "abs", "sigmoid", "sin", "cos",
                 "floor", "ceil", "round", "trunc", "erf", "isnan", "isinf"):
        assert getattr(T, name)(T.cast(n, T.float32)).name == name
    assert T.pow(n, 2).name == "pow" and T.fmod(T.cast(n, T.float32), 2.0).name == "fmod"
    assert T.bool.name == "bool" and T.float8_e4m3.bits == 8 and T.uint8.kind == "uint"


@pytest.mark.parametrize("causal", [True, False])
def test_flash_attention_script_round_trip(causal):
    f = flash_attention.get_ir(1, 2, 128, 64, causal)
    text = f.script()
    assert text.count("T.gemm(") == 2 and "T.Pipelined" in text
    assert ("T.if_then_else" in text) == causal


class Op:
    """A kernel factory written as a method: the kernel closes over `self` and `M`."""

    value = 3.0

    def build(self, M):
        @T.prim_func
        def main(A: T.Tensor((M,), T.float32)):
            """A docstring
that is less indented than the function (source capture must still parse it).
            """

            @T.macro
            def put(i, v):
                A[i] = v

            with T.Kernel(1, threads=[32, 2]) as bx:
                put(0, self.value)
                k = T.alloc_var(T.int32, 0)
                while k != 4:
                    if k == 2:
                        A[1] = 2.0
                    k += 1

        return main


def test_method_closure_nested_macro_and_var_comparisons():
    f = Op().build(8)
    (kernel,) = nodes(f, Kernel)
    assert kernel.threads == (32, 2)
    first = nodes(f, Store)[0]
    assert first.buffer.name == "A" and first.value.value == 3.0
    (loop,) = nodes(f, While)
    assert loop.cond.op == "!=" and isinstance(loop.cond.a, E.Load)  # the var's value, not its identity
    (branch,) = nodes(f, If)
    assert branch.cond.op == "==" and isinstance(branch.cond.a, E.Load)
    assert f.params[0].loc is not None and f.params[0].loc.file == __file__


def test_generic_reduce_spellings():
    @T.prim_func
    def main(A: T.Tensor((4, 8), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_fragment((4, 8), T.float32)
            r = T.alloc_fragment((4,), T.float32)
            T.reduce(s, r, "absmax", 1, False)
            T.reduce("min", s, r, dim=-1)
            T.reduce_abssum(s, r, 1)

    assert [(x.kind, x.dim, x.clear) for x in nodes(main, Reduce)] == [
        ("absmax", 1, False), ("min", 1, True), ("abssum", 1, True)]


def test_prim_func_parameters_typed_in_the_body():
    @T.prim_func
    def main(A, n, B):
        A: T.Tensor((16,), T.float32)
        n: T.int32
        B: T.Tensor((16,), T.float32)
        with T.Kernel(1, threads=16) as bx:
            for i in T.Parallel(16):
                if i < n:
                    B[i] = A[i]

    a, n, b = main.params
    assert (a.name, b.name) == ("A", "B") and isinstance(n, E.Var) and n.dtype == T.int32
    (branch,) = nodes(main, If)
    assert branch.cond.b is n


def test_traces_in_parallel_threads_stay_apart():
    from concurrent.futures import ThreadPoolExecutor

    sizes = [64 * (k + 1) for k in range(8)]
    with ThreadPoolExecutor(4) as pool:
        funcs = list(pool.map(lambda m: matmul.get_ir(m, 128, 64), sizes))
    for m, f in zip(sizes, funcs):
        assert ints(f.params[0].shape) == [m, 64]
        assert len(nodes(f, Copy)) == 3 and len(nodes(f, Kernel)) == 1
