# Kernel code is written as users write it (unused block and loop variables included).
# ruff: noqa: F841, B007
"""``T.rng_init`` / ``T.rng_rand`` / ``T.rng_rand_float``: Philox4x32-10 against the published
known-answer vectors and a textbook implementation, the interpreter's streams, the CUDA code
(plain C++, no cuRAND) and the located errors (``# E:<tag>`` marks the line an error names)."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import dropout
from tests.null.cuda_helpers import cuda_source
from tests.null.located import located_errors
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.errors import TileLangSyntaxError
from tilelang_x.core_ir.philox import philox4x32, rng_rand
from tilelang_x.core_ir.visit import walk

where, raises = located_errors(__file__)

#: Random123's kat_vectors, "philox4x32 10": counter (4 words), key (2 words) -> output (4 words)
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize(("counter", "key", "expected"), KAT)
def test_philox_matches_the_known_answers(counter, key, expected):
    assert tuple(int(w) for w in philox4x32(counter, key)) == expected


def _textbook(counter: list[int], key: list[int]) -> list[int]:
    """Philox4x32-10 on Python ints, one counter at a time, as the paper writes it."""
    c, k = list(counter), list(key)
    for r in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & 0xFFFFFFFF, (p0 >> 32) ^ c[3] ^ k[1], p0 & 0xFFFFFFFF]
        k = [(k[0] + 0x9E3779B9) & 0xFFFFFFFF, (k[1] + 0xBB67AE85) & 0xFFFFFFFF]
    return c


def test_rng_rand_reads_the_counter_and_key_layout():
    rs = np.random.default_rng(11)
    seeds = rs.integers(0, 2**64, 40, dtype=np.uint64)
    subs = rs.integers(0, 2**64, 40, dtype=np.uint64)
    offs = rs.integers(0, 2**64, 40, dtype=np.uint64)
    drawn = rng_rand(seeds, subs, offs)
    for s, q, o, got in zip(seeds.tolist(), subs.tolist(), offs.tolist(), drawn.tolist()):
        words = _textbook([(o >> 2) & 0xFFFFFFFF, o >> 34, q & 0xFFFFFFFF, q >> 32], [s & 0xFFFFFFFF, s >> 32])
        assert got == words[o & 3]


def test_streams_are_bit_exact_and_independent_of_the_block_size():
    n = 300
    k = np.arange(n)
    w = [rng_rand(7, k, 5 + d).astype(np.uint64) for d in range(4)]
    f32 = (w[1] >> np.uint64(8)).astype(np.float32) * np.float32(2.0**-24)
    f64 = ((w[2] << np.uint64(21)) | (w[3] >> np.uint64(11))).astype(np.float64) * 2.0**-53
    expected = np.stack([w[0].astype(np.float64), f32.astype(np.float64), f64], 1)
    for block in (128, 64):
        got = tilelang.compile(dropout.random_bits.get_ir(n, block=block), target="interp")()
        assert np.array_equal(got.numpy(), expected)
    assert (expected[:, 1:] < 1).all() and (expected[:, 1:] >= 0).all()


def test_draws_take_successive_offsets_and_are_pure_calls():
    @T.prim_func
    def main(Y: T.Tensor((8, 2), T.uint32)):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(8):
                T.rng_init(3, i, 10)
                Y[i, 0] = T.rng_rand()
                Y[i, 1] = T.rng_rand()

    calls = [n for n in walk(main.body) if isinstance(n, E.Call) and n.name == E.RNG_FUNC]
    assert [E.as_int(c.args[2]) for c in calls] == [10, 11]
    assert all(c.dtype == T.uint32 and all(a.dtype == T.uint64 for a in c.args) for c in calls)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_draws_with_the_plain_cpp_header_only_when_used(arch):
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    source, ctx = cuda_source(dropout.dropout.get_ir(100, 192), arch)
    assert source.count("TLX_DEV tlx_u32 tlx_rng_rand(") == 1
    assert "tlx_rng_rand(1234ULL, " in source
    header = source[source.index("// tilelang-x: T.rng_rand"):source.index("__global__")]
    assert "curand" not in source and "#include" not in header
    plain, _ = cuda_source(_no_draws(), arch)
    assert "tlx_rng_rand" not in plain
    if find_nvrtc() is None and find_nvcc() is None:
        pytest.skip("no CUDA compiler here")
    assert len(compile_cuda(source, arch, kernel_name=ctx.data["cuda.meta"].kernel_name).cubin) > 0


def _no_draws():
    @T.prim_func
    def main(Y: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                Y[i] = T.cast(i, T.float32)

    return main


def test_rng_init_without_seq_names_the_line():
    def build():
        @T.prim_func
        def main(Y: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64) as bx:
                T.rng_init(42)  # E:no-seq
                for i in T.Parallel(64):
                    Y[i] = T.rng_rand_float()

    raises(TileLangSyntaxError, "no-seq", build, "seq=")


def test_draw_in_another_loop_than_its_init_names_the_line():
    def build():
        @T.prim_func
        def main(Y: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64) as bx:
                T.rng_init(42, bx)
                for i in T.Parallel(64):
                    Y[i] = T.rng_rand_float()  # E:other-loop

    raises(TileLangSyntaxError, "other-loop", build, "other loops")


def test_draw_without_init_and_unsupported_options_name_the_line():
    def no_init():
        @T.prim_func
        def main(Y: T.Tensor((64,), T.uint32)):
            with T.Kernel(1, threads=64) as bx:
                for i in T.Parallel(64):
                    Y[i] = T.rng_rand()  # E:no-init

    def normal():
        @T.prim_func
        def main(Y: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64) as bx:
                for i in T.Parallel(64):
                    T.rng_init(1, i)
                    Y[i] = T.rng_rand_float(dist="normal")  # E:normal

    def xorwow():
        @T.prim_func
        def main(Y: T.Tensor((64,), T.uint32)):
            with T.Kernel(1, threads=64) as bx:
                T.rng_init(1, 0, generator="curandStateXORWOW_t")  # E:xorwow

    raises(TileLangSyntaxError, "no-init", no_init, "without a T.rng_init")
    raises(TileLangSyntaxError, "normal", normal, "normal")
    raises(TileLangSyntaxError, "xorwow", xorwow, "Philox4x32-10")

