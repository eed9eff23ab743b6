"""Run the CUDA backend's stages and codegen on a PrimFunc without a GPU."""

from __future__ import annotations

from typing import Any

from tilelang_x.core_ir.stages import StageContext, run_stages
from tilelang_x.core_ir.stmt import PrimFunc
from tilelang_x.target import Target


def cuda_source(func: PrimFunc, arch: str = "sm_80") -> tuple[str, Any]:
    """(CUDA source, stage context) for ``func`` — core stages, CUDA stages, codegen."""
    from tilelang_x.compiler import _core_stages
    from tilelang_x.plugins.cuda.codegen import generate
    from tilelang_x.plugins.cuda.passes import stages

    ctx = StageContext(Target("cuda", arch), {})
    lowered = run_stages(func, _core_stages() + stages(ctx.target), ctx)
    ctx.data["lowered"] = lowered
    return generate(lowered, ctx), ctx
