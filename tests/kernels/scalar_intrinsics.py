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
