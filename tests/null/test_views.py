"""``T.view`` / ``T.reshape``: the IR they build, the interpreter's aliasing, and what the CUDA
passes must do for memory reached through a view (barriers, layouts, pipelines, pointers)."""

from __future__ import annotations

import pytest
import torch

import tilelang_x
import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import views
from tests.null.cuda_helpers import cuda_source, sass_ops
from tilelang_x import knobs
from tilelang_x.core_ir.buffer import Buffer
from tilelang_x.core_ir.errors import ArgumentError, BackendNotImplementedError, LayoutError
from tilelang_x.core_ir.expr import const
from tilelang_x.core_ir.stmt import Store
from tilelang_x.core_ir.visit import views_of


def _interp(func, out_idx):
    return tilelang.compile(func, target="interp", out_idx=out_idx)


def _lines_between(source: str, first: str, then: str) -> list[str]:
    """The lines after the first one containing ``first`` up to the next one containing ``then``."""
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines) if first in line)
    end = next(i for i in range(start + 1, len(lines)) if then in lines[i])
    return [line.strip() for line in lines[start + 1:end]]


# ---- the IR -------------------------------------------------------------------------------------

def test_view_of_a_view_aliases_the_owner_and_the_printer_declares_it():
    @T.prim_func
    def main(A: T.Tensor((8, 16), T.float16), B: T.Tensor((64,), T.uint32)):
        with T.Kernel(1, threads=64):
            flat = T.reshape(A, (128,))
            words = T.view(flat, (64,), T.uint32)
            for i in T.Parallel(64):
                B[i] = words[i]

    found = views_of(main.body)
    (a,) = [p for p in main.params if p.name == "A"]
    assert [v.name for v in found[a]] == ["words"]  # `flat` is unused; `words` aliases A itself
    assert found[a][0].base is a and found[a][0].storage is a
    assert "words = T.view(A, (64,), uint32)" in main.script()


def test_store_through_a_view_is_a_write_to_its_base():
    from tilelang_x.plugins.cuda.sync import accesses

    tile = Buffer("S", (4, 8), tilelang_x.language.float16, "shared")
    words = Buffer("W", (16,), tilelang_x.language.uint32, "shared", base=tile)
    written, read, _ = accesses(Store(words, (const(0),), const(1, tilelang_x.language.uint32)))
    assert written == {id(tile)} and not read


def test_interp_writes_through_global_views_reach_the_output():
    h = torch.randn(70, 32).half()
    with knobs.scope(target_default="interp"):
        assert torch.equal(views.negate_fp16_bits(70, 32)(h), -h)


def test_interp_view_of_a_non_contiguous_argument_is_refused():
    a = torch.randn(24, 37).T  # a (37, 24) transposed view
    with knobs.scope(target_default="interp"), pytest.raises(ArgumentError, match="not contiguous"):
        views.flat_affine(37, 24)(a)


def _bf16_bits():
    @T.prim_func
    def bits(A: T.Tensor((4, 8), T.bfloat16), B: T.Tensor((4, 8), T.int16)):
        with T.Kernel(1, threads=32):
            raw = T.view(A, dtype=T.int16)
            for i, j in T.Parallel(4, 8):
                B[i, j] = raw[i, j]

    return bits


def test_interp_refuses_to_reinterpret_bfloat16_and_cuda_compiles_it():
    with pytest.raises(BackendNotImplementedError, match="bfloat16") as info:
        _interp(_bf16_bits(), [-1])
    assert info.value.loc is not None and "raw = T.view" in open(__file__).read().splitlines()[info.value.loc.line - 1]
    source, _ = cuda_source(_bf16_bits())
    assert "const short* raw = (const short*)(A);" in source


# ---- fragments ----------------------------------------------------------------------------------

