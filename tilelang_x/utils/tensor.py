"""``tilelang.utils.tensor``: tensor helpers TileLang's examples import.

``map_torch_type`` maps a dtype spelling to torch's. ``torch_assert_close`` is TileLang's tolerant
comparison: like ``torch.testing.assert_close`` but a small fraction of elements
(``max_mismatched_ratio``) may fall outside the tolerance, which suits low-precision outputs (fp8,
fp16 accumulations) where a few values round the other way.
"""

from __future__ import annotations

import torch

from ..core_ir.dtypes import as_dtype


def map_torch_type(dtype: object) -> torch.dtype:
    """The torch dtype for a TileLang dtype spelling (``"bfloat16"``, ``"e4m3_float8"``,
    ``T.float16``...)."""
    return as_dtype(dtype).as_torch()


def torch_assert_close(
    tensor_a: torch.Tensor,
    tensor_b: torch.Tensor,
    rtol: float = 1e-2,
    atol: float = 1e-3,
    max_mismatched_ratio: float = 0.001,
    verbose: bool = False,
    equal_nan: bool = True,
    check_device: bool = True,
    check_dtype: bool = True,
    base_name: str = "LHS",
    compare_name: str = "RHS",
) -> None:
    """Raise ``AssertionError`` when more than ``max_mismatched_ratio`` of the elements differ by more
    than ``atol + rtol * |tensor_b|`` (or the shapes, devices or dtypes differ)."""
    if tensor_a.shape != tensor_b.shape:
        raise AssertionError(f"shape mismatch: {base_name} {tuple(tensor_a.shape)} vs "
                             f"{compare_name} {tuple(tensor_b.shape)}")
    if check_device and tensor_a.device != tensor_b.device:
        raise AssertionError(f"device mismatch: {base_name} on {tensor_a.device}, {compare_name} on {tensor_b.device}")
    if check_dtype and tensor_a.dtype != tensor_b.dtype:
        raise AssertionError(f"dtype mismatch: {base_name} {tensor_a.dtype} vs {compare_name} {tensor_b.dtype}")
    a = tensor_a.detach().to(torch.float64).cpu()
    b = tensor_b.detach().to(torch.float64).cpu()
    close = (a - b).abs() <= atol + rtol * b.abs()
    if equal_nan:
        close |= a.isnan() & b.isnan()
    close |= (a == b)  # equal infinities
    bad = int((~close).sum())
    allowed = int(a.numel() * max_mismatched_ratio)
    if verbose or bad > allowed:
        summary = (f"{bad} of {a.numel()} elements ({bad / max(a.numel(), 1):.4%}) differ by more than "
                   f"atol={atol} + rtol={rtol} * |{compare_name}|; at most {allowed} allowed "
                   f"(max_mismatched_ratio={max_mismatched_ratio})")
        if bad:
            idx = int((~close).flatten().nonzero()[0])
            summary += (f"; first at flat index {idx}: {base_name}={a.flatten()[idx].item()}, "
                        f"{compare_name}={b.flatten()[idx].item()}")
        if bad > allowed:
            raise AssertionError(summary)
        print(summary)
