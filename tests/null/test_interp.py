"""The reference interpreter on hand-built IR, compared with numpy and torch."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

import numpy as np
import pytest
import torch

from tilelang_x.core_ir import dtypes as D
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.buffer import Buffer, Region
from tilelang_x.core_ir.errors import OutOfBoundsError, TileLangError
from tilelang_x.core_ir.gemm_precision import round_tf32
from tilelang_x.core_ir.source import SourceLoc
from tilelang_x.core_ir.stmt import Alloc, Annotate, For, If, Kernel, PrimFunc, Print, Seq, Store, While
from tilelang_x.core_ir.tileops import Atomic, Copy, CumSum, Fill, Gemm, Reduce
from tilelang_x.plugins.interp import plugin
from tilelang_x.target import Target

INTERP = Target("interp")


# ---- small IR builders -----------------------------------------------------------------------

def here(back: int = 1) -> SourceLoc:
    frame = inspect.currentframe()
    for _ in range(back + 1):
        frame = frame.f_back
    return SourceLoc(frame.f_code.co_filename, frame.f_lineno)


def c(v):
    return E.const(v)


def st(buf: Buffer, idx, value) -> Store:
    idx = idx if isinstance(idx, tuple) else (idx,)
    return Store(buf, tuple(E.convert(i) for i in idx), E.cast(value, buf.dtype), loc=here())


def par(*extents: int, body: Callable[..., object]) -> For:
    """``for i, j in T.Parallel(*extents): body(i, j)``."""
    vs = [E.Var(f"p{n}") for n in range(len(extents))]
    node = body(*vs)
    node = node if not isinstance(node, list) else Seq(tuple(node))
    for v, n in reversed(list(zip(vs, extents))):
        node = For(v, E.convert(n), "parallel", node)
    return node


def loop(n, body: Callable[[E.Var], object], kind: str = "serial", start=None) -> For:
    v = E.Var("k")
    node = body(v)
    node = node if not isinstance(node, list) else Seq(tuple(node))
    return For(v, E.convert(n), kind, node, None if start is None else E.convert(start))


def kernel(name: str, params, grid, body: Callable[..., list]) -> PrimFunc:
    bvars = tuple(E.Var(n) for n in ("bx", "by", "bz")[: len(grid)])
    stmts = body(*bvars)
    k = Kernel(tuple(E.convert(g) for g in grid), bvars, (128,), Seq(tuple(stmts)), loc=here())
    return PrimFunc(name, tuple(params), Seq((k,)), loc=here())


def alloc(name: str, shape, dtype, scope: str = "fragment") -> Buffer:
    return Buffer(name, shape, dtype, scope)


def full(b: Buffer) -> Region:
    return Region.full(b)


def region(b: Buffer, starts, extents) -> Region:
    return Region(b, tuple(E.convert(s) for s in starts), tuple(E.convert(e) for e in extents))


def run(func: PrimFunc, *args, dims=None):
    binary = plugin.tlx_compile(target=INTERP, func=func, source=func.script(), ctx=None)
    launcher = plugin.tlx_load(target=INTERP, func=func, binary=binary, ctx=None)
    launcher(list(args), dims)
    return args


def fp32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


# ---- GEMM --------------------------------------------------------------------------------------

def gemm_kernel(M, N, K, BM, BN, BK, in_dt, acc_dt, out_dt, trans_A=False, trans_B=False, relu=False):
    A = Buffer("A", (K, M) if trans_A else (M, K), in_dt)
    B = Buffer("B", (N, K) if trans_B else (K, N), in_dt)
    C = Buffer("C", (M, N), out_dt)

    def body(bx, by):
        As = alloc("A_s", (BK, BM) if trans_A else (BM, BK), in_dt, "shared")
        Bs = alloc("B_s", (BN, BK) if trans_B else (BK, BN), in_dt, "shared")
        Cf = alloc("C_f", (BM, BN), acc_dt)

        def step(k):
            a_reg = region(A, (k * BK, by * BM), (BK, BM)) if trans_A else region(A, (by * BM, k * BK), (BM, BK))
            b_reg = region(B, (bx * BN, k * BK), (BN, BK)) if trans_B else region(B, (k * BK, bx * BN), (BK, BN))
            return [Copy(a_reg, full(As)), Copy(b_reg, full(Bs)),
                    Gemm(full(As), full(Bs), full(Cf), trans_A=trans_A, trans_B=trans_B)]

        stmts = [Alloc(As), Alloc(Bs), Alloc(Cf),
                 Annotate("swizzle", (10, "row", True)), Annotate("layout", ((As, None),)),
                 Fill(full(Cf), c(0)),
                 loop(math.ceil(K / BK), step, "pipelined")]
        if relu:
            stmts.append(par(BM, BN, body=lambda i, j: st(Cf, (i, j), E.binary("max", Cf[i, j], 0))))
        stmts.append(Copy(full(Cf), region(C, (by * BM, bx * BN), (BM, BN))))
        return stmts

    return kernel("gemm", (A, B, C), (math.ceil(N / BN), math.ceil(M / BM)), body)


def test_gemm_256_fp16_relu():
    f = gemm_kernel(256, 256, 256, 128, 128, 32, D.float16, D.float32, D.float16, relu=True)
    a = torch.randn(256, 256, dtype=torch.float16)
    b = torch.randn(256, 256, dtype=torch.float16)
    out = torch.empty(256, 256, dtype=torch.float16)
    run(f, a, b, out)
    ref = torch.relu(a.float() @ b.float())
    torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=2e-3)


TORCH_DT = {
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
    "float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2, "int8": torch.int8,
    "int32": torch.int32,
}


@pytest.mark.parametrize("trans_A", [False, True])
@pytest.mark.parametrize("trans_B", [False, True])
@pytest.mark.parametrize("in_dt", ["float16", "bfloat16", "float8_e4m3", "float8_e5m2", "int8", "float32"])
def test_gemm_transposes_and_dtypes(trans_A, trans_B, in_dt):
    M, N, K = 48, 40, 96
    dt = D.as_dtype(in_dt)
    acc = D.int32 if dt.is_int else D.float32
    f = gemm_kernel(M, N, K, 32, 32, 32, dt, acc, acc, trans_A, trans_B)
    g = torch.Generator().manual_seed(1)
    if dt.is_int:
        a = torch.randint(-128, 128, (M, K), dtype=torch.int8, generator=g)
        b = torch.randint(-128, 128, (K, N), dtype=torch.int8, generator=g)
        ref = a.long() @ b.long()
    else:
        a = torch.randn(M, K, generator=g).to(TORCH_DT[in_dt])
        b = torch.randn(K, N, generator=g).to(TORCH_DT[in_dt])
        if in_dt == "float32":  # T.gemm's default float32 precision rounds the operands to TF32
            ref = torch.from_numpy(round_tf32(a.numpy())).double() @ torch.from_numpy(round_tf32(b.numpy())).double()
        else:
            ref = a.double() @ b.double()
    out = torch.zeros(M, N, dtype=TORCH_DT[acc.name])
    a_arg = a.t().contiguous() if trans_A else a
    b_arg = b.t().contiguous() if trans_B else b
    run(f, a_arg, b_arg, out)
    if dt.is_int:
        assert torch.equal(out.long(), ref)
    else:
        torch.testing.assert_close(out.double(), ref, atol=1e-3, rtol=1e-4)


def test_gemm_accumulates_and_clear_accum():
    A = Buffer("A", (16, 8), D.float16)
    B = Buffer("B", (8, 16), D.float16)
    C = Buffer("C", (16, 16), D.float32)
    for clear in (False, True):
        def body(bx, clear=clear):
            Cf = alloc("C_f", (16, 16), D.float32)
            return [Alloc(Cf), Copy(full(C), full(Cf)),
                    Gemm(full(A), full(B), full(Cf), clear_accum=clear),
                    Copy(full(Cf), full(C))]

        f = kernel("g", (A, B, C), (1,), body)
        a, b = np.random.randn(16, 8).astype(np.float16), np.random.randn(8, 16).astype(np.float16)
        c0 = np.random.randn(16, 16).astype(np.float32)
        out = c0.copy()
        run(f, a, b, out)
        ref = fp32(a) @ fp32(b) + (0 if clear else c0)
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_gemm_fp16_accumulator_rounds_to_fp16():
    A = Buffer("A", (4, 64), D.float16)
    B = Buffer("B", (64, 4), D.float16)
    C = Buffer("C", (4, 4), D.float16)
    f = kernel("g", (A, B, C), (1,), lambda bx: [Gemm(full(A), full(B), full(C))])
    a, b = np.random.randn(4, 64).astype(np.float16), np.random.randn(64, 4).astype(np.float16)
    c0 = np.random.randn(4, 4).astype(np.float16)
    out = c0.copy()
    run(f, a, b, out)
    np.testing.assert_array_equal(out, (fp32(c0) + fp32(a) @ fp32(b)).astype(np.float16))


# ---- copy --------------------------------------------------------------------------------------

def test_copy_out_of_bounds_tails_load_zero_and_skip_stores():
    M, N, BM, BN = 100, 70, 64, 32
    A = Buffer("A", (M, N), D.float32)
    B = Buffer("B", (M, N), D.float32)
    tiles = Buffer("T", (2, 3, BM, BN), D.float32)  # every tile as loaded, tails included

    def body(bx, by):
        S = alloc("S", (BM, BN), D.float32, "shared")
        return [Alloc(S),
                Copy(region(A, (by * BM, bx * BN), (BM, BN)), full(S)),
                Copy(full(S), region(tiles, (by, bx, 0, 0), (1, 1, BM, BN))),
                Copy(full(S), region(B, (by * BM, bx * BN), (BM, BN)))]

    f = kernel("tails", (A, B, tiles), (3, 2), body)
    a = np.random.randn(M, N).astype(np.float32)
    b = np.full((M, N), -1.0, np.float32)
    t = np.full((2, 3, BM, BN), -1.0, np.float32)
    run(f, a, b, t)
    np.testing.assert_array_equal(b, a)
    padded = np.zeros((2 * BM, 3 * BN), np.float32)
    padded[:M, :N] = a
    np.testing.assert_array_equal(t.transpose(0, 2, 1, 3).reshape(2 * BM, 3 * BN), padded)


def test_copy_negative_start_is_guarded():
    A = Buffer("A", (8,), D.float32)
    B = Buffer("B", (8,), D.float32)

    def body(bx):
        S = alloc("S", (4,), D.float32, "shared")
        return [Alloc(S), Copy(region(A, (c(-2),), (4,)), full(S)), Copy(full(S), region(B, (c(-2),), (4,)))]

    a = np.arange(8, dtype=np.float32) + 1
    b = np.zeros(8, np.float32)
    run(kernel("neg", (A, B), (1,), body), a, b)
    np.testing.assert_array_equal(b, [1, 2, 0, 0, 0, 0, 0, 0])


def test_copy_ranks_differ_and_dtype_converts():
    Bt, S, H, Dh = 2, 8, 3, 4
    Q = Buffer("Q", (Bt, S, H, Dh), D.float32)
    Out = Buffer("Out", (Bt, H, S, Dh), D.bfloat16)

    def body(bx, by):
        T2 = alloc("T2", (S, Dh), D.float16, "shared")
        return [Alloc(T2),
                Copy(region(Q, (bx, 0, by, 0), (1, S, 1, Dh)), full(T2)),
                Copy(full(T2), region(Out, (bx, by, 0, 0), (1, 1, S, Dh)))]

    q = torch.randn(Bt, S, H, Dh)
    o = torch.zeros(Bt, H, S, Dh, dtype=torch.bfloat16)
    run(kernel("perm", (Q, Out), (Bt, H), body), q, o)
    assert torch.equal(o, q.half().to(torch.bfloat16).permute(0, 2, 1, 3))


def test_copy_out_of_bounds_on_shared_raises_with_location():
    A = Buffer("A", (64,), D.float32)

    def body(bx):
        S = alloc("S", (32,), D.float32, "shared")
        op = Copy(region(A, (0,), (32,)), region(S, (c(16),), (32,)), loc=here(0))
        return [Alloc(S), op]

    with pytest.raises(OutOfBoundsError) as err:
        run(kernel("bad", (A,), (1,), body), np.zeros(64, np.float32))
    msg = str(err.value)
    assert "test_interp.py:" in msg and "`S`" in msg and "(32,)" in msg


# ---- reductions and scans ----------------------------------------------------------------------

_NP_REDUCE = {
    "sum": (lambda x, d: x.sum(d), np.add),
    "max": (lambda x, d: x.max(d), np.maximum),
    "min": (lambda x, d: x.min(d), np.minimum),
    "abssum": (lambda x, d: np.abs(x).sum(d), np.add),
    "absmax": (lambda x, d: np.abs(x).max(d), np.maximum),
}


@pytest.mark.parametrize("kind", list(_NP_REDUCE))
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("clear", [True, False])
def test_reduce(kind, dim, clear):
    X = Buffer("X", (16, 24), D.float32)
    n_out = 24 if dim == 0 else 16
    Y = Buffer("Y", (n_out,), D.float32)

    def body(bx):
        xs = alloc("xs", (16, 24), D.float32)
        ys = alloc("ys", (n_out,), D.float32)
        return [Alloc(xs), Alloc(ys), Copy(full(X), full(xs)), Copy(full(Y), full(ys)),
                Reduce(kind, full(xs), full(ys), dim, clear), Copy(full(ys), full(Y))]

    x = np.random.randn(16, 24).astype(np.float32)
    y0 = np.random.randn(n_out).astype(np.float32)
    y = y0.copy()
    run(kernel("red", (X, Y), (1,), body), x, y)
    red, comb = _NP_REDUCE[kind]
    ref = red(x, dim) if clear else comb(y0, red(x, dim))
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind,fn", [("bitand", np.bitwise_and), ("bitor", np.bitwise_or), ("bitxor", np.bitwise_xor)])
@pytest.mark.parametrize("dtype,np_dtype", [(D.int32, np.int32), (D.uint8, np.uint8)])
@pytest.mark.parametrize("clear", [True, False])
def test_bitwise_reduce(kind, fn, dtype, np_dtype, clear):
    X = Buffer("X", (8, 12), dtype)
    Y = Buffer("Y", (8,), dtype)

    def body(bx):
        xs, ys = alloc("xs", (8, 12), dtype), alloc("ys", (8,), dtype)
        return [Alloc(xs), Alloc(ys), Copy(full(X), full(xs)), Copy(full(Y), full(ys)),
                Reduce(kind, full(xs), full(ys), 1, clear), Copy(full(ys), full(Y))]

    rng = np.random.default_rng(3)
    info = np.iinfo(np_dtype)
    x = rng.integers(info.min, info.max, (8, 12), dtype=np_dtype, endpoint=True)
    y0 = rng.integers(info.min, info.max, (8,), dtype=np_dtype, endpoint=True)
    y = y0.copy()
    run(kernel("bits", (X, Y), (1,), body), x, y)
    ref = fn.reduce(x, axis=1)
    np.testing.assert_array_equal(y, ref if clear else fn(y0, ref))


def test_bitwise_reduce_of_a_float_tile_is_a_type_error():
    import tilelang_x.language as T
    from tilelang_x.core_ir.errors import TileLangTypeError

    with pytest.raises(TileLangTypeError, match=r"T.reduce_bitor: `t` is float32; bitwise reductions take integer"):
        @T.prim_func
        def f(X: T.Tensor((8, 8), T.float32)):
            with T.Kernel(1, threads=32):
                t = T.alloc_fragment((8, 8), T.float32)
                r = T.alloc_fragment((8,), T.int32)
                T.reduce_bitor(t, r, dim=1)


def test_reduce_into_2d_keepdim_fragment():
    X = Buffer("X", (8, 16), D.float16)
    Y = Buffer("Y", (8, 1), D.float32)
    f = kernel("red", (X, Y), (1,), lambda bx: [Reduce("sum", full(X), full(Y), 1, True)])
    x = np.random.randn(8, 16).astype(np.float16)
    y = np.zeros((8, 1), np.float32)
    run(f, x, y)
    np.testing.assert_allclose(y[:, 0], fp32(x).sum(1), rtol=1e-5)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dim", [0, 1])
def test_cumsum(reverse, dim):
    X = Buffer("X", (6, 10), D.float32)
    Y = Buffer("Y", (6, 10), D.float32)

    def body(bx):
        s = alloc("s", (6, 10), D.float32, "shared")
        return [Alloc(s), Copy(full(X), full(s)), CumSum(full(s), full(s), dim, reverse), Copy(full(s), full(Y))]

    x = np.random.randn(6, 10).astype(np.float32)
    y = np.zeros_like(x)
    run(kernel("scan", (X, Y), (1,), body), x, y)
    ref = np.flip(np.cumsum(np.flip(x, dim), dim), dim) if reverse else np.cumsum(x, dim)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [D.float32, D.int32])
def test_cummax_carries_nan_like_torch(dtype):
    X = Buffer("X", (3, 6), dtype)
    Y = Buffer("Y", (3, 6), dtype)

    def body(bx):
        s = alloc("s", (3, 6), dtype, "shared")
        return [Alloc(s), Copy(full(X), full(s)), CumSum(full(s), full(s), 1, False, "max"), Copy(full(s), full(Y))]

    x = np.array([[1, 5, 2, 7, -3, 7], [-9, -8, -9, -1, -2, 0], [4, 3, 2, 1, 0, -1]], np.float32)
    if dtype == D.float32:
        x[1, 2] = np.nan
    x = x.astype(np.int32 if dtype == D.int32 else np.float32)
    y = np.zeros_like(x)
    run(kernel("scanmax", (X, Y), (1,), body), x, y)
    np.testing.assert_array_equal(y, torch.from_numpy(x).cummax(1).values.numpy())


# ---- atomics -----------------------------------------------------------------------------------

def test_atomic_scalar_from_every_block():
    X = Buffer("X", (64,), D.float32)
    total = Buffer("total", (1,), D.float32)
    hi = Buffer("hi", (1,), D.float32)
    lo = Buffer("lo", (1,), D.float32)

    def body(bx):
        return [loop(8, lambda k: [
            Atomic("add", region(total, (0,), (1,)), X[bx * 8 + k]),
            Atomic("max", region(hi, (0,), (1,)), X[bx * 8 + k]),
            Atomic("min", region(lo, (0,), (1,)), X[bx * 8 + k]),
        ])]

    x = np.random.randn(64).astype(np.float32)
    t, h, lo_ = np.zeros(1, np.float32), np.full(1, -np.inf, np.float32), np.full(1, np.inf, np.float32)
    run(kernel("acc", (X, total, hi, lo), (8,), body), x, t, h, lo_)
    # the float32 sum in the atomics' order (numpy's pairwise sum can differ by more than 1e-5 of a
    # total that cancels to near zero)
    np.testing.assert_allclose(t[0], np.cumsum(x, dtype=np.float32)[-1], rtol=1e-5)
    assert h[0] == x.max() and lo_[0] == x.min()


def test_atomic_in_parallel_histogram_with_duplicates_and_guard():
    X = Buffer("X", (256,), D.int32)
    H = Buffer("H", (8,), D.int32)  # values 0..9: 8 and 9 fall outside and are skipped
    f = kernel("hist", (X, H), (2,), lambda bx: [
        par(128, body=lambda i: Atomic("add", region(H, (X[bx * 128 + i],), (1,)), c(1)))])
    x = np.random.randint(0, 10, 256).astype(np.int32)
    h = np.zeros(8, np.int32)
    run(f, x, h)
    np.testing.assert_array_equal(h, np.bincount(x, minlength=10)[:8])


def test_atomic_region_add_bf16():
    V = Buffer("V", (4, 8), D.bfloat16)
    Acc = Buffer("Acc", (4, 8), D.bfloat16)

    def body(bx):
        s = alloc("s", (4, 8), D.bfloat16, "shared")
        return [Alloc(s), Copy(full(V), full(s)), Atomic("add", full(Acc), full(s))]

    v = torch.randn(4, 8).to(torch.bfloat16)
    acc = torch.randn(4, 8).to(torch.bfloat16)
    ref = acc.clone()
    for _ in range(3):
        ref = (ref.float() + v.float()).to(torch.bfloat16)
    run(kernel("ra", (V, Acc), (3,), body), v, acc)
    assert torch.equal(acc, ref)


def test_atomic_store_and_bitwise_atomics_in_parallel():
    """Lanes storing to one element: one of them wins; int8 or/xor combine every lane's bits; an
    atomic load in a parallel body reads each lane's element."""
    X = Buffer("X", (64,), D.int8)
    S = Buffer("S", (4,), D.int8)
    B = Buffer("B", (2,), D.int8)
    Y = Buffer("Y", (64,), D.int8)
    f = kernel("bits", (X, S, B, Y), (1,), lambda bx: [
        par(64, body=lambda i: [
            Atomic("store", region(S, (i // 16,), (1,)), X[i], "relaxed"),
            Atomic("or", region(B, (0,), (1,)), X[i]),
            Atomic("xor", region(B, (1,), (1,)), X[i]),
            st(Y, i, E.AtomicLoad(X, (63 - i,), "acquire")),
        ])])
    x = np.random.randint(-128, 128, 64).astype(np.int8)
    s, b, y = np.zeros(4, np.int8), np.zeros(2, np.int8), np.zeros(64, np.int8)
    run(f, x, s, b, y)
    assert all(s[k] in x[k * 16:(k + 1) * 16] for k in range(4))
    assert b[0] == np.bitwise_or.reduce(x) and b[1] == np.bitwise_xor.reduce(x)
    np.testing.assert_array_equal(y, x[::-1])


def _waits(bump: bool, cycle: bool):
    import tilelang_x.language as T

    @T.prim_func
    def wait(F: T.Tensor((2,), T.int32), Y: T.Tensor((2,), T.int32)):
        with T.Kernel(2, threads=32) as bx:
            n = T.alloc_var(T.int32, 0)
            while T.atomic_load(F[1 - bx], memory_order="acquire") == 0 and n < 5:  # E:spin
                if bump:
                    n = n + 1
                if cycle:
                    n = 1 - n
            Y[bx] = n
            T.atomic_store(F[bx], 1, memory_order="release")

    return wait


def test_spin_wait_on_a_later_block_is_an_error_not_a_hang():
    from tilelang_x.core_ir.errors import SpinWaitError

    for cycle in (False, True):  # nothing changes / the state repeats every other iteration
        with pytest.raises(SpinWaitError) as info:
            run(_waits(bump=False, cycle=cycle), np.zeros(2, np.int32), np.zeros(2, np.int32))
        text = str(info.value)
        line = next(n + 1 for n, t in enumerate(inspect.getsource(inspect.getmodule(_waits)).splitlines())
                    if t.endswith("# E:spin"))
        assert f"test_interp.py:{line}:" in text
        assert "block (0,)" in text and "one after another" in text and "smaller linear block index" in text


def test_spin_wait_that_makes_progress_ends():
    f, y = np.zeros(2, np.int32), np.zeros(2, np.int32)
    run(_waits(bump=True, cycle=False), f, y)
    np.testing.assert_array_equal(y, [5, 0])  # block 0 gave up after 5 tries; block 1 saw F[0] set
    np.testing.assert_array_equal(f, [1, 1])


# ---- element-wise code -------------------------------------------------------------------------

def test_parallel_if_mask_guards_loads_and_stores():
    N = Buffer("A", (50,), D.float32)
    Out = Buffer("Out", (64,), D.float32)

    def body(bx):
        return [par(8, 8, body=lambda i, j: If(
            i * 8 + j < 50,
            st(Out, i * 8 + j, N[i * 8 + j] * 2.0),
            st(Out, i * 8 + j, c(-1.0))))]

    a = np.random.randn(50).astype(np.float32)
    o = np.zeros(64, np.float32)
    run(kernel("mask", (N, Out), (1,), body), a, o)
    np.testing.assert_array_equal(o[:50], a * 2)
    assert (o[50:] == -1).all()


def test_if_then_else_is_lazy_and_and_short_circuits():
    A = Buffer("A", (10,), D.float32)
    Out = Buffer("Out", (16,), D.float32)
    P = Buffer("P", (16,), D.bool_)

    def body(bx):
        return [par(16, body=lambda i: [
            st(Out, i, E.select(i < 10, A[i], 0.0)),
            st(P, i, E.binary("and", i < 10, A[i] > 0)),
        ])]

    a = np.random.randn(10).astype(np.float32)
    o, p = np.zeros(16, np.float32), np.zeros(16, bool)
    run(kernel("lazy", (A, Out, P), (1,), body), a, o, p)
    np.testing.assert_array_equal(o, np.concatenate([a, np.zeros(6, np.float32)]))
    np.testing.assert_array_equal(p, np.concatenate([a > 0, np.zeros(6, bool)]))


def test_serial_loop_inside_parallel_body():
    X = Buffer("X", (16, 32), D.float32)
    Y = Buffer("Y", (16,), D.float32)

    def body(bx):
        acc = alloc("acc", (16,), D.float32)
        return [Alloc(acc), Fill(full(acc), c(0.0)),
                par(16, body=lambda i: loop(32, lambda k: st(acc, i, acc[i] + X[i, k]))),
                Copy(full(acc), full(Y))]

    x = np.random.randn(16, 32).astype(np.float32)
    y = np.zeros(16, np.float32)
    run(kernel("rows", (X, Y), (1,), body), x, y)
    np.testing.assert_allclose(y, x.sum(1), rtol=1e-5, atol=1e-5)


def test_lane_dependent_loop_bounds():
    X = Buffer("X", (8,), D.float32)
    Y = Buffer("Y", (8,), D.float32)  # Y[i] = sum(X[:i+1])
    f = kernel("tri", (X, Y), (1,), lambda bx: [
        par(8, body=lambda i: [st(Y, i, c(0.0)), loop(i + 1, lambda k: st(Y, i, Y[i] + X[k]))])])
    x = np.random.randn(8).astype(np.float32)
    y = np.zeros(8, np.float32)
    run(f, x, y)
    np.testing.assert_allclose(y, np.cumsum(x), rtol=1e-5, atol=1e-6)


def test_while_and_var_with_init():
    Out = Buffer("Out", (1,), D.int32)

    def body(bx):
        v = Buffer("v", (1,), D.int32, "var")
        n = Buffer("n", (1,), D.int32, "var")
        return [Alloc(v, c(1)), Alloc(n, c(0)),
                While(v[0] < 1000, Seq((st(v, 0, v[0] * 3), st(n, 0, n[0] + 1)))),
                st(Out, 0, n[0] * 10000 + v[0])]

    o = np.zeros(1, np.int32)
    run(kernel("w", (Out,), (1,), body), o)
    assert o[0] == 7 * 10000 + 2187


def test_integer_semantics_and_wraparound():
    X = Buffer("X", (6,), D.int32)
    Y = Buffer("Y", (6,), D.int32)
    Out = Buffer("Out", (4, 6), D.int32)
    W = Buffer("W", (1,), D.int32)
    f = kernel("ints", (X, Y, Out, W), (1,), lambda bx: [
        par(6, body=lambda i: [
            st(Out, (0, i), E.BinOp("/", X[i], Y[i], D.int32)),
            st(Out, (1, i), E.BinOp("//", X[i], Y[i], D.int32)),
            st(Out, (2, i), E.BinOp("%", X[i], Y[i], D.int32)),
            st(Out, (3, i), E.BinOp("<<", X[i], c(2), D.int32)),
        ]),
        st(W, 0, E.BinOp("+", W[0], c(1), D.int32)),
    ])
    x = np.array([7, -7, 7, -7, 0, 2**30], np.int32)
    y = np.array([2, 2, -2, -2, 3, 1], np.int32)
    o = np.zeros((4, 6), np.int32)
    w = np.array([2**31 - 1], np.int32)
    run(f, x, y, o, w)
    np.testing.assert_array_equal(o[0], [3, -3, -3, 3, 0, 2**30])
    np.testing.assert_array_equal(o[1], [3, -4, -4, 3, 0, 2**30])
    np.testing.assert_array_equal(o[2], [1, 1, -1, -1, 0, 0])
    np.testing.assert_array_equal(o[3], (x.astype(np.int64) << 2).astype(np.int32))
    assert w[0] == -(2**31)


def test_integer_division_by_zero_raises():
    X = Buffer("X", (4,), D.int32)
    f = kernel("dz", (X,), (1,), lambda bx: [par(4, body=lambda i: st(X, i, E.BinOp("//", c(8), X[i], D.int32)))])
    with pytest.raises(TileLangError, match="division by zero"):
        run(f, np.array([1, 2, 0, 4], np.int32))
    # a zero divisor in a masked-off lane is not an error
    g = kernel("dz2", (X,), (1,), lambda bx: [par(4, body=lambda i: If(
        X[i] != 0, st(X, i, E.BinOp("//", c(8), X[i], D.int32))))])
    x = np.array([1, 2, 0, 4], np.int32)
    run(g, x)
    np.testing.assert_array_equal(x, [8, 4, 0, 2])


def test_float16_arithmetic_rounds_every_operation():
    X = Buffer("X", (1000,), D.float16)
    Y = Buffer("Y", (1000,), D.float16)
    Out = Buffer("Out", (1000,), D.float16)
    f = kernel("h", (X, Y, Out), (1,), lambda bx: [par(1000, body=lambda i: st(Out, i, (X[i] * Y[i] + X[i]) / Y[i]))])
    x = (np.random.randn(1000) * 10).astype(np.float16)
    y = (np.random.rand(1000) + 0.5).astype(np.float16)
    o = np.zeros(1000, np.float16)
    run(f, x, y, o)
    np.testing.assert_array_equal(o, (x * y + x) / y)


def test_bf16_arithmetic_matches_torch():
    X = Buffer("X", (512,), D.bfloat16)
    Y = Buffer("Y", (512,), D.bfloat16)
    Out = Buffer("Out", (512,), D.bfloat16)
    F = Buffer("F", (512,), D.float32)
    f = kernel("b", (X, Y, Out, F), (1,), lambda bx: [par(512, body=lambda i: [
        st(Out, i, X[i] * Y[i] + X[i]),
        st(F, i, E.cast(E.call("exp", X[i]), D.float32)),
    ])])
    x, y = torch.randn(512).to(torch.bfloat16), torch.randn(512).to(torch.bfloat16)
    o, fo = torch.zeros(512, dtype=torch.bfloat16), torch.zeros(512)
    run(f, x, y, o, fo)
    assert torch.equal(o, x * y + x)
    assert torch.equal(fo, torch.exp(x.float()).to(torch.bfloat16).float())


def test_scalar_code_in_narrow_dtypes_matches_torch():
    X = Buffer("X", (64,), D.bfloat16)
    Y = Buffer("Y", (64,), D.bfloat16)
    Z = Buffer("Z", (64,), D.float8_e5m2)
    f = kernel("s", (X, Y, Z), (1,), lambda bx: [loop(64, lambda k: [
        st(Y, k, X[k] * X[k] - E.cast(1.5, D.bfloat16)),
        st(Z, k, E.cast(X[k], D.float8_e5m2) * E.cast(3.0, D.float8_e5m2)),
    ])])
    x = torch.randn(64).to(torch.bfloat16)
    y, z = torch.zeros(64, dtype=torch.bfloat16), torch.zeros(64, dtype=torch.float8_e5m2)
    run(f, x, y, z)
    assert torch.equal(y, x * x - 1.5)
    ref = (x.to(torch.float8_e5m2).float() * 3.0).to(torch.float8_e5m2)
    assert torch.equal(z.float(), ref.float())


# ---- errors and printing -----------------------------------------------------------------------

def test_out_of_bounds_scalar_load_names_file_line_buffer_index_shape():
    A = Buffer("A", (4, 4), D.float32)
    Out = Buffer("Out", (1,), D.float32)
    load = A[2, c(7)]  # this line is the location in the message (a literal 7 is refused when written)
    line = inspect.currentframe().f_lineno - 1
    f = kernel("oob", (A, Out), (1,), lambda bx: [st(Out, 0, load)])
    with pytest.raises(OutOfBoundsError) as err:
        run(f, np.zeros((4, 4), np.float32), np.zeros(1, np.float32))
    msg = str(err.value)
    assert f"test_interp.py:{line}" in msg
    assert "`A`[2, 7]" in msg and "(4, 4)" in msg


def test_out_of_bounds_store_in_parallel_reports_the_lane():
    Out = Buffer("Out", (10,), D.float32, "global")

    def body(bx):
        return [par(12, body=lambda i: st(Out, i, c(1.0)))]

    with pytest.raises(OutOfBoundsError) as err:
        run(kernel("oobs", (Out,), (1,), body), np.zeros(10, np.float32))
    assert "`Out`[10]" in str(err.value) and "test_interp.py:" in str(err.value)


def test_out_of_bounds_gather_row_names_the_lane():
    # TileLang's sparse MLA gathers KV rows by index inside a 2-d T.Parallel; a row index past the
    # end (its SKV sentinel) varies along one loop axis only, the column along the other
    import tilelang_x as tilelang
    import tilelang_x.language as T

    @T.prim_func
    def gather_rows(KV: T.Tensor((8, 4), T.float32), Idx: T.Tensor((2,), T.int32),
                    Out: T.Tensor((2, 4), T.float32)):
        with T.Kernel(1, threads=32):
            rows = T.alloc_shared((2, 4), T.float32)
            for r, d in T.Parallel(2, 4):
                rows[r, d] = KV[Idx[r], d]
            T.copy(rows, Out)

    # with TileLang's guard (on by default) the sentinel row would read zeros
    kernel = tilelang.compile(gather_rows, out_idx=[-1], target="interp",
                              pass_configs={"tl.disable_safe_memory_legalize": True})
    kv = torch.randn(8, 4)
    assert torch.equal(kernel(kv, torch.tensor([5, 2], dtype=torch.int32)), kv[[5, 2]])
    with pytest.raises(OutOfBoundsError) as err:
        kernel(kv, torch.tensor([3, 8], dtype=torch.int32))
    assert "`KV`[8, 0]" in str(err.value) and "(8, 4)" in str(err.value)
    assert "rows[r, d] = KV[Idx[r], d]" in open(__file__).read().splitlines()[err.value.loc.line - 1]


def test_print_only_first_block_with_location(capsys):
    X = Buffer("X", (4,), D.float32)

    def body(bx):
        s = alloc("s", (4,), D.float32, "shared")
        return [Alloc(s), Copy(full(X), full(s)), Print(s, "tile", loc=here(0)), Print(bx + 0, "block", loc=here(0))]

    run(kernel("p", (X,), (3,), body), np.arange(4, dtype=np.float32))
    out = capsys.readouterr().out
    assert out.count("tile") == 1 and out.count("block") == 1
    assert "test_interp.py:" in out and "[0. 1. 2. 3.]" in out


# ---- shapes and arguments ----------------------------------------------------------------------

def test_dynamic_shapes_and_scalar_params():
    m = E.Var("m")
    A = Buffer("A", (m,), D.float32)
    B = Buffer("B", (m,), D.float32)
    alpha = E.Var("alpha", D.float32)

    def body(bx):
        s = alloc("s", (32,), D.float32)
        return [Alloc(s), Copy(region(A, (bx * 32,), (32,)), full(s)),
                par(32, body=lambda i: st(s, i, s[i] * alpha)),
                Copy(full(s), region(B, (bx * 32,), (32,)))]

    grid = E.binary("//", m + 31, 32)
    f = kernel("scale", (A, B, alpha), (grid,), body)
    for n, dims in ((70, {m: 70}), (33, None)):
        a = np.random.randn(n).astype(np.float32)
        b = np.zeros(n, np.float32)
        run(f, a, b, 1.5, dims=dims)
        np.testing.assert_allclose(b, a * np.float32(1.5))


def test_torch_bf16_and_fp8_tensors_written_back():
    X = Buffer("X", (64,), D.float32)
    Y = Buffer("Y", (64,), D.bfloat16)
    Z = Buffer("Z", (64,), D.float8_e4m3)
    f = kernel("cv", (X, Y, Z), (1,), lambda bx: [Copy(full(X), full(Y)), Copy(full(X), full(Z))])
    x = torch.randn(64) * 100
    y = torch.zeros(64, dtype=torch.bfloat16)
    z = torch.zeros(64, dtype=torch.float8_e4m3fn)
    run(f, x, y, z)
    assert torch.equal(y, x.to(torch.bfloat16))
    assert torch.equal(z.float(), x.to(torch.float8_e4m3fn).float())


def test_var_allocated_inside_parallel_is_per_lane():
    X = Buffer("X", (16, 32), D.float32)
    Y = Buffer("Y", (16,), D.float32)
    Z = Buffer("Z", (16, 32), D.float32)

    def body(bx):
        def row(i):
            acc = Buffer("acc", (1,), D.float32, "var")
            return [Alloc(acc, c(0.0)), loop(32, lambda k: st(acc, 0, acc[0] + X[i, k])), st(Y, i, acc[0])]

        def elem(i, j):
            v = Buffer("v", (1,), D.float32, "var")
            return [Alloc(v, X[i, j]), If(v[0] < 0.0, st(v, 0, -v[0])), st(Z, (i, j), v[0] * 2.0)]

        return [par(16, body=row), par(16, 32, body=elem)]

    x = np.random.randn(16, 32).astype(np.float32)
    y, z = np.zeros(16, np.float32), np.zeros((16, 32), np.float32)
    run(kernel("priv", (X, Y, Z), (1,), body), x, y, z)
    np.testing.assert_allclose(y, x.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(z, np.abs(x) * 2)


# ---- FlashAttention forward --------------------------------------------------------------------

def flash_attention(Bt, H, S, Dh, BM, BN, causal):
    Q = Buffer("Q", (Bt, S, H, Dh), D.float16)
    K = Buffer("K", (Bt, S, H, Dh), D.float16)
    V = Buffer("V", (Bt, S, H, Dh), D.float16)
    Out = Buffer("Out", (Bt, S, H, Dh), D.float16)
    scale = (1.0 / Dh) ** 0.5 * 1.44269504
    ninf = c(-math.inf)

    def body(bx, by, bz):
        Qs = alloc("Q_s", (BM, Dh), D.float16, "shared")
        Ks = alloc("K_s", (BN, Dh), D.float16, "shared")
        Vs = alloc("V_s", (BN, Dh), D.float16, "shared")
        acc_s = alloc("acc_s", (BM, BN), D.float32)
        acc_s_cast = alloc("acc_s_cast", (BM, BN), D.float16)
        acc_o = alloc("acc_o", (BM, Dh), D.float32)
        m = alloc("scores_max", (BM,), D.float32)
        m_prev = alloc("scores_max_prev", (BM,), D.float32)
        sc = alloc("scores_scale", (BM,), D.float32)
        ssum = alloc("scores_sum", (BM,), D.float32)
        lsum = alloc("logsum", (BM,), D.float32)
        n_blocks = E.binary("min", c(S // BN), E.binary("//", (bx + 1) * BM + BN - 1, BN)) if causal else c(S // BN)

        def step(k):
            stmts = [Copy(region(K, (bz, k * BN, by, 0), (1, BN, 1, Dh)), full(Ks))]
            if causal:
                stmts.append(par(BM, BN, body=lambda i, j: st(
                    acc_s, (i, j), E.select(bx * BM + i >= k * BN + j, 0.0, ninf))))
            else:
                stmts.append(Fill(full(acc_s), c(0.0)))
            stmts += [
                Gemm(full(Qs), full(Ks), full(acc_s), trans_B=True),
                Copy(full(m), full(m_prev)),
                Fill(full(m), ninf),
                Reduce("max", full(acc_s), full(m), 1, clear=False),
                par(BM, body=lambda i: st(sc, i, E.call("exp2", m_prev[i] * scale - m[i] * scale))),
                par(BM, Dh, body=lambda i, j: st(acc_o, (i, j), acc_o[i, j] * sc[i])),
                par(BM, BN, body=lambda i, j: st(acc_s, (i, j), E.call("exp2", acc_s[i, j] * scale - m[i] * scale))),
                Reduce("sum", full(acc_s), full(ssum), 1, clear=True),
                par(BM, body=lambda i: st(lsum, i, lsum[i] * sc[i] + ssum[i])),
                Copy(full(acc_s), full(acc_s_cast)),
                Copy(region(V, (bz, k * BN, by, 0), (1, BN, 1, Dh)), full(Vs)),
                Gemm(full(acc_s_cast), full(Vs), full(acc_o)),
            ]
            return stmts

        return [*(Alloc(b) for b in (Qs, Ks, Vs, acc_s, acc_s_cast, acc_o, m, m_prev, sc, ssum, lsum)),
                Copy(region(Q, (bz, bx * BM, by, 0), (1, BM, 1, Dh)), full(Qs)),
                Fill(full(acc_o), c(0.0)), Fill(full(lsum), c(0.0)), Fill(full(m), ninf),
                loop(n_blocks, step, "pipelined"),
                par(BM, Dh, body=lambda i, j: st(acc_o, (i, j), acc_o[i, j] / lsum[i])),
                Copy(full(acc_o), region(Out, (bz, bx * BM, by, 0), (1, BM, 1, Dh)))]

    return kernel("flash_fwd", (Q, K, V, Out), (S // BM, H, Bt), body)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_forward(causal):
    Bt, H, S, Dh = 2, 2, 256, 64
    f = flash_attention(Bt, H, S, Dh, 64, 64, causal)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(Bt, S, H, Dh, generator=g).half() for _ in range(3))
    o = torch.zeros(Bt, S, H, Dh, dtype=torch.float16)
    run(f, q, k, v, o)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2).float(), k.transpose(1, 2).float(), v.transpose(1, 2).float(), is_causal=causal
    ).transpose(1, 2)
    torch.testing.assert_close(o.float(), ref, atol=1e-2, rtol=1e-2)
