"""The dtypes the tensor cores take as A / B operands (mma.sync, wgmma) as PTX names them, and the
K of one instruction step: every form reads 32 bytes of K a step, so k16 for 16-bit types, k32 for
8-bit ones and k8 for float32 (which runs as TF32)."""

from __future__ import annotations

#: operand dtype name -> (PTX type name, element bytes). The names appear in instruction shapes
#: (``mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32``) and in the names of our wrappers
#: (``tlx_mma_e4m3e4m3``, ``tlx_wgmma_ss_f16_n128_t00``).
_OPERANDS: dict[str, tuple[str, int]] = {
    "float16": ("f16", 2), "bfloat16": ("bf16", 2), "float32": ("tf32", 4),
    "float8_e4m3": ("e4m3", 1), "float8_e5m2": ("e5m2", 1), "int8": ("s8", 1), "uint8": ("u8", 1),
}


def ptx_type(dtype: str) -> str:
    """The PTX type name of tensor-core operands of dtype ``dtype`` (a dtype name)."""
    return _OPERANDS[dtype][0]


def k_step(dtype: str) -> int:
    """The K of one mma.sync or wgmma step on operands of dtype ``dtype`` (a dtype name)."""
    return 32 // _OPERANDS[dtype][1]
