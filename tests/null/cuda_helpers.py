"""Run the CUDA backend's stages and codegen on a PrimFunc without a GPU, and read the SASS of
what it compiles to."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from typing import Any

import pytest

from tilelang_x.core_ir.stages import StageContext, run_stages
from tilelang_x.core_ir.stmt import PrimFunc
from tilelang_x.target import Target


def cuda_source(func: PrimFunc, arch: str = "sm_80", configs: dict[str, bool] | None = None) -> tuple[str, Any]:
    """(CUDA source, stage context) for ``func`` — core stages, CUDA stages, codegen; ``configs``
    are the kernel's pass_configs (with those its body annotates, as the compiler merges them)."""
    from tilelang_x.body_options import with_body_options
    from tilelang_x.compiler import _core_stages
    from tilelang_x.plugins.cuda.codegen import generate
    from tilelang_x.plugins.cuda.passes import stages

    ctx = StageContext(Target("cuda", arch), with_body_options(func, {"pass_configs": configs or {}}))
    lowered = run_stages(func, _core_stages() + stages(ctx.target), ctx)
    ctx.data["lowered"] = lowered
    return generate(lowered, ctx), ctx


def assert_compiles(source: str, arch: str, ctx: Any) -> None:
    """``source`` (from ``cuda_source``, its context ``ctx``) compiles to a cubin for ``arch``; skips
    the test without a CUDA compiler."""
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    if find_nvrtc() is None and find_nvcc() is None:
        pytest.skip("no CUDA compiler here")
    assert len(compile_cuda(source, arch, kernel_name=ctx.data["cuda.meta"].kernel_name).cubin) > 0


def cuobjdump() -> str | None:
    """cuobjdump on PATH or from the nvidia-cuda-cuobjdump wheel, else ``None``."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    for site in sys.path:
        hits = glob.glob(os.path.join(site, "nvidia", "*", "bin", "cuobjdump"))
        if hits:
            return hits[0]
    return None


def sass_text(func: PrimFunc, arch: str = "sm_90a", configs: dict[str, bool] | None = None) -> str:
    """The SASS of ``func`` compiled for ``arch``; skips the test without a compiler or cuobjdump."""
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    tool = cuobjdump()
    if tool is None or (find_nvrtc() is None and find_nvcc() is None):
        pytest.skip("needs a CUDA compiler and cuobjdump (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
    source, ctx = cuda_source(func, arch, configs)
    binary = compile_cuda(source, arch, kernel_name=ctx.data["cuda.meta"].kernel_name)
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"tlx_sass_{os.getpid()}.cubin")
    with open(path, "wb") as fh:
        fh.write(binary.cubin)
    try:
        return subprocess.run([tool, "-sass", path], capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(path)


def sass_ops(
    func: PrimFunc, pattern: str, arch: str = "sm_90a", configs: dict[str, bool] | None = None
) -> dict[str, int]:
    """How often each instruction matching ``pattern`` (a regex with one group) occurs in the SASS."""
    ops: dict[str, int] = {}
    for op in re.findall(pattern, sass_text(func, arch, configs)):
        ops[op] = ops.get(op, 0) + 1
    return ops


def flash_attention_ir(causal: bool = True, dim: int = 128, seq: int = 512, threads: int = 256,
                       block_m: int = 128) -> PrimFunc:
    """``tests/kernels/attention.flash_attention`` on one batch of two heads, 128-key blocks, 2 stages."""
    from tests.kernels import attention

    return attention.flash_attention.get_ir(1, 2, seq, dim, causal, block_M=block_m, block_N=128, num_stages=2,
                                            threads=threads)


def consumer_loop(src: str) -> str:
    """The text of the warp-specialized consumers' k-loop (``for (int k_i ...``) in CUDA source."""
    start = src.index("for (int k_i")
    return src[start:src.index("\n    }\n", start)]
