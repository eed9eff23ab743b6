"""Kernels that use TileLang's / TVM's scalar intrinsics: bit operations, reinterpretation, fast
math and IEEE-rounded arithmetic."""

import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit(out_idx=[-1])
def unpack_int4(M, N, block_M=32):
    """Signed int4 values packed two per uint8 (low nibble first), unpacked with TVM's bit-op
    names: ``Q = (v << 4 | ~nibble & 0xF) + (v * 64 >> 3)`` for the sign-extended value ``v``
    (arithmetic ``>>`` of a negative value included)."""

    @T.prim_func
    def main(P: T.Tensor((M, N // 2), T.uint8), Q: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                row = bx * block_M + i
                if row < M:
                    nib = T.bitwise_and(T.shift_right(P[row, j // 2], (j % 2) * 4), 0xF)
                    v = T.bitwise_xor(nib, 8) - 8
                    low = T.bitwise_and(T.bitwise_not(nib), 0xF)
                    Q[row, j] = T.bitwise_or(T.shift_left(v, 4), low) + T.shift_right(v * 64, 3)

    return main


@tilelang.jit(out_idx=[-1])
def dequant_int4_fp16(M, N, block_M=32):
    """``W[i, j] = (q - 8) * S[i]`` for the unsigned int4 ``q`` packed two per uint8 (low nibble
    first); the fp16 value of ``q`` is built from bits: 0x6400 | q is the float16 1024 + q."""

    @T.prim_func
    def main(P: T.Tensor((M, N // 2), T.uint8), S: T.Tensor((M,), T.float16), W: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                row = bx * block_M + i
                if row < M:
                    q = T.bitwise_and(T.shift_right(P[row, j // 2], (j % 2) * 4), 0xF)
                    h = T.reinterpret(T.float16, T.bitwise_or(T.cast(q, T.uint16), 0x6400))
                    W[row, j] = (h - T.float16(1032)) * S[row]

    return main


@tilelang.jit(out_idx=[-1])
def dequant_signed_int4(M, N, block_M=32):
    """``W[i, j] = q * S[i]`` for two's-complement int4 ``q`` packed two per int8, unpacked with
    ``tilelang.quantize._tir_packed_int_to_int_convert`` as TileLang's dequantization examples do
    (a shift left then right by 28 bits: the sign extension the simplifier must not fold away)."""
    from tilelang_x.quantize import _tir_packed_int_to_int_convert

    decode = _tir_packed_int_to_int_convert("int", 8)

    @T.prim_func
    def main(P: T.Tensor((M, N // 2), T.int8), S: T.Tensor((M,), T.float16), W: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                row = bx * block_M + i
                if row < M:
                    W[row, j] = decode(4, P[row, j // 2], j % 2, dtype=T.float16) * S[row]

    return main


@tilelang.jit(out_idx=[-1])
def bit_casts(n):
    """Four reinterpretations per element: ``-x`` by flipping float32's sign bit as uint32, bfloat16
    and float8_e4m3 values from their bits, and the float16 bits of ``x`` as an int16."""

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), H: T.Tensor((n,), T.int16), F8: T.Tensor((n,), T.uint8),
             Y: T.Tensor((n, 4), T.float32)):
        with T.Kernel(1, threads=128):
            for k in T.Parallel(n):
                sign = T.reinterpret(T.uint32, T.int32(-(2**31)))
                Y[k, 0] = T.reinterpret(T.float32, T.bitwise_xor(T.reinterpret(T.uint32, X[k]), sign))
                Y[k, 1] = T.reinterpret(T.bfloat16, H[k])
                Y[k, 2] = T.reinterpret(T.float8_e4m3fn, F8[k])
                Y[k, 3] = T.reinterpret(T.int16, T.cast(X[k], T.float16))

    return main


@tilelang.jit(out_idx=[-1])
def bit_counts(n):
    """Per element: popcount and clz of int32 / uint8 / int16 views, C remainder, round half to
    even of a value clamped to float16's range, and clamps to int8's / int16's range."""

    @T.prim_func
    def main(X: T.Tensor((n,), T.int32), F: T.Tensor((n,), T.float32), Y: T.Tensor((n, 8), T.int32)):
        with T.Kernel(1, threads=128):
            for k in T.Parallel(n):
                Y[k, 0] = T.popcount(X[k])
                Y[k, 1] = T.clz(X[k])
                Y[k, 2] = T.popcount(T.Cast(T.uint8, X[k]))
                Y[k, 3] = T.clz(T.Cast(T.int16, X[k]))
                Y[k, 4] = T.truncmod(X[k], 7)
                f = T.max(T.min(F[k], T.max_value(T.float16)), T.min_value(T.float16))
                Y[k, 5] = T.Cast(T.int32, T.nearbyint(f))
                Y[k, 6] = T.min(X[k], T.max_value(T.int8))
                Y[k, 7] = T.max(X[k], T.min_value(T.int16))

    return main


@tilelang.jit(out_idx=[-1])
def fast_math(n):
    """TileLang's fast-math functions of ``x`` (CUDA: the approximate intrinsics), arguments kept
    where they are accurate: ``__exp(x)``, ``__exp10(x / 2)``, the logs of ``|x| + 0.1``, ``__tan(x
    / 3)``, ``__cos(x)``, ``__sin(x)``."""

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Y: T.Tensor((n, 8), T.float32)):
        with T.Kernel(1, threads=128):
            for k in T.Parallel(n):
                x = X[k]
                pos = T.abs(x) + 0.1
                Y[k, 0] = T.__exp(x)
                Y[k, 1] = T.__exp10(x * 0.5)
                Y[k, 2] = T.__log(pos)
                Y[k, 3] = T.__log2(pos)
                Y[k, 4] = T.__log10(pos)
                Y[k, 5] = T.__tan(x / 3)
                Y[k, 6] = T.__cos(x)
                Y[k, 7] = T.__sin(x)

    return main


IEEE_MODES = ("rn", "rz", "ru", "rd")


@tilelang.jit(out_idx=[-1])
def ieee_rounding(n):
    """Column ``7 * m + k`` holds the ``k``-th of add, sub, mul, fmaf, fdiv, frcp, fsqrt of the
    inputs rounded in mode ``IEEE_MODES[m]``; column 28 holds ``ieee_frsqrt(|x|)``."""

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32), Z: T.Tensor((n,), T.float32),
             R: T.Tensor((n, 29), T.float32)):
        with T.Kernel(1, threads=128):
            for k in T.Parallel(n):
                x, y, z = X[k], Y[k], Z[k]
                for m, mode in enumerate(IEEE_MODES):
                    R[k, 7 * m] = T.ieee_add(x, y, mode)
                    R[k, 7 * m + 1] = T.ieee_sub(x, y, rounding_mode=mode)
                    R[k, 7 * m + 2] = T.ieee_mul(x, y, mode)
                    R[k, 7 * m + 3] = T.ieee_fmaf(x, y, z, mode)
                    R[k, 7 * m + 4] = T.ieee_fdiv(x, y, mode)
                    R[k, 7 * m + 5] = T.ieee_frcp(y, mode)
                    R[k, 7 * m + 6] = T.ieee_fsqrt(T.abs(x), mode)
                R[k, 28] = T.ieee_frsqrt(T.abs(x))

    return main
