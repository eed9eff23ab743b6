"""T.device_assert on the GPU: a true condition costs nothing visible; a false one prints where and
traps. The trap leaves the CUDA context unusable, so that case runs in a child process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import torch

from tests.null.test_device_assert import bounded


def test_true_condition_runs() -> None:
    a = torch.arange(64, dtype=torch.float32, device="cuda")
    bounded(64, 100.0)(a)
    torch.cuda.synchronize()


def test_false_condition_prints_and_fails_the_launch() -> None:
    child = textwrap.dedent("""
        import torch
        from tests.null.test_device_assert import bounded
        a = torch.arange(64, dtype=torch.float32, device="cuda")
        a[40] = 1e3
        bounded(64, 100.0)(a)
        torch.cuda.synchronize()
    """)
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "T.device_assert failed: values stay below the limit (block (1, 0, 0), thread" in out.stdout + out.stderr
