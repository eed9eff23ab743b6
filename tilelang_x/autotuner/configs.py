"""``configs`` as the user writes it (a list of dicts, a dict of lists) to the checked list of
keyword-argument dicts the tuner tries."""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Mapping
from typing import Any

from ..core_ir.source import SourceLoc
from .errors import AutotuneConfigError


def _expand(configs: Any, name: str, loc: SourceLoc | None) -> list[Any]:
    if isinstance(configs, Mapping):
        if not configs:
            raise AutotuneConfigError(f"autotune configs for `{name}` is an empty dict", loc=loc,
                                      hint="give a list of dicts, or a dict of lists of values")
        choices = []
        for key, values in configs.items():
            if not isinstance(values, (list, tuple, range)) or len(values) == 0:
                raise AutotuneConfigError(
                    f"autotune configs for `{name}`: key {key!r} maps to {values!r}, not a non-empty list of "
                    "values", loc=loc, hint=f"write {key!r}: [v1, v2, ...] (a dict of lists means every combination)",
                )
            choices.append(list(values))
        return [dict(zip(configs, combo)) for combo in itertools.product(*choices)]
    if isinstance(configs, (list, tuple)):
        return list(configs)
    raise AutotuneConfigError(
        f"autotune configs for `{name}` must be a list of dicts, a dict of lists or a callable returning one, "
        f"not {type(configs).__name__}", loc=loc,
    )


def normalize_configs(
    configs: Any,
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    loc: SourceLoc | None = None,
) -> list[dict[str, Any]]:
    """The list of configs ``configs`` stands for, checked against ``fn``'s parameters: every item a
    dict with string keys that ``fn`` accepts. Raises ``AutotuneConfigError`` naming the culprit."""
    name = name or getattr(fn, "__name__", "kernel")
    items = _expand(configs, name, loc)
    if not items:
        raise AutotuneConfigError(f"autotune configs for `{name}` is empty", loc=loc,
                                  hint="give at least one config, e.g. [{'block_M': 64}, {'block_M': 128}]")
    params: Mapping[str, inspect.Parameter] | None = None
    if fn is not None:
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            params = None
    accepts_any = params is None or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    usable = [] if params is None else [
        n for n, p in params.items()
        if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD,
                          inspect.Parameter.POSITIONAL_ONLY)
    ]
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise AutotuneConfigError(
                f"autotune config #{i} for `{name}` is {type(item).__name__} {item!r}, not a dict",
                loc=loc, hint="each config is a dict of keyword arguments, e.g. {'block_M': 64}",
            )
        for key in item:
            if not isinstance(key, str):
                raise AutotuneConfigError(f"autotune config #{i} for `{name}` has key {key!r}, not a parameter name",
                                          loc=loc)
            if not accepts_any and key not in usable:
                raise AutotuneConfigError(
                    f"autotune config #{i} {dict(item)!r}: `{key}` is not a parameter of `{name}`",
                    loc=loc, hint=f"`{name}` takes: {', '.join(usable) or 'no keyword parameters'}",
                )
        out.append(dict(item))
    return out

