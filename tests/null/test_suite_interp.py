"""Every suite kernel runs in the reference interpreter and matches torch."""

import pytest
import torch

from tests.kernels.suite import CASES
from tilelang_x import knobs


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_suite_case_matches_torch(case):
    with knobs.scope(target_default="interp"):
        actual, expected = case.run("cpu")
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.float(), expected.float(), atol=case.atol, rtol=case.rtol)
