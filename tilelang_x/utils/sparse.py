"""``tilelang.utils.sparse``: turn a 2:4-sparse matrix into the ``(A_sparse, E)`` pair ``T.gemm_sp``
takes, in the metadata format of ``tilelang_x.core_ir.tileops.GemmSp`` (row-major, 4 bits per
group of 4 columns; every backend reads this one format, the CUDA backend rearranges it into the
``mma.sp`` registers as it loads it).

``compress`` has TileLang's call shapes (``compress(A, transposed=False, block_k=..., arch=...)``
and TileLang 0.1.15's ``compress(A, meta_dtype=...)``, whose metadata format this is); ``block_k``
is accepted and ignored, since the format does not depend on the tile size.
"""

from __future__ import annotations

from typing import Any

from ..core_ir.errors import ArgumentError, ShapeMismatchError, TileLangTypeError
from ..core_ir.tileops import SPARSE_META_DTYPES

__all__ = ["compress", "meta_dtype_for", "randn_semi_sparse"]


def meta_dtype_for(arch: str | None = None) -> Any:
    """The metadata dtype TileLang's examples declare for ``arch``: ``torch.uint8`` ([M, K / 8])
    on sm_90 ("9.0", "sm_90a") and later, ``torch.int16`` ([M, K / 16]) otherwise."""
    import torch

    digits = "".join(ch for ch in (arch or "") if ch.isdigit())
    return torch.uint8 if digits and int(digits[0]) >= 9 else torch.int16


def compress(A: Any, transposed: bool = False, arch: str | None = None, block_k: int | None = None,
             meta_dtype: Any = None) -> tuple[Any, Any]:
    """``(A_sparse, E)`` of ``A``, a float16 / bfloat16 matrix with at most 2 non-zeros in every group
    of 4 consecutive elements along K: ``A`` is [M, K] ([K, M] with ``transposed``), ``A_sparse``
    [M, K / 2] ([K / 2, M]) holds the kept values of each group in column order, ``E`` [M, K / e]
    the positions (``e`` = 8 / 16 / 32 for 8- / 16- / 32-bit ``meta_dtype``; by default
    ``meta_dtype_for(arch)``). A group with fewer than 2 non-zeros keeps zeros at its first free
    positions. Raises ``ArgumentError`` naming the first group that holds 3 or 4 non-zeros."""
    import torch

    if not isinstance(A, torch.Tensor) or A.dim() != 2:
        raise ShapeMismatchError(f"compress takes a 2-d torch tensor, got {type(A).__name__}"
                                 f"{list(A.shape) if hasattr(A, 'shape') else ''}")
    if A.dtype not in (torch.float16, torch.bfloat16):
        raise TileLangTypeError(f"compress: A is {A.dtype}; T.gemm_sp multiplies float16 or bfloat16 matrices",
                                hint="convert A with .half() or .bfloat16() first")
    meta = meta_dtype if meta_dtype is not None else meta_dtype_for(arch)
    name = str(meta).removeprefix("torch.")
    if name not in SPARSE_META_DTYPES:
        raise TileLangTypeError(f"compress: meta_dtype {meta} is not a metadata dtype",
                                hint="use torch.int16, torch.uint8 or torch.int32")
    meta = getattr(torch, name)  # also for a dtype given by name ("int16", T.int16)
    dense = A.t() if transposed else A
    M, K = dense.shape
    per = SPARSE_META_DTYPES[name]
    if K % per:
        raise ShapeMismatchError(f"compress: K = {K} is not a multiple of {per}, the columns one {name} of metadata "
                                 "describes", hint="pad K with zero columns, or pick a narrower meta_dtype")
    groups = dense.reshape(M, K // 4, 4)
    nonzero = groups != 0
    crowded = nonzero.sum(-1) > 2
    if bool(crowded.any()):
        row, group = (int(x) for x in crowded.nonzero()[0])
        where = f"column {row}, rows" if transposed else f"row {row}, columns"
        raise ArgumentError(
            f"compress: A is not 2:4 sparse along K: {where} {4 * group}..{4 * group + 3} hold "
            f"{int(nonzero[row, group].sum())} non-zeros", hint="keep at most 2 non-zeros in every group of 4")
    slot = torch.arange(4, device=A.device)
    order = torch.where(nonzero, slot, slot + 4).sort(-1).values[..., :2] % 4  # non-zeros first
    kept = order.sort(-1).values
    values = groups.gather(-1, kept).reshape(M, K // 2)
    nibbles = (kept[..., 0] | (kept[..., 1] << 2)).reshape(M, K // per, per // 4)
    shifts = 4 * torch.arange(per // 4, device=A.device)
    E = (nibbles << shifts).sum(-1).to(meta)  # wraps into the signed dtypes' range
    return (values.t().contiguous() if transposed else values.contiguous()), E.contiguous()


def randn_semi_sparse(M: int, K: int, dtype: Any = None, device: str = "cuda", transposed: bool = False,
                      generator: Any = None) -> Any:
    """A random [M, K] matrix ([K, M] with ``transposed``) with 2 of every 4 consecutive elements along
    K set to zero (the two smallest), as TileLang's helper of the same name (``generator``: a CPU
    ``torch.Generator`` to draw from)."""
    import torch

    dense = torch.randn(M, K, generator=generator).to(device).reshape(M, K // 4, 4)
    dense.scatter_(-1, dense.topk(2, dim=-1, largest=False).indices, 0)
    dense = dense.reshape(M, K).to(dtype or torch.float16)
    return dense.t().contiguous() if transposed else dense
