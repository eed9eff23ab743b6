"""CUDA backend hookimpls (nothing else lives here; heavy imports happen inside the hooks)."""

from __future__ import annotations

from typing import Any

from ...hookspecs import hookimpl
from . import target as _target


@hookimpl
def tlx_targets() -> list[Any]:
    return _target.target_infos()


@hookimpl
def tlx_detect() -> list[Any]:
    try:
        return _target.detect()
    except Exception:
        return []


@hookimpl
def tlx_status() -> list[tuple[str, bool, str]]:
    from .compile import toolchain_status

    has_compiler, description = toolchain_status()
    if not has_compiler:
        return [("cuda", False, description)]
    if not _target.has_device():
        return [("cuda", False, "kernels compile here (NVRTC/nvcc) but no NVIDIA GPU was found to run them")]
    return [("cuda", True, "")]


@hookimpl
def tlx_resolve_target(name: str, arch: str | None) -> Any:
    return _target.resolve(name, arch)


@hookimpl
def tlx_pipeline(target: Any) -> Any:
    if target.backend != "cuda":
        return None
    from .passes import stages

    return stages(target)


@hookimpl
def tlx_infer_layout(target: Any, op: Any, ctx: Any) -> Any:
    return None


@hookimpl
def tlx_lower_op(target: Any, op: Any, ctx: Any) -> Any:
    if target.backend != "cuda":
        return None
    from .lower import lower_op

    return lower_op(op, ctx)


@hookimpl
def tlx_codegen(target: Any, func: Any, ctx: Any) -> Any:
    if target.backend != "cuda":
        return None
    from .codegen import generate

    return generate(func, ctx)


@hookimpl
def tlx_compile(target: Any, func: Any, source: str, ctx: Any) -> Any:
    if target.backend != "cuda":
        return None
    from .compile import compile_cuda
    from .perf_options import pass_configs

    meta = ctx.data["cuda.meta"]
    configs = pass_configs(ctx)
    # TileLang's switches for the device compiler: fast math (approximate division, exp, log...)
    # and extra flags, both off/empty by default; then the compile_flags of the kernel body
    # (T.annotate_compile_flags) and of the jit
    flags = configs.get("tl.device_compile_flags") or ()
    extra = [str(f) for f in ctx.options.get("compile_flags") or ()]
    options = {"fast_math": bool(configs.get("tl.enable_fast_math", False)),
               "flags": (flags.split() if isinstance(flags, str) else [str(f) for f in flags]) + extra}
    return compile_cuda(source, target.arch or _target.DEFAULT_ARCH, kernel_name=meta.kernel_name,
                        options={k: v for k, v in options.items() if v})


@hookimpl
def tlx_load(target: Any, func: Any, binary: Any, ctx: Any) -> Any:
    if target.backend != "cuda":
        return None
    from .runtime import load

    # JITKernel has already checked devices and contiguity: skip the launcher's own checks.
    meta = ctx.data["cuda.meta"]
    fallback = None
    if meta.tensor_maps:
        from .hopper.config import no_tma_rebuild

        fallback = no_tma_rebuild(ctx)
    return load(binary, meta, check_args=False, fallback=fallback)


@hookimpl
def tlx_profiler(target: Any) -> Any:
    if target.backend != "cuda":
        return None
    from . import profiler

    return profiler.timer
