"""The CUDA toolchain without a GPU: nvcc / NVRTC compiles, the cubin cache, toolchain errors."""

from __future__ import annotations

import glob
import os

import pytest

from tilelang_x import knobs
from tilelang_x.cache import CacheWarning
from tilelang_x.core_ir.errors import CompilationError
from tilelang_x.plugins.cuda import compile as cc

VECTOR_ADD = r"""
extern "C" __global__ void __launch_bounds__(256) vector_add(const float* __restrict__ a,
                                                             const float* __restrict__ b,
                                                             float* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
"""

HALF_KERNEL = r"""
#include <cuda_fp16.h>
extern "C" __global__ void hadd(const half* a, const half* b, half* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = __hadd(a[i], b[i]);
}
"""

WGMMA_FENCE = r"""
extern "C" __global__ void fence_only(float* out) {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  out[threadIdx.x] = 1.0f;
}
"""

HAS_NVCC = cc.find_nvcc() is not None
HAS_NVRTC = cc.find_nvrtc() is not None
COMPILERS = [
    pytest.param("nvcc", marks=pytest.mark.skipif(not HAS_NVCC, reason="nvcc not installed")),
    pytest.param("nvrtc", marks=pytest.mark.skipif(not HAS_NVRTC, reason="NVRTC not installed "
                                                   "(pip install nvidia-cuda-nvrtc)")),
]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_X_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILELANG_X_DISABLE_CACHE", raising=False)
    return tmp_path / "cache"


def _entries(cache_dir) -> list[str]:
    return glob.glob(os.path.join(str(cache_dir), "cuda", "??", "*.cubin"))


@pytest.mark.parametrize("arch,expected", [
    ("sm_90a", "sm_90a"), ("90a", "sm_90a"), ("sm90a", "sm_90a"), ("compute_80", "sm_80"), ("SM_100a", "sm_100a"),
])
def test_normalize_arch(arch, expected):
    assert cc.normalize_arch(arch) == expected


def test_bad_arch_is_a_compilation_error():
    with pytest.raises(CompilationError, match="unknown CUDA architecture"):
        cc.normalize_arch("hopper")


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_compile_vector_add(compiler, arch, cache_dir):
    b = cc.compile_cuda(VECTOR_ADD, arch, kernel_name="vector_add", options={"compiler": compiler})
    assert b.cubin.startswith(b"\x7fELF")
    assert b"vector_add" in b.cubin
    assert b.arch == arch and b.kernel_name == "vector_add" and not b.cached
    assert b.compiler.startswith(compiler)
    assert b.seconds > 0


@pytest.mark.parametrize("compiler", COMPILERS)
def test_compile_with_cuda_headers(compiler, cache_dir):
    b = cc.compile_cuda(HALF_KERNEL, "sm_80", kernel_name="hadd", options={"compiler": compiler})
    assert b"hadd" in b.cubin


@pytest.mark.parametrize("compiler", COMPILERS)
def test_sm90a_instructions_compile(compiler, cache_dir):
    b = cc.compile_cuda(WGMMA_FENCE, "sm_90a", kernel_name="fence_only", options={"compiler": compiler})
    assert b.cubin.startswith(b"\x7fELF")
    with pytest.raises(CompilationError):
        cc.compile_cuda(WGMMA_FENCE, "sm_80", kernel_name="fence_only", options={"compiler": compiler})


@pytest.mark.parametrize("compiler", COMPILERS)
def test_options_reach_the_compiler(compiler, cache_dir):
    src = "#ifndef MUST_BE_SET\n#error MUST_BE_SET missing\n#endif\n" + VECTOR_ADD
    opts = {"compiler": compiler, "defines": {"MUST_BE_SET": 1}, "fast_math": True, "lineinfo": True,
            "maxrregcount": 64}
    b = cc.compile_cuda(src, "sm_80", kernel_name="vector_add", options=opts)
    assert b.cubin.startswith(b"\x7fELF")


@pytest.mark.parametrize("compiler", COMPILERS)
def test_compile_error_keeps_log_and_source(compiler, cache_dir):
    bad = VECTOR_ADD.replace("a[i] + b[i]", "a[i] + undeclared_thing")
    with pytest.raises(CompilationError) as info:
        cc.compile_cuda(bad, "sm_80", kernel_name="vector_add", options={"compiler": compiler})
    msg = str(info.value)
    assert "undeclared_thing" in msg and "vector_add" in msg and "sm_80" in msg
    path = info.value.hint.split("kept at ", 1)[1].strip()
    assert os.path.exists(path)
    with open(path) as f:
        assert "undeclared_thing" in f.read()


def _any_compiler() -> str:
    if HAS_NVRTC:
        return "nvrtc"
    if HAS_NVCC:
        return "nvcc"
    pytest.skip("no CUDA compiler installed")


def test_cache_hit_miss_and_key(cache_dir):
    comp = _any_compiler()
    first = cc.compile_cuda(VECTOR_ADD, "sm_80", kernel_name="vector_add", options={"compiler": comp})
    assert not first.cached and len(_entries(cache_dir)) == 1
    again = cc.compile_cuda(VECTOR_ADD, "sm_80", kernel_name="vector_add", options={"compiler": comp})
    assert again.cached and again.cubin == first.cubin and again.compiler == first.compiler
    # another arch, other options or other source: new entries
    cc.compile_cuda(VECTOR_ADD, "sm_90a", kernel_name="vector_add", options={"compiler": comp})
    cc.compile_cuda(VECTOR_ADD, "sm_80", kernel_name="vector_add", options={"compiler": comp, "fast_math": True})
    cc.compile_cuda(VECTOR_ADD + "\n// changed\n", "sm_80", kernel_name="vector_add", options={"compiler": comp})
    assert len(_entries(cache_dir)) == 4


