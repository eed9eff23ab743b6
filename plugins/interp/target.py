"""The interpreter target: always available, no device, no architectures."""

from __future__ import annotations

from tilelang_x.target import Target, TargetInfo

NAME = "interp"

INFO = TargetInfo(
    NAME,
    archs=(),
    description="reference interpreter: runs any kernel on the CPU with numpy, with bounds checks "
    "and source-located errors (the executable specification of the language)",
    capabilities={
        "device": "cpu",
        "tensors": "numpy arrays, torch CPU tensors",
        "dtypes": "float16 bfloat16 float32 float64 float8_e4m3 float8_e5m2 int8-64 uint8-64 bool",
        "bounds_checks": True,
    },
)


def resolve(name: str, arch: str | None) -> Target | None:
    """``interp`` -> ``Target("interp")``; any other name is not ours."""
    if name != NAME:
        return None
    if arch:
        from tilelang_x.core_ir.errors import UnknownTargetError

        raise UnknownTargetError(
            f"the interpreter has no architectures, got `interp:{arch}`", hint="use target='interp'"
        )
    return Target(NAME)


def is_ours(target: Target) -> bool:
    return getattr(target, "backend", None) == NAME