def _fragment_view():
    @T.prim_func
    def frag(A: T.Tensor((4, 8), T.float32), B: T.Tensor((4, 8), T.float32)):
        with T.Kernel(1, threads=32):
            f = T.alloc_fragment((4, 8), T.float32)
            flat = T.reshape(f, (32,))
            for i in T.Parallel(32):
                flat[i] = A[i // 8, i % 8] + 1.0
            T.copy(f, B)

    return frag


def _fragment_bits():
    @T.prim_func
    def frag(A: T.Tensor((4, 8), T.float32), B: T.Tensor((4, 8), T.int32)):
        with T.Kernel(1, threads=32):
            f = T.alloc_fragment((4, 8), T.float32)
            bits = T.view(f, dtype=T.int32)
            T.copy(A, f)
            T.copy(bits, B)

    return frag


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_reshape_of_a_fragment_reads_its_registers_on_cuda(arch):
    a = torch.randn(4, 8)
    torch.testing.assert_close(_interp(_fragment_view(), [-1])(a), a + 1)
    source, ctx = cuda_source(_fragment_view(), arch)
    layouts = {b.name: lay for b, lay in ctx.data["cuda.layouts"].items()}
    assert layouts["flat"].num_local == layouts["f"].num_local
    assert "flat[" not in source  # the reshape has no registers of its own: it reads f's


def test_fragment_viewed_as_another_dtype_is_refused_on_cuda():
    with pytest.raises(BackendNotImplementedError, match="views fragment `f` \\(float32\\) as int32") as info:
        cuda_source(_fragment_bits())
    assert "T.alloc_shared" in info.value.hint
    assert "bits = T.view(f" in open(__file__).read().splitlines()[info.value.loc.line - 1]


def test_reshape_fragment_splits_and_rejoins_digits():
    from tilelang_x.plugins.cuda.layout import mma_c_fragment, reshape_fragment

    acc = mma_c_fragment(64, 128, 2, 2)
    heads = reshape_fragment(acc, (64, 4, 32))
    assert heads is not None and heads.shape == (64, 4, 32) and heads.num_local == acc.num_local
    assert reshape_fragment(heads, (64, 128)) == acc
    assert reshape_fragment(acc, (64, 3, 32)) is None  # 128 columns are not 3 x 32


def test_gemm_accumulator_read_per_head_through_a_reshape():
    q = torch.randn(4 * 16, 64).half()
    k = torch.randn(200, 64).half()
    w = torch.randn(4, 16)
    ref = (torch.relu(k.float() @ q.float().T).reshape(200, 4, 16) * w[None]).sum(-1).T
    out = _interp(views.head_weighted_scores.get_ir(4, 200, 16, 64), [-1])(q, k, w)
    torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-3)
    for arch in ("sm_80", "sm_90a"):
        source, ctx = cuda_source(views.head_weighted_scores.get_ir(4, 200, 16, 64), arch)
        layouts = {b.name: lay for b, lay in ctx.data["cuda.layouts"].items()}
        assert layouts["s_heads"].shape == (64, 2, 16) and layouts["s_heads"].num_local == layouts["s"].num_local
        assert "float s[" in source and "s_heads[" not in source


@pytest.mark.parametrize("arch, kind, instruction", [
    ("sm_80", "fma", "FFMA"),  # no float8 mma.sync before sm_89: the FMA loop
    ("sm_89", "mma", "QMMA.16832.F32.E4M3.E4M3"),
    ("sm_90a", "wgmma", "QGMMA.64x32x32.F32.E4M3.E4M3"),
])
def test_float8_indexer_reads_its_accumulator_per_head(arch: str, kind: str, instruction: str) -> None:
    func = views.head_weighted_scores.get_ir(4, 200, 16, 64, dtype=T.float8_e4m3fn)
    source, ctx = cuda_source(func, arch)
    assert [plan.kind for plan in ctx.data["cuda.gemm"].values()] == [kind]
    layouts = {b.name: lay for b, lay in ctx.data["cuda.layouts"].items()}
    assert layouts["s_heads"].num_local == layouts["s"].num_local and "s_heads[" not in source
    assert "_exchange" not in source  # the loops follow the accumulator's layout, whichever form the gemm takes
    ops = sass_ops(func, r"\b([A-Z]+MMA\.[\w.]+|FFMA)\b", arch)
    assert ops.get(instruction) and (kind == "fma") == (set(ops) == {"FFMA"}), ops


