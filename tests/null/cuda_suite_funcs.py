"""The suite kernels (tests/kernels) as tile-level PrimFuncs (``get_ir``: nothing is compiled), for
the CUDA codegen tests that need no GPU, plus a few variants the CUDA tests exercise."""

from __future__ import annotations

from collections.abc import Callable

from tests.kernels import (
    attention,
    control_flow,
    conv,
    dequant,
    dropout,
    elementwise,
    gemm,
    grid,
    reducers,
    reductions,
    scalar_intrinsics,
    simt,
    views,
    workspace,
)
from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir.kernel_parts import kernel_parts
from tilelang_x.core_ir.stmt import PrimFunc


def suite_funcs() -> dict[str, Callable[[], PrimFunc]]:
    def mm(*args, **kw):
        return lambda: gemm.matmul.get_ir(*args, **kw)

    return {
        "gemm_fp16_256": mm(256, 256, 256),
        "gemm_128x128x32_3stage": mm(1024, 1024, 1024),
        "gemm_fp16_tails": mm(200, 136, 96, block_M=64, block_N=64, block_K=32),
        "gemm_transpose_B": mm(256, 128, 128, trans_B=True, block_M=64, block_N=64),
        "gemm_bf16_fp32_accum": mm(128, 256, 128, in_dtype=dtypes.bfloat16, out_dtype=dtypes.float32,
                                   block_M=64, block_N=64),
        "gemm_relu_epilogue": mm(128, 128, 256, relu=True, block_M=64, block_N=64),
        "gemm_decode_16_rows": mm(16, 192, 1024, block_M=16, block_N=64, block_K=256, num_stages=4),
        "dequant_w4a16_tails": lambda: dequant.matmul_w4a16.get_ir(72, 128, 256, 128, block_M=64, block_N=64,
                                                                   block_K=64, num_stages=2, threads=128),
        "dequant_w4a16_groups": lambda: dequant.matmul_w4a16.get_ir(128, 256, 512, 64, block_M=64, block_N=128,
                                                                    block_K=128, num_stages=3, threads=128),
        "dequant_w4a16_weights_in_registers": lambda: dequant.matmul_w4a16.get_ir(
            40, 128, 256, 128, registers=True, block_M=16, block_N=64, block_K=64, num_stages=2, threads=128),
        "dequant_w4a16_bytes_in_a_fragment": lambda: dequant.matmul_w4a16.get_ir(
            72, 128, 256, 128, bytes_fragment=True, block_M=64, block_N=64, block_K=64, num_stages=2, threads=128),
        "gemm_fp32_fma": mm(128, 128, 64, in_dtype=dtypes.float32, out_dtype=dtypes.float32, block_M=64,
                            block_N=64, block_K=16),
        "leaky_add_if_then_else": lambda: elementwise.leaky_add.get_ir(100, 70),
        "dropout_philox_mask": lambda: dropout.dropout.get_ir(100, 192),
        "random_bits_philox_exact": lambda: dropout.random_bits.get_ir(300),
        "fma_rows_tilelang_spellings": lambda: elementwise.fma_rows.get_ir(70, 40),
        "vector_add_dynamic": lambda: elementwise.vector_add.get_ir(),
        "reducer_column_sums": lambda: reducers.column_sums.get_ir(100, 48),
        "reducer_column_sums_64_threads": lambda: reducers.column_sums.get_ir(100, 48, threads=64),
        "reducer_column_sums_pipelined": lambda: reducers.column_sums_pipelined.get_ir(200, 96),
        "reducer_row_col_max": lambda: reducers.row_col_max.get_ir(16, 24),
        "reducer_histogram_sum_min_bits": lambda: reducers.histogram_bits.get_ir(300, 7),
        "grid_sync_normalize": lambda: grid.normalize.get_ir(64, 48),
        "grid_sync_smooth_in_a_loop": lambda: grid.smooth.get_ir(512, 5),
        "split_row_sum_pdl_second_kernel": lambda: kernel_parts(reductions.split_row_sum.get_ir(96, 256, pdl=True))[1],
        "softmax_rows": lambda: reductions.softmax.get_ir(64, 256),
        "rms_norm": lambda: reductions.rms_norm.get_ir(64, 512),
        "row_bitxor": lambda: reductions.row_bits.get_ir(64, 96, "bitxor"),
        "cumsum": lambda: reductions.cumsum.get_ir(32, 128),
        "cumsum_reverse": lambda: reductions.cumsum.get_ir(32, 128, reverse=True),
        "cummax_fp16": lambda: reductions.cumsum.get_ir(32, 128, dtype=dtypes.float16, running_max=True),
        "column_sum_atomic_add": lambda: reductions.column_sum.get_ir(200, 100),
        "gemm_tilelang_persistent": lambda: gemm.matmul_persistent.get_ir(200, 328, 96, 5, group_size=3),
        "gemm_blocksparse_masked_pipeline": lambda: gemm.blocksparse_matmul.get_ir(256, 256, 512),
        "atomic_addx2_fp16": lambda: reductions.packed_atomic_sum.get_ir(4, 64, 128),
        "atomic_addx4_fp32": lambda: reductions.packed_atomic_sum.get_ir(4, 64, 128, lanes=4, dtype=dtypes.float32),
        "block_sparse_row_sum_continue_break": lambda: control_flow.block_sparse_row_sum.get_ir(128, 512),
        "first_below_while_loop_break": lambda: control_flow.first_below.get_ir(64, 40, -1.0),
        "block_sparse_matmul_persistent_continue": lambda: control_flow.block_sparse_matmul.get_ir(256, 192, 96, 5),
        "row_flags_any_of_all_of": lambda: control_flow.row_flags.get_ir(40, 12),
        "atomic_or": lambda: reductions.column_bits.get_ir(40, 70, "or"),
        "atomic_and_tile": lambda: reductions.column_bits.get_ir(48, 64, "and", tile=True),
        "atomic_xor_int16": lambda: reductions.column_bits.get_ir(40, 70, "xor", dtype=dtypes.int16),
        "atomic_flags_seq_cst": lambda: reductions.flagged_sum.get_ir(5, 300),
        "atomic_spin_wait": lambda: reductions.chained_prefix.get_ir(6, 100),
        "block_statements_read_modify_write": lambda: elementwise.count_up.get_ir(6, 5),
        "add_into_itself_non_restrict": lambda: elementwise.add_into.get_ir(300),
        "transpose_tiles": lambda: elementwise.transpose_tiles.get_ir(96, 70),
        "int8_row_dots_dp4a": lambda: elementwise.int8_row_dots.get_ir(64, 48),
        "conv2d_im2col": lambda: conv.conv2d_nhwc.get_ir(2, 16, 10, 11, 48, 3, 1, 1, 1, block_N=32),
        "flash_attention": lambda: attention.flash_attention.get_ir(1, 2, 256, 64, False),
        "flash_attention_causal": lambda: attention.flash_attention.get_ir(1, 2, 256, 64, True),
        "blocksparse_attention": lambda: attention.blocksparse_attention.get_ir(1, 2, 256, 64),
        "flash_attention_pipelined": lambda: attention.flash_attention.get_ir(1, 2, 256, 64, True, num_stages=2),
        "view_reshape_global": lambda: views.flat_affine.get_ir(37, 24),
        "view_reshape_shared_pairs": lambda: views.swap_pairs.get_ir(40, 32),
        "view_int8_as_uint32_dequant": lambda: views.dequant_int8_words.get_ir(40, 64),
        "view_pipelined_dequant_row_sum": lambda: views.dequant_row_sum.get_ir(96, 256),
        "view_fp16_pairs_as_uint32": lambda: views.negate_fp16_bits.get_ir(70, 32),
        "view_local_and_var_bits": lambda: views.register_bits.get_ir(100),
        "view_reshape_global_gemm": mm(128, 128, 96, block_M=64, block_N=64, num_stages=2, flat_A=True),
        "unpack_int4_bit_ops": lambda: scalar_intrinsics.unpack_int4.get_ir(48, 64),
        "dequant_int4_fp16_reinterpret": lambda: scalar_intrinsics.dequant_int4_fp16.get_ir(80, 128),
        "bit_casts_reinterpret": lambda: scalar_intrinsics.bit_casts.get_ir(200),
        "bit_counts_limits_nearbyint": lambda: scalar_intrinsics.bit_counts.get_ir(150),
        "fast_math_intrinsics": lambda: scalar_intrinsics.fast_math.get_ir(300),
        "ieee_rounding_modes": lambda: scalar_intrinsics.ieee_rounding.get_ir(256),
        "gemv_splitk_warp_reduce": lambda: simt.splitk_gemv.get_ir(200, 1000),
        "gemv_shared_atomic_add": lambda: simt.gemv_shared_atomic.get_ir(64, 256),
        "warp_shuffles_votes": lambda: simt.warp_shuffles.get_ir(),
        "simt_per_thread_atomic_loads": lambda: simt.flagged_copy.get_ir(),
        "gemm_split_k_alloc_global_partials": lambda: kernel_parts(workspace.matmul_split_k.get_ir(128, 192, 512))[0],
        "gemm_split_k_alloc_global_sum": lambda: kernel_parts(workspace.matmul_split_k.get_ir(128, 192, 512))[1],
        "gemm_pointers_make_tensor": lambda: workspace.matmul_pointers.get_ir(128, 64, 96),
    }
