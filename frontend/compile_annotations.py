"""``T.annotate_pass_configs`` and ``T.annotate_compile_flags``: pass configs and device-compiler
flags written in the kernel body instead of ``@tilelang.jit(pass_configs=..., compile_flags=...)``.

They are recorded on the PrimFunc (``attrs`` keys ``core_ir.stmt.PASS_CONFIGS`` and
``COMPILE_FLAGS``); the compile driver merges them with the jit's own (``tilelang_x.body_options``),
whose pass configs win where both name a key, as in TileLang. Repeated calls add up: later keys
replace earlier ones, flags are appended.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core_ir.errors import TileLangTypeError
from ..core_ir.source import caller_loc
from . import builder as bld

__all__ = ["annotate_compile_flags", "annotate_pass_configs"]

_SCALARS = (bool, int, float, str)


def annotate_pass_configs(configs: Mapping[str, Any]) -> None:
    """Pass configs of this kernel (``{"tl.disable_tma_lower": True}``), under the jit's own."""
    from tilelang_x.pass_config import config_key

    b = bld.require("T.annotate_pass_configs")
    loc = caller_loc()
    if not isinstance(configs, Mapping):
        raise TileLangTypeError(f"T.annotate_pass_configs needs a dict, got {type(configs).__name__}", loc=loc,
                                hint='e.g. T.annotate_pass_configs({"tl.disable_tma_lower": True})')
    for k, v in configs.items():
        key = config_key(k)
        if not isinstance(key, str) or not key:
            raise TileLangTypeError(f"T.annotate_pass_configs: the key {k!r} is not a config name", loc=loc,
                                    hint='keys are strings such as "tl.disable_wgmma", or PassConfigKey members')
        b.pass_configs[key] = _value(key, v, loc)


def annotate_compile_flags(flags: list[str] | str) -> None:
    """Flags for the device compiler (NVRTC / nvcc) of this kernel, before the jit's own; a string
    is split at whitespace."""
    b = bld.require("T.annotate_compile_flags")
    loc = caller_loc()
    items = flags.split() if isinstance(flags, str) else flags
    if not isinstance(items, (list, tuple)) or not all(isinstance(f, str) and f for f in items):
        raise TileLangTypeError(f"T.annotate_compile_flags needs a list of strings, got {flags!r}", loc=loc,
                                hint='e.g. T.annotate_compile_flags(["-DMY_SWITCH=1", "--use_fast_math"])')
    b.compile_flags.extend(items)


def _value(key: str, value: Any, loc: Any) -> Any:
    """``value`` as it is stored (lists as tuples), or a located error for one a config cannot hold."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(x, _SCALARS) for x in value):
        return tuple(value)
    raise TileLangTypeError(f"T.annotate_pass_configs: {key!r} = {value!r} is not a bool, number, string or "
                            "list of them", loc=loc, hint="pass configs are plain values, e.g. True or 4")
