# Kernel code is written as users write it (unused block variables included).
# ruff: noqa: F841
"""T.gemm_sp without a GPU: the frontend's checks (each naming the line), the host ``compress``
and its metadata format, the interpreter's reading of it, and the CUDA lowering (SASS has the
sparse HMMA)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels.gemm_sp import matmul_sp
from tests.null.cuda_helpers import cuda_source, sass_text
from tests.null.located import located_errors
from tilelang_x.core_ir.errors import (
    ArgumentError,
    BackendNotImplementedError,
    NotSupportedError,
    ShapeMismatchError,
    TileLangSyntaxError,
    TileLangTypeError,
)
from tilelang_x.layout import make_cutlass_metadata_layout
from tilelang_x.plugins.interp.lower.gemm_sp import decompress
from tilelang_x.utils.sparse import compress, randn_semi_sparse

where, raises = located_errors(__file__)


def _sparse(M: int, K: int, dtype: torch.dtype = torch.float16, seed: int = 0, transposed: bool = False):
    return randn_semi_sparse(M, K, dtype, "cpu", transposed=transposed, generator=torch.Generator().manual_seed(seed))


# ---- the host side: compress and the metadata format -------------------------------------------

@pytest.mark.parametrize("meta", [torch.int16, torch.uint8, torch.int32, torch.int8, "int16", T.uint8])
def test_compress_round_trip(meta):
    a = _sparse(32, 64)
    a_sparse, e = compress(a, meta_dtype=meta)
    per = e.element_size() * 8
    assert a_sparse.shape == (32, 32) and e.shape == (32, 64 // per)
    assert e.dtype == getattr(torch, str(meta).removeprefix("torch."))
    dense = decompress(a_sparse.float().numpy(), e.numpy(), per)
    np.testing.assert_array_equal(dense, a.float().numpy())


def test_compress_metadata_bytes_do_not_depend_on_the_dtype():
    a = _sparse(16, 64, torch.bfloat16)
    views = [compress(a, meta_dtype=m)[1].contiguous().view(torch.uint8) for m in (torch.uint8, torch.int16,
                                                                                      torch.int32)]
    assert all(torch.equal(views[0], v) for v in views[1:])


def test_compress_format_by_hand():
    # groups of 4: (x, y, 0, 0), (x, 0, 0, y), (0, 0, 0, x), zeros: a group pads with its first zeros
    a = torch.zeros(1, 16, dtype=torch.float16)
    a[0, [0, 1, 4, 7, 11]] = torch.tensor([1, 2, 3, 4, 5], dtype=torch.float16)
    a_sparse, e = compress(a, meta_dtype=torch.int16)
    assert a_sparse.tolist() == [[1, 2, 3, 4, 0, 5, 0, 0]]
    nibbles = [0b0100, 0b1100, 0b1100, 0b0100]  # (0, 1), (0, 3), (0, 3), (0, 1)
    assert int(e.view(torch.uint16).item()) == sum(n << (4 * g) for g, n in enumerate(nibbles))


def test_compress_by_arch_and_transposed():
    a = _sparse(32, 64, transposed=True)  # [K, M] = [64, 32]
    a_sparse, e = compress(a, transposed=True, block_k=32, arch="9.0")
    assert a_sparse.shape == (32, 32) and e.shape == (32, 8) and e.dtype == torch.uint8
    assert compress(a, transposed=True, arch="8.0")[1].dtype == torch.int16
    np.testing.assert_array_equal(decompress(a_sparse.T.float().numpy(), e.numpy(), 8), a.T.float().numpy())


def test_compress_rejects_what_is_not_2_4_sparse():
    a = _sparse(8, 32)
    a[3, 8:12] = 1.0
    with pytest.raises(ArgumentError, match=r"row 3, columns 8\.\.11 hold 4 non-zeros"):
        compress(a)
    with pytest.raises(TileLangTypeError, match="float16 or bfloat16"):
        compress(a.float())
    with pytest.raises(ShapeMismatchError, match="multiple of 32"):
        compress(_sparse(8, 16), meta_dtype=torch.int32)


# ---- the interpreter ---------------------------------------------------------------------------

@tilelang.jit(out_idx=[-1], target="interp")
def _one_tile(M, N, K, e_dtype="int16", v2=False):
    e = 16 if e_dtype == "int16" else 8

    @T.prim_func
    def main(A_sparse: T.Tensor((M, K // 2), "float16"), E: T.Tensor((M, K // e), e_dtype),
             B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, K // 2), "float16")
            E_s = T.alloc_shared((M, K // e), e_dtype)
            B_s = T.alloc_shared((K, N), "float16")
            C_f = T.alloc_fragment((M, N), "float32")
            T.annotate_layout({E_s: make_cutlass_metadata_layout(E_s, mma_dtype="float16", arch="8.0")})
            T.copy(A_sparse, A_s)
            T.copy(E, E_s)
            T.copy(B, B_s)
            if v2:
                T.gemm_sp_v2(A_s, E_s, B_s, C_f, clear_accum=True)
            else:
                T.gemm_sp(A_s, E_s, B_s, C_f, clear_accum=True)
            T.copy(C_f, C)

    return main


@pytest.mark.parametrize("v2", [False, True])
def test_interp_gemm_sp_v2_and_cutlass_layout(v2):
    a, b = _sparse(32, 64, seed=1), torch.randn(64, 16).half()
    a_sparse, e = compress(a)
    torch.testing.assert_close(_one_tile(32, 16, 64, v2=v2)(a_sparse, e, b), a.float() @ b.float())


def test_interp_rejects_metadata_that_names_a_column_twice():
    a, b = _sparse(32, 64, seed=2), torch.randn(64, 16).half()
    a_sparse, e = compress(a, meta_dtype=torch.uint8)
    e[5, 1] = 0b0101_0100  # group 3 of row 5: column 1 twice
    with pytest.raises(ArgumentError, match=r"column 1 twice for row 5 of the tile, columns 12\.\.15"):
        _one_tile(32, 16, 64, "uint8")(a_sparse, e, b)


# ---- frontend errors, each at its line ---------------------------------------------------------

def _kernel(a_shape=(64, 32), e_shape=(64, 4), e_dtype="int16", in_dtype="float16", acc="float32", e_scope="shared",
            tag="", transpose_E=False):
    def build():
        @T.prim_func
        def main(E: T.Tensor((64, 4), "int16")):
            with T.Kernel(1) as bx:
                a = T.alloc_shared(a_shape, in_dtype)
                e = E if e_scope == "global" else T.alloc_shared(e_shape, e_dtype)
                b = T.alloc_shared((64, 32), in_dtype)
                c = T.alloc_fragment((64, 32), acc)
                if transpose_E:
                    T.gemm_sp(a, e, b, c, False, True)  # E:sp-transpose-e
                elif tag == "sp-shape":
                    T.gemm_sp(a, e, b, c)  # E:sp-shape
                elif tag == "sp-meta-shape":
                    T.gemm_sp(a, e, b, c)  # E:sp-meta-shape
                elif tag == "sp-meta-dtype":
                    T.gemm_sp(a, e, b, c)  # E:sp-meta-dtype
                elif tag == "sp-input":
                    T.gemm_sp(a, e, b, c)  # E:sp-input
                elif tag == "sp-acc":
                    T.gemm_sp(a, e, b, c)  # E:sp-acc
                else:
                    T.gemm_sp(a, e, b, c)  # E:sp-scope

    return build


def test_gemm_sp_frontend_errors():
    raises(ShapeMismatchError, "sp-shape", _kernel(a_shape=(64, 64), tag="sp-shape"), "A_sparse holds K/2 = 64",
           "K of B is 64")
    raises(ShapeMismatchError, "sp-meta-shape", _kernel(e_shape=(64, 8), tag="sp-meta-shape"),
           "E must be [M, K / 16] = [64, 4] for int16 metadata")
    raises(TileLangTypeError, "sp-meta-dtype", _kernel(e_dtype="float16", tag="sp-meta-dtype"),
           "metadata `e` is float16", "T.int16 ([M, K / 16])")
    raises(NotSupportedError, "sp-input", _kernel(in_dtype="float32", tag="sp-input"), "float16 or bfloat16")
    raises(TileLangTypeError, "sp-acc", _kernel(acc="float16", tag="sp-acc"), "accumulates in float32")
    raises(TileLangSyntaxError, "sp-scope", _kernel(e_scope="global"), "metadata E `E` is a global buffer")
    raises(NotSupportedError, "sp-transpose-e", _kernel(transpose_E=True), "transpose_E=True",
           "pass transpose_B by keyword")


# ---- CUDA (no GPU): the lowering and its SASS --------------------------------------------------

def test_cuda_source_uses_mma_sp_only_for_gemm_sp():
    src, _ = cuda_source(matmul_sp.get_ir(128, 128, 128))
    assert "tlx_mma_sp_f16(" in src and "tlx_sp_meta(" in src and "mma.sp.sync.aligned.m16n8k32" in src
    from tests.kernels import gemm

    assert "tlx_sparse" not in cuda_source(gemm.matmul.get_ir(128, 128, 128))[0]


def test_cuda_refuses_what_mma_sp_cannot_run():
    with pytest.raises(BackendNotImplementedError, match="K a multiple of 32"):
        cuda_source(matmul_sp.get_ir(128, 128, 128, block_K=16))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("kw", [{}, {"in_dtype": "bfloat16", "trans_B": True, "arch": "9.0"},
                                # 64x64 tiles: 3 stages of K=256 fit sm_80's shared memory
                                {"trans_A": True, "block_M": 64, "block_N": 64, "block_K": 256, "num_stages": 3,
                                 "threads": 256}],
                         ids=["fp16", "bf16_trans_B_uint8", "trans_A_tma_k256"])
def test_sass_has_sparse_hmma(arch, kw):  # on sm_90a with wgmma.sp off
    sass = sass_text(matmul_sp.get_ir(512, 512, 512, **kw), arch, {"tlx.wgmma_sp": False})
    suffix = ".BF16" if kw.get("in_dtype") == "bfloat16" else ""
    assert re.search(rf"HMMA\.SP\.16832\.F32{re.escape(suffix)}\b", sass), sass[:2000]
    assert "HMMA.16816" not in sass  # every product is the sparse one


def test_contrib_nvcc_as_the_example_calls_it():
    from tilelang_x.contrib import nvcc

    arch = nvcc.get_target_compute_version()
    assert nvcc.parse_compute_version(arch)[0] >= 8
    assert torch.cuda.is_available() or arch == "8.0"


@pytest.mark.parametrize("kw", [{"threads": 256, "block_N": 256},
                                {"in_dtype": "bfloat16", "trans_B": True, "arch": "9.0"},
                                {"block_M": 64, "block_K": 256, "threads": 256}],
                         ids=["fp16_two_warpgroups", "bf16_trans_B_uint8", "tma_k256"])
def test_wgmma_sp_has_sparse_hgmma(kw):
    _, ctx = cuda_source(matmul_sp.get_ir(512, 512, 512, **kw), "sm_90a")
    assert [p.kind for p in ctx.data["cuda.gemm"].values()] == ["wgmma_sp"]
    sass = sass_text(matmul_sp.get_ir(512, 512, 512, **kw), "sm_90a")
    assert re.search(r"HGMMA\.SP\.64x\d+x32\.F32", sass) and "HMMA" not in sass, sass[:2000]


def test_wgmma_sp_turns_off_and_keeps_transposed_a_on_mma_sp():
    _, ctx = cuda_source(matmul_sp.get_ir(256, 256, 256), "sm_90a", {"tlx.wgmma_sp": False})
    assert [p.kind for p in ctx.data["cuda.gemm"].values()] == ["mma_sp"]
    _, ctx = cuda_source(matmul_sp.get_ir(256, 256, 256, trans_A=True), "sm_90a")
    assert [p.kind for p in ctx.data["cuda.gemm"].values()] == ["mma_sp"]
