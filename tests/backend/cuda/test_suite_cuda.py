"""Every shared suite kernel (tests/kernels) compiled for CUDA and run on the GPU against torch."""

import pytest
import torch

from tests.kernels.suite import CASES
from tilelang_x import knobs


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_suite_case_matches_torch(case):
    with knobs.scope(target_default="cuda"):
        actual, expected = case.run("cuda")
    torch.cuda.synchronize()
    assert actual.device.type == "cuda"
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.float(), expected.float(), atol=case.atol, rtol=case.rtol)
