"""GPU tests: every test here is skipped on a machine without a CUDA device."""

from __future__ import annotations

import pytest


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


CUDA = _cuda_available()


def _skip_without_cuda() -> None:
    if not CUDA:
        pytest.skip("no CUDA GPU on this machine")


@pytest.fixture(autouse=True)
def _require_cuda() -> None:
    _skip_without_cuda()


@pytest.fixture(params=["cython", "ctypes"])
def launcher_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test once with the compiled launcher and once with the ctypes one."""
    from tilelang_x.plugins.cuda import runtime

    _skip_without_cuda()
    if request.param == "cython" and runtime.compiled_launcher() is None:
        pytest.skip("the compiled launcher is not built")
    monkeypatch.setenv("TILELANG_X_LAUNCHER", request.param)
    return request.param


@pytest.fixture(scope="session")
def device_arch() -> str:
    """``sm_XY`` of cuda:0 (with the ``a`` suffix on Hopper, so sm_90a instructions are allowed)."""
    from tilelang_x.plugins.cuda import driver

    _skip_without_cuda()
    arch = driver.device_arch(0)
    return arch + "a" if arch == "sm_90" else arch
