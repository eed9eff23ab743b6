"""Load the suite PrimFuncs for the CUDA tests, skipping the module when the frontend cannot."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tilelang_x.core_ir.stmt import PrimFunc


def suite_or_skip() -> dict[str, Callable[[], PrimFunc]]:
    try:
        from tests.null.cuda_suite_funcs import suite_funcs

        return suite_funcs()
    except Exception as exc:  # the frontend is still landing
        pytest.skip(f"suite kernels cannot be built yet: {exc}", allow_module_level=True)
        raise