# ---- CUDA: barriers, layouts, pipelines, pointers -----------------------------------------------

@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_barrier_between_a_copy_and_a_loop_reading_its_tile_through_a_view_and_back(arch):
    source, _ = cuda_source(views.swap_pairs.get_ir(40, 32), arch)
    # T.copy(A, S) then a T.Parallel reading S through `pairs`
    assert "__syncthreads();" in _lines_between(source, "&S[", "// parallel")
    # a T.Parallel writing D through `out`, then T.copy(D, B)
    assert "__syncthreads();" in _lines_between(source, "// parallel", "&D[")


def test_views_share_their_base_storage_in_generated_code():
    source, ctx = cuda_source(views.negate_fp16_bits.get_ir(70, 32))
    assert "const unsigned int* H_words = (const unsigned int*)(H);" in source
    assert "unsigned int* O_words = (unsigned int*)(Out);" in source
    aligns = {p.name: p.align for p in ctx.data["cuda.meta"].params}
    assert aligns["H"] >= 4 and aligns["Out"] >= 4  # uint32 words of fp16 tensors, checked at launch
    source, _ = cuda_source(views.register_bits.get_ir(100))
    assert "__align__(4) signed char parts[4];" in source and "int* x_bits = (int*)(&x);" in source


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_view_of_a_pipelined_tile_reads_the_current_stage(arch):
    source, _ = cuda_source(views.dequant_row_sum.get_ir(96, 256), arch)
    body = source[source.index('extern "C"'):]
    assert "unsigned int* words = (unsigned int*)(tlx_smem + 0);" in body
    assert "words[((((0 + (k_i & 1)) * 32)" in body  # stage k % 2 of 32 rows of 16 words
    assert "tlx_cp_async16(" in body and "mbar" not in body  # a viewed tile is not a swizzled TMA tile


def _viewed_gemm_operand(annotate: bool):
    @T.prim_func
    def gemm(A: T.Tensor((64, 32), T.float16), B: T.Tensor((32, 64), T.float16), C: T.Tensor((64, 64), T.float32),
             S: T.Tensor((64,), T.uint32)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 32), T.float16)
            B_s = T.alloc_shared((32, 64), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            if annotate:
                T.annotate_layout({A_s: tilelang_x.layout.make_swizzled_layout(A_s)})
            words = T.view(A_s, (64, 16), T.uint32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            for i in T.Parallel(64):
                S[i] = words[i, 0]
            T.copy(acc, C)

    return gemm


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_viewed_gemm_operand_stays_row_major(arch):
    _, ctx = cuda_source(_viewed_gemm_operand(False), arch)
    layouts = {b.name: lay for b, lay in ctx.data["cuda.layouts"].items()}
    assert layouts["A_s"].swizzle == "none"
    assert getattr(layouts["B_s"], "swizzle", "panel") != "none"  # the unviewed operand keeps its swizzle
    with pytest.raises(LayoutError, match="`A_s` is viewed as `words`"):
        cuda_source(_viewed_gemm_operand(True), arch)


def test_tensor_of_data_is_tilelangs_spelling_of_a_view():
    @T.prim_func
    def flat(A: T.Tensor((8, 8), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            A_flat = T.Tensor((64,), T.float32, A.data)
            for i in T.Parallel(64):
                B[i] = A_flat[i] * 2.0

    (view_buf,) = [v for vs in views_of(flat.body).values() for v in vs]
    assert view_buf.base.name == "A" and [int(e.value) for e in view_buf.shape] == [64]
    with knobs.scope(target_default="interp"):
        kernel = tilelang.compile(flat)
    a = torch.randn(8, 8)
    b = torch.empty(64)
    kernel(a, b)
    assert torch.equal(b, a.flatten() * 2)
