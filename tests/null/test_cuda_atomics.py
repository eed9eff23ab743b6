# ruff: noqa: F841
"""The CUDA forms of the bitwise atomics and of T.atomic_load / T.atomic_store: what the generated
source calls and the instructions ptxas makes of it (the suite kernels also compile for sm_80 and
sm_90a in test_cuda_codegen)."""

from __future__ import annotations

import re

import pytest

import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source, sass_text
from tests.null.cuda_suite_funcs import suite_funcs
from tilelang_x.core_ir.errors import BackendNotImplementedError

FUNCS = suite_funcs()


def _ops(name: str, arch: str) -> set[str]:
    return set(re.findall(r"\b((?:RED|REDG|ATOM|ATOMG|LD|ST|MEMBAR|CCTL)\.[A-Z0-9.]+)", sass_text(FUNCS[name](), arch)))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_bitwise_atomics_are_single_instructions(arch: str) -> None:
    assert "atomicOr((unsigned int*)&S[" in cuda_source(FUNCS["atomic_or"](), arch)[0]
    assert any(re.fullmatch(r"REDG?\.E\.OR\.STRONG\.GPU", op) for op in _ops("atomic_or", arch))
    assert any(re.fullmatch(r"REDG?\.E\.AND\.STRONG\.GPU", op) for op in _ops("atomic_and_tile", arch))
    # int16: an xor of the 32-bit word that holds the element
    assert "tlx_atomic_xor_narrow(&S[" in cuda_source(FUNCS["atomic_xor_int16"](), arch)[0]
    assert any(re.fullmatch(r"(?:REDG?|ATOMG?)\.E\.XOR\.STRONG\.GPU", op) for op in _ops("atomic_xor_int16", arch))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_seq_cst_flags_fence_and_share_the_load(arch: str) -> None:
    src = cuda_source(FUNCS["atomic_flags_seq_cst"](), arch)[0]
    src = src[src.index('extern "C"'):]
    # the block synchronizes, then one thread stores the flag; thread 0 loads each flag into shared
    # memory between barriers, so every thread takes the same branch
    assert re.search(r"__syncthreads\(\);\s*if \(tx == 0\) \{\s*tlx_st_seq_cst_32\(&F\[bk\], ", src)
    assert re.search(r"__syncthreads\(\);\s*if \(tx == 0\) \{\s*(\w+)\[0\] = \(int\)\(tlx_ld_seq_cst_32\(&F\[k\]\)\);"
                     r"\s*\}\s*__syncthreads\(\);\s*if \(\1\[0\] == 0\)", src)
    assert {"MEMBAR.SC.GPU", "LD.E.STRONG.GPU", "ST.E.STRONG.GPU"} <= _ops("atomic_flags_seq_cst", arch)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_spin_wait_acquires_and_releases(arch: str) -> None:
    src = cuda_source(FUNCS["atomic_spin_wait"](), arch)[0]
    src = src[src.index('extern "C"'):]
    loop = src[src.index("while ("):]
    # the flag is fetched before every test of the condition (also after a `continue`)
    assert re.match(r"while \(true\) \{\s*__syncthreads\(\);\s*if \(tx == 0\) \{\s*(\w+)\[0\] = "
                    r"\(int\)\(tlx_ld_acquire_32\(&F\[b - 1\]\)\);\s*\}\s*__syncthreads\(\);\s*"
                    r"if \(!\(\1\[0\] == 0\)\) \{\s*break;", loop), loop[:300]
    assert re.search(r"__syncthreads\(\);\s*if \(tx == 0\) \{\s*tlx_st_release_32\(&F\[b\], ", src)
    # acquire: a strong load, then the L1 invalidated; release: a GPU-wide membar before the store
    assert {"LD.E.STRONG.GPU", "CCTL.IVALL", "MEMBAR.ALL.GPU", "ST.E.STRONG.GPU"} <= _ops("atomic_spin_wait", arch)
    assert "MEMBAR.SC.GPU" not in _ops("atomic_spin_wait", arch)


@T.prim_func
def _spin_with_continue(F: T.Tensor((4,), T.int32), C: T.Tensor((4,), T.int32)):
    with T.Kernel(4, threads=32) as bx:
        tries = T.alloc_var(T.int32, 0)
        if bx > 0:
            while T.atomic_load(F[bx - 1], memory_order="acquire") == 0:
                tries += 1
                if tries < 1000:
                    continue
                tries = 0
        C[bx] = tries
        T.atomic_store(F[bx], 1, memory_order="release")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_continue_in_a_spin_wait_fetches_the_flag_again(arch: str) -> None:
    src = cuda_source(_spin_with_continue, arch)[0]
    loop = src[src.index("while ("):]
    body = loop[:loop.index("continue;")]
    assert body.count("tlx_ld_acquire_32(&F[bx - 1])") == 1 and body.index("tlx_ld_acquire_32") < body.index("break;")


@T.prim_func
def _store_int16(F: T.Tensor((4,), T.int16)):
    with T.Kernel(4, threads=32) as bx:
        T.atomic_store(F[bx], 1)


@T.prim_func
def _load_in_copy(X: T.Tensor((64, 16), T.float32), N: T.Tensor((1,), T.int32), Y: T.Tensor((16, 16), T.float32)):
    with T.Kernel(1, threads=32) as bx:
        t = T.alloc_shared((16, 16), T.float32)
        T.copy(X[T.atomic_load(N[0]) * 16, 0], t)
        T.copy(t, Y)


def test_unsupported_forms_name_the_line() -> None:
    with pytest.raises(BackendNotImplementedError, match=r"T.atomic_store on int16 is not supported on CUDA"):
        cuda_source(_store_int16)
    with pytest.raises(BackendNotImplementedError, match=r"test_cuda_atomics.py:\d+: T.atomic_load in the operands "
                       r"of T.copy is not supported on CUDA") as info:
        cuda_source(_load_in_copy)
    assert "T.alloc_var" in str(info.value)
