"""Every shared suite kernel (tests/kernels) compiled for CUDA and run on the GPU against torch."""

import pytest
import torch

from tests.kernels.suite import CASES
from tilelang_x import knobs


# "cuda": the device's own arch (the Hopper path on sm_90); "cuda:sm_90": the portable sm_80-class
# path (mma.sync, ldmatrix, cp.async) on the same device.
@pytest.mark.parametrize("target", ["cuda", "cuda:sm_90"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_suite_case_matches_torch(case, target):
    with knobs.scope(target_default=target):
        actual, expected = case.run("cuda")
    torch.cuda.synchronize()
    assert actual.device.type == "cuda"
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.float(), expected.float(), atol=case.atol, rtol=case.rtol)
