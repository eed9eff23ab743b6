"""The CUDA backend's cubin cache goes through ``tilelang_x.cache`` (needs nvcc or NVRTC, no GPU)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tilelang_x import cache
from tilelang_x.plugins.cuda import compile as cc

KERNEL = r"""
extern "C" __global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
"""

HAS_COMPILER = cc.find_nvrtc() is not None or cc.find_nvcc() is not None
pytestmark = pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler (nvcc or NVRTC) installed")


def test_cubin_entry_lives_in_the_generic_store(cache_root: Path) -> None:
    first = cc.compile_cuda(KERNEL, "sm_80", kernel_name="scale")
    key = cc.cache_key(KERNEL, "sm_80", {"kernel_name": "scale"}, first.compiler)
    store = cache.Store("cuda", suffix=".cubin")
    entry = store.get_entry(key)
    assert entry is not None and entry.files["kernel.cubin"] == first.cubin
    assert entry.meta["arch"] == "sm_80" and entry.meta["kernel_name"] == "scale"
    assert cc.cache_dir() == str(cache_root / "cuda")
    info = cache.info()
    assert info["namespaces"]["cuda"]["entries"] == 1
    assert cc.compile_cuda(KERNEL, "sm_80", kernel_name="scale").cached
    assert cache.clear()["entries"] == 1
    assert not cc.compile_cuda(KERNEL, "sm_80", kernel_name="scale").cached


def test_entry_that_is_not_a_cubin_is_rebuilt(cache_root: Path) -> None:
    first = cc.compile_cuda(KERNEL, "sm_80", kernel_name="scale")
    key = cc.cache_key(KERNEL, "sm_80", {"kernel_name": "scale"}, first.compiler)
    store = cache.Store("cuda", suffix=".cubin")
    store.put(key, {"kernel.cubin": b"not an ELF file"}, meta={"arch": "sm_80", "kernel_name": "scale"})
    again = cc.compile_cuda(KERNEL, "sm_80", kernel_name="scale")
    assert not again.cached and again.cubin == first.cubin
    assert cc.compile_cuda(KERNEL, "sm_80", kernel_name="scale").cached


def test_unwritable_cache_warns_and_still_compiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TILELANG_X_CACHE_DIR", str(blocker))
    cache._warned.clear()
    with pytest.warns(cache.CacheWarning, match="TILELANG_X_CACHE_DIR") as caught:
        binary = cc.compile_cuda(KERNEL, "sm_80", kernel_name="scale")
    assert binary.cubin.startswith(b"\x7fELF") and not binary.cached
    assert str(blocker) in str(caught[0].message)


COMPILE = textwrap.dedent("""
    import sys
    from tilelang_x.plugins.cuda import compile as cc
    b = cc.compile_cuda(sys.argv[1], "sm_80", kernel_name="scale")
    assert b.cubin.startswith(b"\\x7fELF")
    print("cached" if b.cached else "compiled")
""")


def test_two_processes_compile_the_same_kernel(cache_root: Path) -> None:
    env = {**os.environ, "TILELANG_X_CACHE_DIR": str(cache_root)}
    procs = [subprocess.Popen([sys.executable, "-c", COMPILE, KERNEL], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    assert cache.info()["namespaces"]["cuda"]["entries"] == 1
    assert cc.compile_cuda(KERNEL, "sm_80", kernel_name="scale").cached
