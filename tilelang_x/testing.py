"""``tilelang.testing``: the helpers TileLang's examples and tests import.

``set_random_seed`` seeds Python, NumPy (when installed) and torch; ``torch_assert_close`` is the
tolerant comparison of :mod:`tilelang_x.utils.tensor`; ``main`` runs the calling test file under
pytest, so a test file can end with ``tilelang.testing.main()``.
"""

from __future__ import annotations

import inspect
import random
import sys

from .utils.tensor import torch_assert_close

__all__ = ["main", "set_random_seed", "torch_assert_close"]


def set_random_seed(seed: int = 42) -> None:
    """Seed Python's ``random``, NumPy's global generator (when NumPy is installed) and torch
    (every device)."""
    import torch

    random.seed(seed)
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy ships with torch wheels
        pass
    else:
        np.random.seed(seed)
    torch.manual_seed(seed)


def main() -> None:
    """Run pytest on the file that calls this (``if __name__ == "__main__": tilelang.testing.main()``)."""
    import pytest

    test_file = inspect.getsourcefile(sys._getframe(1))
    sys.exit(pytest.main([test_file, *sys.argv[1:]]))