@pytest.mark.parametrize("damage", ["truncate", "garble", "empty", "flip_cubin_byte"])
def test_corrupt_cache_entry_is_rebuilt(cache_dir, damage):
    comp = _any_compiler()
    first = cc.compile_cuda(VECTOR_ADD, "sm_80", kernel_name="vector_add", options={"compiler": comp})
    (path,) = _entries(cache_dir)
    data = open(path, "rb").read()
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "garble":
        data = b"garbage" + data[7:]
    elif damage == "empty":
        data = b""
    else:
        data = data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:]
    with open(path, "wb") as f:
        f.write(data)
    rebuilt = cc.compile_cuda(VECTOR_ADD, "sm_80", kernel_name="vector_add", options={"compiler": comp})
    assert not rebuilt.cached and rebuilt.cubin == first.cubin
    hit = cc.compile_cuda(VECTOR_ADD, "sm_80", kernel_name="vector_add", options={"compiler": comp})
    assert hit.cached


def test_cache_disabled_writes_nothing(cache_dir):
    comp = _any_compiler()
    with knobs.scope(cache_disable=True):
        a = cc.compile_cuda(VECTOR_ADD, "sm_80", kernel_name="vector_add", options={"compiler": comp})
        b = cc.compile_cuda(VECTOR_ADD, "sm_80", kernel_name="vector_add", options={"compiler": comp})
    assert not a.cached and not b.cached
    assert _entries(cache_dir) == []


def test_unwritable_cache_still_compiles(tmp_path, monkeypatch):
    comp = _any_compiler()
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TILELANG_X_CACHE_DIR", str(blocker))
    with pytest.warns(CacheWarning, match="TILELANG_X_CACHE_DIR"):
        b = cc.compile_cuda(VECTOR_ADD, "sm_80", kernel_name="vector_add", options={"compiler": comp})
    assert b.cubin.startswith(b"\x7fELF")


def test_missing_toolchain_says_what_to_install(monkeypatch, cache_dir):
    monkeypatch.setenv("TILELANG_X_NVCC", "/nonexistent/nvcc")
    monkeypatch.setenv("TILELANG_X_USE_NVRTC", "0")
    with pytest.raises(CompilationError) as info:
        cc.compile_cuda(VECTOR_ADD, "sm_80", kernel_name="vector_add")
    assert "pip install nvidia-cuda-nvrtc" in str(info.value)
    assert "TILELANG_X_NVCC" in str(info.value)
    ok, why = cc.toolchain_status()
    assert not ok and "nvidia-cuda-nvrtc" in why


def test_missing_nvrtc_when_asked_for(monkeypatch, cache_dir):
    monkeypatch.setenv("TILELANG_X_NVRTC", "/nonexistent/libnvrtc.so.13")
    with pytest.raises(CompilationError, match="NVRTC is not installed"):
        cc.compile_cuda(VECTOR_ADD, "sm_80", kernel_name="vector_add", options={"compiler": "nvrtc"})


def test_unknown_compiler_option(cache_dir):
    with pytest.raises(CompilationError, match="unknown CUDA compiler"):
        cc.compile_cuda(VECTOR_ADD, "sm_80", kernel_name="vector_add", options={"compiler": "clang"})


@pytest.mark.parametrize("configs,expected", [
    ({}, {}),
    ({"tl.enable_fast_math": True}, {"fast_math": True}),
    ({"tl.device_compile_flags": "-DTLX_A=1 -DTLX_B"}, {"flags": ["-DTLX_A=1", "-DTLX_B"]}),
    ({"tl.device_compile_flags": ["-DTLX_A=1"], "tl.enable_fast_math": False}, {"flags": ["-DTLX_A=1"]}),
])
def test_tilelang_compile_switches_reach_the_device_compiler(monkeypatch, cache_dir, configs, expected):
    """``tl.enable_fast_math`` and ``tl.device_compile_flags`` (TileLang's pass configs) become the
    device compiler's options."""
    import tilelang_x
    from tests.kernels import elementwise

    seen: list[dict] = []

    def fake(source, arch, *, kernel_name, options=None):
        seen.append(dict(options or {}))
        raise CompilationError("stop here")

    monkeypatch.setattr(cc, "compile_cuda", fake)
    func = elementwise.leaky_add.get_ir(64, 64)
    with pytest.raises(CompilationError, match="stop here"):
        tilelang_x.compile(func, target="cuda:sm_80", pass_configs=configs)
    assert seen == [expected]


def test_nvrtc_leaves_out_the_nvcc_only_flags_tilelang_kernels_pass():
    flags = ["-O3", "-DENABLE_BF16", "--expt-relaxed-constexpr", "-Xcompiler", "-fPIC", "--use_fast_math"]
    assert cc.nvrtc_flags(flags) == ["-DENABLE_BF16", "--use_fast_math"]


@pytest.mark.parametrize("compiler", COMPILERS)
def test_tilelang_style_compile_flags_compile_with_either_compiler(compiler, cache_dir):
    # compile_flags=["-O3", "-DENABLE_BF16"] is how TileLang's kernels often ask; NVRTC rejects -O3
    b = cc.compile_cuda(VECTOR_ADD, "sm_80", kernel_name="vector_add",
                        options={"compiler": compiler, "flags": ["-O3", "-DENABLE_BF16", "--expt-relaxed-constexpr"]})
    assert b.cubin.startswith(b"\x7fELF")
