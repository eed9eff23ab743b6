"""Every suite case: how to make its inputs, run it and compute the torch reference."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import (
    attention,
    attention_bwd,
    control_flow,
    conv,
    dequant,
    dropout,
    elementwise,
    fp8_blockscale,
    gemm,
    gemm_sp,
    grid,
    linear_attention,
    moe,
    reducers,
    reductions,
    register_control,
    scalar_intrinsics,
    simt,
    sparse_attention,
    thread_allreduce,
    tma_copy,
    views,
    warp_specialize,
    workspace,
)


@dataclass(frozen=True)
class Case:
    name: str
    run: Callable[[str], tuple[torch.Tensor, torch.Tensor]]  # device -> (actual, expected)
    atol: float = 1e-2
    rtol: float = 1e-2


def _randn(*shape: int, dtype: torch.dtype, device: str, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype=dtype, device=device)


def _tf32(x: torch.Tensor) -> torch.Tensor:
    """float32 values rounded to TF32 as T.gemm's default float32 precision does."""
    from tilelang_x.core_ir.gemm_precision import round_tf32

    return torch.from_numpy(round_tf32(x.cpu().numpy())).to(x.device)


def _gemm(M: int, N: int, K: int, dtype: torch.dtype = torch.float16, out: torch.dtype = torch.float16,
          trans_B: bool = False, relu: bool = False, fp32_gemm: str | None = None, tf32_inputs: bool = False,
          **tiles: int) -> Callable:
    """With float32 operands the reference rounds them to TF32 unless ``fp32_gemm`` is ``ieee``;
    ``tf32_inputs`` makes the inputs TF32 values (wgmma truncates its float32 operands instead of
    rounding them: the two agree on such inputs)."""
    from tilelang_x.core_ir.dtypes import as_dtype

    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        a = _randn(M, K, dtype=dtype, device=device, seed=1)
        b = _randn(*((N, K) if trans_B else (K, N)), dtype=dtype, device=device, seed=2)
        if tf32_inputs:
            a, b = _tf32(a), _tf32(b)
        kernel = gemm.matmul(M, N, K, in_dtype=as_dtype(dtype), out_dtype=as_dtype(out), trans_B=trans_B,
                             relu=relu, fp32_gemm=fp32_gemm, **tiles)
        if dtype == torch.float32:  # in float64: the reference's own sums must not round like TF32's
            ra, rb = (a, b) if fp32_gemm == "ieee" else (_tf32(a), _tf32(b))
            ref = (ra.double() @ (rb.double().T if trans_B else rb.double())).float()
        else:
            ref = a.float() @ (b.float().T if trans_B else b.float())
        if relu:
            ref = ref.relu()
        return kernel(a, b), ref.to(out)

    return run


def _matmul_short_k_steps(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    a = _randn(128, 96, dtype=torch.float16, device=device, seed=42)
    b = _randn(96, 128, dtype=torch.float16, device=device, seed=43)
    return gemm.matmul_short_k_steps(128, 128, 96, 24)(a, b), a.float() @ b.float()


def _gemm_int8(M: int, N: int, K: int, trans_B: bool = False, **tiles: int) -> Callable:
    """int8 x int8 -> int32 (exact: compared with atol 0)."""
    from tilelang_x.core_ir import dtypes

    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        a = _ints(M, K, dtype=torch.int8, device=device, seed=3)
        b = _ints(*((N, K) if trans_B else (K, N)), dtype=torch.int8, device=device, seed=4)
        kernel = gemm.matmul(M, N, K, in_dtype=dtypes.int8, out_dtype=dtypes.int32, accum_dtype=dtypes.int32,
                             trans_B=trans_B, **tiles)
        ref = a.cpu().long() @ (b.cpu().long().T if trans_B else b.cpu().long())
        return kernel(a, b), ref.to(torch.int32).to(device)

    return run


def _gemm_sp(M: int, N: int, K: int, dtype: torch.dtype = torch.float16, out: torch.dtype = torch.float16,
             trans_A: bool = False, trans_B: bool = False, arch: str = "8.0", **tiles: int) -> Callable:
    """``T.gemm_sp`` on a 2:4-sparse A compressed on the host, against torch on the dense A."""
    from tilelang_x.utils.sparse import compress, randn_semi_sparse

    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        a = randn_semi_sparse(M, K, dtype, device, transposed=trans_A, generator=torch.Generator().manual_seed(11))
        b = _randn(*((N, K) if trans_B else (K, N)), dtype=dtype, device=device, seed=12)
        a_sparse, e = compress(a, transposed=trans_A, arch=arch)
        kernel = gemm_sp.matmul_sp(M, N, K, in_dtype=str(dtype).removeprefix("torch."),
                                   out_dtype=str(out).removeprefix("torch."), trans_A=trans_A, trans_B=trans_B,
                                   arch=arch, **tiles)
        ref = (a.float().T if trans_A else a.float()) @ (b.float().T if trans_B else b.float())
        return kernel(a_sparse, e, b), ref.to(out)

    return run


def _gemm_persistent(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    a = _randn(200, 96, dtype=torch.float16, device=device, seed=4)
    b = _randn(96, 328, dtype=torch.float16, device=device, seed=5)
    return gemm.matmul_persistent(200, 328, 96, 5, group_size=3)(a, b), (a.float() @ b.float()).half()


def _blocksparse_gemm(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    M, N, K, bm, bn, bk = 256, 256, 512, 128, 128, 64
    a = _randn(M, K, dtype=torch.float16, device=device, seed=6)
    b = _randn(K, N, dtype=torch.float16, device=device, seed=7)
    mask = torch.rand(M // bm, N // bn, K // bk, generator=torch.Generator().manual_seed(8)) > 0.5
    mask[0, 1] = False  # a tile that takes no k-block: C stays 0
    keep = mask.repeat_interleave(bm, 0).repeat_interleave(bn, 1).to(device)  # [M, N, K / bk]
    parts = (a.float().reshape(M, K // bk, bk).transpose(0, 1) @ b.float().reshape(K // bk, bk, N))  # [K/bk, M, N]
    ref = (parts * keep.permute(2, 0, 1)).sum(0)
    kernel = gemm.blocksparse_matmul(M, N, K, block_M=bm, block_N=bn, block_K=bk, num_stages=3, threads=256)
    return kernel(a, b, mask.to(device)), ref.half().to(device)


def _gemm_eager(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    a = _randn(256, 192, dtype=torch.float16, device=device, seed=3)
    b = _randn(192, 128, dtype=torch.float16, device=device, seed=4)
    return gemm.matmul_relu(a, b, block_M=64, block_N=64), (a.float() @ b.float()).relu().half()


def _matmul_w4a16(M: int, N: int, K: int, group_size: int, split_k: int = 1, **tiles: int) -> Callable:
    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(40)
        a = torch.randn(M, K, generator=g).half()
        packed = dequant.pack_w4(torch.randint(0, 16, (N, K), generator=g, dtype=torch.uint8))
        scales = (torch.rand(K // group_size, N, generator=g) * 0.02 + 0.005).half()
        ref = (a.float() @ dequant.dequant_w4(packed, scales).T).half()
        args = (a.to(device), packed.to(device), scales.to(device))
        if split_k == 1:
            return dequant.matmul_w4a16(M, N, K, group_size, **tiles)(*args), ref.to(device)
        partial = torch.empty(split_k, M, N, dtype=torch.float32, device=device)
        kernel = dequant.matmul_w4a16_split_k(M, N, K, split_k, group_size, **tiles)
        return kernel(*args, partial), ref.to(device)

    return run


def _conv2d(stride: int, dilation: int, pad: int) -> Callable:
    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        n, c, h, w, f, k = 2, 16, 10, 11, 48, 3
        x = _randn(n, h, w, c, dtype=torch.float16, device=device, seed=23)
        wt = _randn(k, k, c, f, dtype=torch.float16, device=device, seed=24) * 0.25
        ref = F.conv2d(x.float().permute(0, 3, 1, 2), wt.float().permute(3, 2, 0, 1), stride=stride,
                       padding=pad, dilation=dilation).permute(0, 2, 3, 1)
        out = conv.conv2d_nhwc(n, c, h, w, f, k, stride, dilation, pad, block_N=32)(x, wt)
        return out, ref.half()

    return run


def _transpose_tiles(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    a = _randn(96, 70, dtype=torch.float16, device=device, seed=25)
    return elementwise.transpose_tiles(96, 70)(a), a.T.contiguous()


def _int8_row_dots(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(26)
    a, b = (torch.randint(-128, 128, (64, 48), generator=g, dtype=torch.int8) for _ in range(2))
    ref = (a.int() * b.int()).sum(1).int()
    return elementwise.int8_row_dots(64, 48)(a.to(device), b.to(device)), ref.to(device)


def _blocksparse_attention(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    b, h, s, d, blk = 1, 2, 256, 64, 64
    q, k, v = (_randn(b, h, s, d, dtype=torch.float16, device=device, seed=27 + t) for t in range(3))
    g = torch.Generator().manual_seed(30)
    mask = torch.rand(b, h, s // blk, s // blk, generator=g) > 0.4
    mask[..., 0] = True  # every query block attends somewhere
    keep = mask.repeat_interleave(blk, -2).repeat_interleave(blk, -1).to(device)
    scores = (q.float() @ k.float().transpose(-1, -2)) / d ** 0.5
    ref = torch.softmax(scores.masked_fill(~keep, float("-inf")), -1) @ v.float()
    return attention.blocksparse_attention(b, h, s, d)(q, k, v, mask.to(device)), ref.half()


def _count_up(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    c = torch.arange(6, dtype=torch.int32, device=device)
    expected = c + 5 + 10
    elementwise.count_up(6, 5)(c)
    return c, expected


def _add_into_itself(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    y = _randn(300, dtype=torch.float32, device=device, seed=31)
    expected = y * 2
    elementwise.add_into(300)(y, y)  # the same tensor twice: the kernel says they may alias
    return y, expected


def _leaky_add(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    a = _randn(100, 70, dtype=torch.float32, device=device, seed=5)
    b = _randn(100, 70, dtype=torch.float32, device=device, seed=6)
    s = a + b
    return elementwise.leaky_add(100, 70)(a, b), torch.where(s > 0, s, s * 0.1)


def _fma_rows(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    a = _randn(70, 40, dtype=torch.float32, device=device, seed=7)
    b = _randn(70, 40, dtype=torch.float32, device=device, seed=8)
    return elementwise.fma_rows(70, 40)(a, b), a * b + 1


def _vector_add(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    kernel = elementwise.vector_add()
    outs, refs = [], []
    for n in (1000, 77, 4096):
        a = _randn(n, dtype=torch.float32, device=device, seed=n)
        b = _randn(n, dtype=torch.float32, device=device, seed=n + 1)
        outs.append(kernel(a, b))
        refs.append(a + b)
    return torch.cat(outs), torch.cat(refs)


def _softmax(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(64, 256, dtype=torch.float16, device=device, seed=7)
    return reductions.softmax(64, 256)(x), torch.softmax(x.float(), dim=1).half()


def _rms_norm(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    a = _randn(64, 512, dtype=torch.float32, device=device, seed=8)
    w = _randn(512, dtype=torch.float32, device=device, seed=9)
    ref = a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    return reductions.rms_norm(64, 512)(a, w), ref


def _row_lse_and_squares(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(6, 256, dtype=torch.float32, device=device, seed=40)
    ref = torch.stack([torch.logsumexp(x, 1), (x * x).sum(1)], 1)
    return reductions.row_lse_and_squares(6, 256)(x), ref


def _group_absmax_scale(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(8, 128, dtype=torch.float32, device=device, seed=41)
    scale = x.view(8, 2, 64).abs().amax(2).clamp(min=1e-6) / 127.0
    q, s = reductions.group_absmax_scale(8, 128)(x)
    ref = (x.view(8, 2, 64) / scale[..., None]).clamp(-127, 127).view(8, 128)
    return torch.cat([q, s], 1), torch.cat([ref, scale], 1)


def _cumsum(reverse: bool) -> Callable:
    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        x = _randn(32, 128, dtype=torch.float32, device=device, seed=10)
        ref = x.flip(1).cumsum(1).flip(1) if reverse else x.cumsum(1)
        return reductions.cumsum(32, 128, reverse=reverse)(x), ref

    return run


def _row_bits(kind: str) -> Callable:
    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(12)
        x = torch.randint(-2**31, 2**31 - 1, (64, 96), generator=g, dtype=torch.int32).to(device)
        op = {"bitand": torch.bitwise_and, "bitor": torch.bitwise_or, "bitxor": torch.bitwise_xor}[kind]
        ref = x[:, 0]
        for j in range(1, x.shape[1]):
            ref = op(ref, x[:, j])
        return reductions.row_bits(64, 96, kind)(x), ref

    return run


def _cummax(reverse: bool) -> Callable:
    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        x = _randn(32, 128, dtype=torch.float16, device=device, seed=11)
        ref = x.flip(1).cummax(1).values.flip(1) if reverse else x.cummax(1).values
        from tilelang_x.core_ir.dtypes import as_dtype

        kernel = reductions.cumsum(32, 128, reverse=reverse, dtype=as_dtype(torch.float16), running_max=True)
        return kernel(x), ref

    return run


def _column_sum(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(200, 100, dtype=torch.float32, device=device, seed=11)
    s = torch.zeros(100, dtype=torch.float32, device=device)
    reductions.column_sum(200, 100)(x, s)
    return s, x.sum(0)


def _split_row_sum(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(96, 256, dtype=torch.float32, device=device, seed=19)
    partial = torch.zeros(4, 96, dtype=torch.float32, device=device)
    return reductions.split_row_sum(96, 256)(x, partial), x.sum(1)


def _grid_normalize(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.rand(64, 48, generator=torch.Generator().manual_seed(31)).to(device)
    partial = torch.zeros(64, dtype=torch.float32, device=device)
    return grid.normalize(64, 48)(x, partial), x / x.sum()


def _grid_from_scalar(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(500, dtype=torch.float32, device=device, seed=33)
    y = torch.zeros(500, dtype=torch.float32, device=device)
    kernel = grid.scale_first_rows(500)
    kernel(x, 300, y)
    kernel(x, 130, y)  # a second grid from the same compiled kernel
    ref = torch.zeros_like(x)
    ref[:300] = x[:300] * 2
    return y, ref


def _grid_smooth(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(512, dtype=torch.float32, device=device, seed=32)
    work = torch.zeros(2, 512, dtype=torch.float32, device=device)
    ref = x.clone()
    for _ in range(5):
        padded = F.pad(ref, (1, 1))
        ref = (padded[:-2] + padded[1:-1] + padded[2:]) / 3
    return grid.smooth(512, 5)(x, work), ref


def _split_row_sum_pdl(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(96, 256, dtype=torch.float32, device=device, seed=33)
    partial = torch.zeros(4, 96, dtype=torch.float32, device=device)
    return reductions.split_row_sum(96, 256, pdl=True)(x, partial), x.sum(1)


def _split_k_workspace(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    a = _randn(128, 512, dtype=torch.float16, device=device, seed=50)
    b = _randn(512, 192, dtype=torch.float16, device=device, seed=51)
    return workspace.matmul_split_k(128, 192, 512)(a, b), (a.float() @ b.float()).half()


def _pointer_gemm(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    a = _randn(128, 96, dtype=torch.float16, device=device, seed=52)
    b = _randn(64, 96, dtype=torch.float16, device=device, seed=53)
    c = torch.zeros(128, 64, dtype=torch.float32, device=device)
    workspace.matmul_pointers(128, 64, 96)(a, b, c, 128, 64, 96)
    return c, a.float() @ b.float().T


def _gqa_decode(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    b, h, hk, s, d, splits = 2, 8, 2, 1024, 64, 4
    q = _randn(b, h, d, dtype=torch.float16, device=device, seed=20)
    k = _randn(b, s, hk, d, dtype=torch.float16, device=device, seed=21)
    v = _randn(b, s, hk, d, dtype=torch.float16, device=device, seed=22)
    lse = torch.zeros(b, h, splits, dtype=torch.float32, device=device)
    partial = torch.zeros(b, h, splits, d, dtype=torch.float32, device=device)
    out = attention.gqa_decode(b, h, hk, s, d, num_split=splits)(q, k, v, lse, partial)
    kk, vv = (x.float().repeat_interleave(h // hk, dim=2).transpose(1, 2) for x in (k, v))
    ref = F.scaled_dot_product_attention(q.float()[:, :, None, :], kk, vv)[:, :, 0]
    return out, ref.half()


def _paged_gqa_decode(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    b, h, hk, pages, page, d, splits = 2, 8, 2, 8, 64, 64, 2
    q = _randn(b, h, d, dtype=torch.float16, device=device, seed=27)
    k_cache = _randn(b * pages, page, hk, d, dtype=torch.float16, device=device, seed=28)
    v_cache = _randn(b * pages, page, hk, d, dtype=torch.float16, device=device, seed=29)
    table = torch.randperm(b * pages, generator=torch.Generator().manual_seed(30)).view(b, pages).int()
    lse = torch.zeros(b, h, splits, dtype=torch.float32, device=device)
    partial = torch.zeros(b, h, splits, d, dtype=torch.float32, device=device)
    out = attention.paged_gqa_decode(b, h, hk, pages, page, d, num_split=splits)(q, k_cache, v_cache,
                                                                                 table.to(device), lse, partial)
    k, v = (c[table.long().to(device)].reshape(b, pages * page, hk, d) for c in (k_cache, v_cache))
    kk, vv = (x.float().repeat_interleave(h // hk, dim=2).transpose(1, 2) for x in (k, v))
    return out, F.scaled_dot_product_attention(q.float()[:, :, None, :], kk, vv)[:, :, 0].half()


def _mla_decode(device: str, block_N: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    b, h, s, d, pe, splits = 1, 64, 256, 512, 64, 2
    q = _randn(b, h, d, dtype=torch.float16, device=device, seed=23)
    q_pe = _randn(b, h, pe, dtype=torch.float16, device=device, seed=24)
    kv = _randn(b, s, 1, d, dtype=torch.float16, device=device, seed=25)
    k_pe = _randn(b, s, 1, pe, dtype=torch.float16, device=device, seed=26)
    lse = torch.zeros(b, h, splits, dtype=torch.float32, device=device)
    partial = torch.zeros(b, h, splits, d, dtype=torch.float32, device=device)
    out = attention.mla_decode(b, h, s, num_split=splits, block_N=block_N)(q, q_pe, kv, k_pe, lse, partial)
    keys = torch.cat([kv, k_pe], -1)[:, :, 0].float()
    ref = F.scaled_dot_product_attention(torch.cat([q, q_pe], -1).float()[:, :, None, :], keys[:, None],
                                         kv[:, :, 0].float()[:, None])[:, :, 0]
    return out, ref.half()


def _combine_split_kv(num_split: int, annotate: bool = True, max_in_local: bool = False) -> Callable:
    """TileLang's flash-decoding combine kernel on 2 x 3 heads of 128: the partial outputs weighted
    by their slices' share of the log-sum-exp (base 2)."""
    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        b, h, d = 2, 3, 128
        lse = _randn(b, h, num_split, dtype=torch.float32, device=device, seed=60) * 3
        partial = _randn(b, h, num_split, d, dtype=torch.float16, device=device, seed=61)
        out = attention.combine_split_kv(b, h, num_split, d, annotate=annotate, max_in_local=max_in_local)(lse, partial)
        weights = torch.softmax(lse * math.log(2), dim=-1)
        return out, (partial.float() * weights[..., None]).sum(2).half()

    return run


def _packed_atomic_sum(lanes: int, dtype: torch.dtype) -> Callable:
    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        from tilelang_x.core_ir.dtypes import as_dtype

        x = _randn(4, 64, 128, dtype=dtype, device=device, seed=12)
        s = torch.zeros(64, 128, dtype=dtype, device=device)
        reductions.packed_atomic_sum(4, 64, 128, lanes=lanes, dtype=as_dtype(dtype))(x, s)
        return s, x.float().sum(0).to(dtype)

    return run


def _block_sparse_row_sum(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(128, 512, dtype=torch.float32, device=device, seed=13)
    g = torch.Generator().manual_seed(14)
    mask = torch.randint(-1, 4, (4, 8), generator=g, dtype=torch.int32)
    mask[0] = torch.tensor([1, 0, 2, 0, 3, 1, 0, 1])  # a row no tile ends
    ref = torch.zeros(128, dtype=torch.float32)
    for b in range(4):
        for t in range(8):
            if mask[b, t] == 0:
                continue
            if mask[b, t] < 0:
                break
            ref[b * 32:(b + 1) * 32] += x[b * 32:(b + 1) * 32, t * 64:(t + 1) * 64].sum(1).cpu()
    return control_flow.block_sparse_row_sum(128, 512)(x, mask.to(device)), ref.to(device)


def _block_sparse_matmul(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    a = _randn(256, 96, dtype=torch.float16, device=device, seed=16)
    b = _randn(96, 192, dtype=torch.float16, device=device, seed=17)
    keep = torch.tensor([[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 1]], dtype=torch.int32)
    c = torch.zeros(256, 192, dtype=torch.float16, device=device)
    control_flow.block_sparse_matmul(256, 192, 96, 5)(a, b, keep.to(device), c)
    ref = (a.float() @ b.float()) * keep.repeat_interleave(64, 0).repeat_interleave(64, 1).to(device)
    return c, ref.half()


def _row_flags(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(18)
    a = (torch.rand(40, 12, generator=g) < 0.15).int() * torch.randint(1, 9, (40, 12), generator=g, dtype=torch.int32)
    a[:8, 6:] = 3  # rows whose second half is all nonzero
    a[8:12] = 0
    a = a.to(device)
    ref = a[:, :6].ne(0).any(1).int() + 2 * a[:, 6:].ne(0).all(1).int() + 4 * a[:, :2].ne(0).all(1).int()
    return control_flow.row_flags(40, 12)(a), ref.int()


def _first_below(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(64, 40, dtype=torch.float32, device=device, seed=15)
    below = torch.cat([x < -1.0, torch.ones(64, 1, dtype=torch.bool, device=device)], dim=1)
    return control_flow.first_below(64, 40, -1.0)(x), below.int().argmax(dim=1).int()
def _column_bits(kind: str, tile: bool = False, dtype: torch.dtype = torch.int32) -> Callable:
    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        from tilelang_x.core_ir.dtypes import as_dtype

        M, N = (48, 64) if tile else (40, 70)
        info = torch.iinfo(dtype)
        g = torch.Generator().manual_seed(13)
        x = torch.randint(info.min, info.max, (M, N), generator=g, dtype=torch.int64).to(dtype)
        if kind == "and":  # keep most bits set, so that the result is not simply zero
            x = x | torch.tensor(-16, dtype=dtype)
        x = x.to(device)
        init = -1 if kind == "and" else 0
        s = torch.full((N,), init, dtype=dtype, device=device)
        reductions.column_bits(M, N, kind, tile=tile, dtype=as_dtype(dtype))(x, s)
        ref = torch.full((N,), init, dtype=dtype, device=device)
        for row in x:
            ref = {"or": ref | row, "and": ref & row, "xor": ref ^ row}[kind]
        return s, ref

    return run


def _flagged_sum(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(5, 300, dtype=torch.float32, device=device, seed=14)
    p = torch.zeros_like(x)
    flags = torch.zeros(5, dtype=torch.int32, device=device)
    s = torch.zeros(300, dtype=torch.float32, device=device)
    reductions.flagged_sum(5, 300)(x, p, flags, s)
    return torch.cat([s, flags.float()]), torch.cat([2 * x.sum(0), torch.ones(5, device=device)])


def _chained_prefix(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(6, 100, dtype=torch.float32, device=device, seed=15)
    flags = torch.zeros(6, dtype=torch.int32, device=device)
    y = torch.zeros_like(x)
    reductions.chained_prefix(6, 100)(x, flags, y)
    return torch.cat([y.flatten(), flags.float()]), torch.cat([x.cumsum(0).flatten(), torch.ones(6, device=device)])


def _attention(causal: bool) -> Callable:
    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        shape = (1, 2, 256, 64)
        q, k, v = (_randn(*shape, dtype=torch.float16, device=device, seed=20 + i) for i in range(3))
        kernel = attention.flash_attention(*shape, is_causal=causal)
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        return kernel(q, k, v), ref.half()

    return run



def _attention_bwd(dim: int, causal: bool, tile_atomic: bool = True, wgmma_pipelined: bool = False,
                   threads: int = 128) -> Callable:
    """Our forward (with its log-sum-exp) and backward: O, dQ, dK and dV, flattened one after the
    other, against torch autograd through float32 attention."""

    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        shape = (1, 2, 128, dim)
        q, k, v, do = (_randn(*shape, dtype=torch.float16, device=device, seed=30 + i) for i in range(4))
        o, lse = attention_bwd.flash_attention_lse(*shape, is_causal=causal)(q, k, v)
        grads = attention_bwd.attention_backward(q, k, v, o, lse, do, causal, tile_atomic=tile_atomic,
                                                 wgmma_pipelined=wgmma_pipelined, threads=threads)
        qf, kf, vf = (x.float().requires_grad_() for x in (q, k, v))
        of = F.scaled_dot_product_attention(qf, kf, vf, is_causal=causal)
        of.backward(do.float())
        ref = (of, qf.grad, kf.grad, vf.grad)
        return torch.cat([x.flatten() for x in (o, *grads)]), torch.cat([x.detach().flatten() for x in ref]).half()

    return run


def _ints(*shape: int, dtype: torch.dtype, device: str, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-128, 128, shape, generator=g, dtype=dtype).to(device)


def _flat_affine(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    a = _randn(37, 24, dtype=torch.float32, device=device, seed=21)
    return views.flat_affine(37, 24)(a), a * 2 + 1


def _swap_pairs(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    a = _randn(40, 32, dtype=torch.float16, device=device, seed=22)
    return views.swap_pairs(40, 32)(a), (a.reshape(-1, 2).flip(-1) * 2).reshape(40, 32)


def _dequant_int8_words(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    q = _ints(40, 64, dtype=torch.int8, device=device, seed=23)
    return views.dequant_int8_words(40, 64)(q), q.float() * 0.5


def _dequant_row_sum(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    q = _ints(96, 256, dtype=torch.int8, device=device, seed=24)
    return views.dequant_row_sum(96, 256)(q), (q.float() * 0.25).sum(1)


def _negate_fp16_bits(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    h = _randn(70, 32, dtype=torch.float16, device=device, seed=25)
    return views.negate_fp16_bits(70, 32)(h), -h


def _head_weighted_scores(dtype: torch.dtype) -> Callable:
    """Q and K in ``dtype``: float8 e4m3 as TileLang's DeepSeek v3.2 indexer takes them."""
    from tilelang_x.core_ir.dtypes import as_dtype

    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        q = _randn(4 * 16, 64, dtype=dtype, device=device, seed=31)
        k = _randn(200, 64, dtype=dtype, device=device, seed=32)
        w = _randn(4, 16, dtype=torch.float32, device=device, seed=33)
        ref = (torch.relu(k.float() @ q.float().T).reshape(200, 4, 16) * w[None]).sum(-1).T
        return views.head_weighted_scores(4, 200, 16, 64, dtype=as_dtype(dtype))(q, k, w), ref

    return run


def _matmul_flat_a(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    a = _randn(128 * 96, dtype=torch.float16, device=device, seed=28)
    b = _randn(96, 128, dtype=torch.float16, device=device, seed=29)
    kernel = gemm.matmul(128, 128, 96, block_M=64, block_N=64, num_stages=2, flat_A=True)
    return kernel(a, b), (a.reshape(128, 96).float() @ b.float()).half()


def _register_bits(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    b = _ints(100, 4, dtype=torch.int8, device=device, seed=26)
    x = _randn(100, dtype=torch.float32, device=device, seed=27)
    words, bits = views.register_bits(100)(b, x)
    return torch.cat([words, bits]), torch.cat([b.view(torch.int32).reshape(-1), x.view(torch.int32)])
def _unpack_int4(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(30)
    p = torch.randint(0, 256, (48, 32), generator=g, dtype=torch.uint8)
    nib = torch.stack([p & 0xF, p >> 4], dim=-1).reshape(48, 64).int()
    v = (nib ^ 8) - 8
    ref = ((v << 4) | (~nib & 0xF)) + ((v * 64) >> 3)
    return scalar_intrinsics.unpack_int4(48, 64)(p.to(device)), ref.to(device)


def _dequant_signed_int4(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(32)
    p = torch.randint(-128, 128, (80, 64), generator=g, dtype=torch.int8)
    s = (torch.rand(80, generator=g) + 0.5).half()
    low = ((p.int() & 0xF) ^ 8) - 8  # the low nibble as a signed 4-bit value
    high = p.int() >> 4
    ref = torch.stack([low, high], dim=-1).reshape(80, 128).half() * s[:, None]
    return scalar_intrinsics.dequant_signed_int4(80, 128)(p.to(device), s.to(device)), ref.to(device)


def _dequant_int4(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(31)
    p = torch.randint(0, 256, (80, 64), generator=g, dtype=torch.uint8)
    s = (torch.rand(80, generator=g) + 0.5).half()
    q = torch.stack([p & 0xF, p >> 4], dim=-1).reshape(80, 128)
    ref = (q.half() - 8) * s[:, None]
    return scalar_intrinsics.dequant_int4_fp16(80, 128)(p.to(device), s.to(device)), ref.to(device)


def _bit_casts(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(200, dtype=torch.float32, device="cpu", seed=32) * 100
    h = _randn(200, dtype=torch.bfloat16, device="cpu", seed=33).view(torch.int16)
    g = torch.Generator().manual_seed(34)
    f8 = torch.randint(0, 256, (200,), generator=g, dtype=torch.int32)
    f8 = torch.where((f8 & 0x7F) == 0x7F, 0, f8).to(torch.uint8)  # no NaN codes
    ref = torch.stack([-x, h.view(torch.bfloat16).float(), f8.view(torch.float8_e4m3fn).float(),
                       x.half().view(torch.int16).float()], dim=1)
    out = scalar_intrinsics.bit_casts(200)(x.to(device), h.to(device), f8.to(device))
    return out, ref.to(device)


def _bit_counts(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(35)
    x = torch.randint(-2**31, 2**31 - 1, (150,), generator=g, dtype=torch.int32)
    x[:4] = torch.tensor([0, -1, 1, 2**31 - 1])
    f = torch.round(torch.randn(150, generator=g) * 20) / 2  # halves: ties to even
    f[:2] = torch.tensor([1e6, -1e6])

    def counts(v: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
        u = v.long() & ((1 << bits) - 1)
        ones = sum((u >> b) & 1 for b in range(bits))
        length = sum(((u >> b) != 0).long() for b in range(bits))
        return ones.int(), (bits - length).int()

    pop32, clz32 = counts(x, 32)
    pop8, _ = counts(x, 8)
    _, clz16 = counts(x, 16)
    ref = torch.stack([pop32, clz32, pop8, clz16, torch.fmod(x, 7), f.clamp(-65504, 65504).round().int(),
                       x.clamp(max=127), x.clamp(min=-32768)], dim=1)
    return scalar_intrinsics.bit_counts(150)(x.to(device), f.to(device)), ref.to(device)


def _fast_math(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(300, dtype=torch.float32, device="cpu", seed=36).clamp(-3, 3).double()
    pos = x.abs() + 0.1
    ref = torch.stack([x.exp(), torch.pow(10.0, x * 0.5), pos.log(), pos.log2(), pos.log10(), (x / 3).tan(),
                       x.cos(), x.sin()], dim=1)
    return scalar_intrinsics.fast_math(300)(x.float().to(device)), ref.float().to(device)


def _directed(exact: torch.Tensor, mode: str) -> torch.Tensor:
    """float64 values that are exact (or whose float32 rounding direction they settle) rounded to
    float32 in ``mode``."""
    near = exact.float()
    down = torch.where(near.double() > exact, torch.nextafter(near, torch.tensor(-torch.inf)), near)
    up = torch.where(near.double() < exact, torch.nextafter(near, torch.tensor(torch.inf)), near)
    return {"rn": near, "rd": down, "ru": up, "rz": torch.where(exact < 0, up, down)}[mode]


def _ieee_rounding(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(37)

    def operand() -> torch.Tensor:  # magnitudes in [0.5, 2): float64 add/sub/mul/fma are exact
        sign = torch.randint(0, 2, (256,), generator=g) * 2 - 1
        return (sign * torch.exp2(torch.rand(256, generator=g) * 2 - 1)).float()

    x, y, z = operand(), operand(), operand()
    x[:2], y[:2] = torch.tensor([1.0, -1.0]), torch.tensor([3.0, 3.0])  # 1/3: every mode differs
    xd, yd, zd = x.double(), y.double(), z.double()
    exact = [xd + yd, xd - yd, xd * yd, xd * yd + zd, xd / yd, 1 / yd, xd.abs().sqrt()]
    ref = torch.stack([_directed(e, m) for m in scalar_intrinsics.IEEE_MODES for e in exact]
                      + [xd.abs().rsqrt().float()], dim=1)
    out = scalar_intrinsics.ieee_rounding(256)(x.to(device), y.to(device), z.to(device))
    return out, ref.to(device)


def _gemv(kernel: str, N: int, K: int, **tiles: int) -> Callable:
    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        a = _randn(K, dtype=torch.float16, device=device, seed=60)
        b = _randn(N, K, dtype=torch.float16, device=device, seed=61)
        return getattr(simt, kernel)(N, K, **tiles)(a, b), (b.float() @ a.float()).half()

    return run


def _column_sums_reducer(threads: int) -> Callable:
    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        x = _randn(100, 48, dtype=torch.float32, device=device, seed=31)
        ref = torch.stack([x[k * 32:(k + 1) * 32].sum(0) for k in range(4)])
        return reducers.column_sums(100, 48, threads=threads)(x), ref

    return run


def _flagged_copy(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(63)
    x = torch.randint(0, 1000, (128,), generator=g, dtype=torch.int32)
    f = torch.randint(0, 2, (128,), generator=g, dtype=torch.int32)
    done = torch.zeros(128, dtype=torch.int32)
    y = simt.flagged_copy()(x.to(device), f.to(device), done.to(device))
    return y, torch.where(f != 0, x, -1).to(device)


def _leading_rows_scaled(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(48, 40, dtype=torch.float32, device=device, seed=64)
    ref = torch.cat([x[:21] * 2, -x[21:]])
    ref[:, 0] += 100
    rows = torch.tensor([21], dtype=torch.int32, device=device)
    return control_flow.leading_rows_scaled(48, 40)(x, rows), ref


def _warp_walsh_hadamard(width: int) -> Callable:
    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        x = _randn(3, width, dtype=torch.float32, device=device, seed=63)
        h = torch.ones(1, 1)
        while h.shape[0] < width:
            h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
        return simt.warp_walsh_hadamard(3, width)(x), x @ h.T.to(device)

    return run


def _warp_shuffles(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(64, dtype=torch.float32, device=device, seed=62)
    n = x.numel()
    t = torch.arange(n, device=device)
    lane = t % 32
    first = t - lane  # the warp's lane 0
    group = lane - lane % 8
    ref = torch.stack([
        x.view(-1, 32).sum(1).repeat_interleave(32),
        torch.where(lane + 1 <= group + 7, x[first + (lane + 1).clamp(max=31)], x),
        torch.where(lane - 2 >= group, x[first + (lane - 2).clamp(min=0)], x),
        x[first + 5],
        x.view(-1, 32).amax(1).repeat_interleave(32),
        (lane + 100 * (t // 32)).float(),
        (x.view(-1, 32) > 0).sum(1).repeat_interleave(32).float(),
    ], dim=1)
    return simt.warp_shuffles()(x), ref


def _warp_match_elect(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(64)
    keys = torch.randint(0, 4, (128,), generator=g, dtype=torch.int32)
    floats = torch.tensor([0.0, -0.0, 1.5, float("nan")])[torch.randint(0, 4, (128,), generator=g)]
    t = torch.arange(128)
    lane, warp = t % 32, t // 32

    def masks(bits: torch.Tensor) -> torch.Tensor:
        per_warp = bits.view(-1, 32)
        same = per_warp[:, :, None] == per_warp[:, None, :]
        return (same.long() << torch.arange(32)).sum(2).view(-1)

    pairs = (lane == 0) & (warp % 2 == 0)
    scaled = (keys * (t // 64)).view(-1, 32)
    agreed = (scaled == scaled[:, :1]).all(1).repeat_interleave(32)
    ref = torch.stack([masks(keys), masks(floats.view(torch.int32)), (lane == 0).long(), pairs.long(),
                       (t == 0).long(), torch.where(t % 128 == 0, t + 1, 0), torch.where(agreed, 0xFFFFFFFF, 0)], dim=1)
    return simt.warp_match_elect()(keys.to(device), floats.to(device)), ref.to(device)


def _column_sums_pipelined(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(200, 96, dtype=torch.float16, device=device, seed=32)
    return reducers.column_sums_pipelined(200, 96)(x), x.float().sum(0)


def _row_col_max(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(16, 24, dtype=torch.float32, device=device, seed=33)
    x[:, 5] = -3.0  # a column below the seed -1 reads -1
    rows, cols = reducers.row_col_max(16, 24)(x)
    return torch.cat([rows, cols]), torch.cat([x.max(1).values, x.max(0).values.clamp(min=-1)])


def _histogram_bits(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(34)
    x = torch.randint(0, 1000, (300,), generator=g, dtype=torch.int32) | 0x300  # bits every value has
    x[::17] = -1  # skipped
    bins = 7
    ref = torch.zeros(5, bins, dtype=torch.int32)
    for b in range(bins):
        v = x[(x >= 0) & (x % bins == b)]
        ref[0, b], ref[1, b] = len(v), v.min()
        ref[2, b], ref[3, b], ref[4, b] = 0, -1, 0
        for t in v:
            ref[2, b] |= t
            ref[3, b] &= t
            ref[4, b] ^= t
    return reducers.histogram_bits(300, bins)(x.to(device)), ref.to(device)


def _dropout(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The mask recomputed with the interpreter's Philox: element (r, c) is kept when
    (draw >> 8) * 2^-24 >= p for stream r * N + c at offset 0 under the seed."""
    import numpy as np

    from tilelang_x.core_ir.philox import rng_rand

    M, N, p, seed = 100, 192, 0.25, 1234
    x = _randn(M, N, dtype=torch.float16, device=device, seed=31)
    draws = rng_rand(seed, np.arange(M * N).reshape(M, N), 0)
    uniform = torch.from_numpy((draws >> 8).astype(np.float32) * np.float32(2.0**-24)).to(device)
    scaled = (x.float() * (1.0 / (1.0 - p))).half()
    return dropout.dropout(M, N, p=p, seed=seed)(x), torch.where(uniform >= p, scaled, torch.zeros_like(x))


def _random_bits(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The raw uint32 draw and the float32 / float64 draws, exactly as core_ir.philox gives them."""
    import numpy as np

    from tilelang_x.core_ir.philox import rng_rand

    k = np.arange(300)
    w = [rng_rand(7, k, 5 + d).astype(np.uint64) for d in range(4)]
    f32 = (w[1] >> np.uint64(8)).astype(np.float32) * np.float32(2.0**-24)
    f64 = ((w[2] << np.uint64(21)) | (w[3] >> np.uint64(11))).astype(np.float64) * 2.0**-53
    ref = torch.from_numpy(np.stack([w[0].astype(np.float64), f32.astype(np.float64), f64], 1))
    return dropout.random_bits(300)(), ref.to(device)


def _ws_gemm(kernel: Callable, M: int, N: int, K: int, **options: int) -> Callable:
    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        a = _randn(M, K, dtype=torch.float16, device=device, seed=40)
        b = _randn(K, N, dtype=torch.float16, device=device, seed=41)
        return kernel(M, N, K, **options)(a, b), (a.float() @ b.float()).half()

    return run


def _ws_scale_rows(producers: int) -> Callable:
    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        x = _randn(128, 64, dtype=torch.float32, device=device, seed=42)
        kernel = warp_specialize.scale_rows_producer_consumer(128, 64, producers=producers)
        return kernel(x), torch.cat([x * 2 + 1, x.sum(1, keepdim=True)], 1)

    return run


def _ws_column_sums(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(64, 128, dtype=torch.float32, device=device, seed=43)
    sums, row = warp_specialize.column_sums_beside_regions(64, 128)(x)
    return torch.cat([sums, row]), torch.cat([x.sum(0), x[0] * 2])


def _rows_by_warpgroup(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = _randn(1000, dtype=torch.float32, device=device, seed=44)
    upper = (torch.arange(1000, device=device) % 384) >= 256
    return register_control.rows_by_warpgroup(1000)(x), torch.where(upper, x + 1, x * 2)


def _deepgemm_fp8(M: int, N: int, K: int, block_N: int, out: torch.dtype = torch.bfloat16) -> Callable:
    """TileLang's DeepGEMM fp8 example: e4m3 A with a scale per row and 128 columns, e4m3 B with a
    scale per 128 x 128 block, against torch on the dequantized operands."""

    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        a = _randn(M, K, dtype=torch.float32, device=device, seed=50)
        b = _randn(N, K, dtype=torch.float32, device=device, seed=51)
        qa, sa = fp8_blockscale.per_token_cast_to_fp8(a)
        qb, sb = fp8_blockscale.per_block_cast_to_fp8(b)
        kernel = fp8_blockscale.deepgemm_fp8(M, N, K, block_N, out_dtype=str(out).removeprefix("torch."))
        return kernel(qa, qb, sa, sb), fp8_blockscale.blockscale_reference(qa, qb, sa, sb).to(out)

    return run


def _gemm_fp8_2xacc(M: int, N: int, K: int, block_K: int) -> Callable:
    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        a = _randn(M, K, dtype=torch.float8_e4m3fn, device=device, seed=52)
        b = _randn(N, K, dtype=torch.float8_e4m3fn, device=device, seed=53)
        kernel = fp8_blockscale.gemm_fp8_2xacc(M, N, K, 128, 64, block_K)
        return kernel(a, b), a.float() @ b.float().T

    return run


def _grouped_gemm(sizes: list[int], K: int, N: int, **tiles: int) -> Callable:
    """TileLang's grouped GEMM example: the groups' rows stacked in A, one [K, N] B a group."""

    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        a = _randn(sum(sizes), K, dtype=torch.float16, device=device, seed=54)
        b = _randn(len(sizes), K, N, dtype=torch.float16, device=device, seed=55)
        offsets, padded = moe.group_offsets(sizes, tiles["block_M"])
        ints = [torch.tensor(v, dtype=torch.int32, device=device) for v in (sizes, offsets, padded)]
        ref = torch.cat([a[o:o + n].float() @ b[g].float() for g, (o, n) in enumerate(zip(offsets, sizes))])
        return moe.grouped_gemm(sizes, K, N, **tiles)(a, b, *ints), ref.half()

    return run


def _grouped_gemm_bwd(sizes: list[int], M: int, N: int, **tiles: int) -> Callable:
    """TileLang's grouped GEMM backward: the weight gradient ``A_g^T @ dO_g`` of every group."""

    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        a = _randn(sum(sizes), M, dtype=torch.float16, device=device, seed=62)
        grad = _randn(sum(sizes), N, dtype=torch.float16, device=device, seed=63)
        offsets, _ = moe.group_offsets(sizes, 1)
        ints = [torch.tensor(v, dtype=torch.int32, device=device) for v in (sizes, offsets)]
        ref = torch.stack([a[o:o + n].float().T @ grad[o:o + n].float() for o, n in zip(offsets, sizes)])
        return moe.grouped_gemm_bwd(sum(sizes), len(sizes), M, N, **tiles)(a, grad, *ints), ref.half()

    return run


def _grouped_gemm_fp8_weights(sizes: list[int], K: int, N: int, **tiles: int) -> Callable:
    """TileLang's grouped GEMM with float8 weights: bfloat16 rows times e4m3 B widened in the kernel."""

    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        a = _randn(sum(sizes), K, dtype=torch.bfloat16, device=device, seed=60)
        b = _randn(len(sizes), K, N, dtype=torch.float8_e4m3fn, device=device, seed=61)
        offsets, padded = moe.group_offsets(sizes, tiles["block_M"], spare_block=False)
        ints = [torch.tensor(v, dtype=torch.int32, device=device) for v in (sizes, offsets, padded)]
        ref = torch.cat([a[o:o + n].float() @ b[g].float() for g, (o, n) in enumerate(zip(offsets, sizes))])
        return moe.grouped_gemm_fp8_weights(sizes, K, N, **tiles)(a, b, *ints), ref.bfloat16()

    return run


def _fused_moe(tokens: int, d_hidden: int, d_expert: int, experts: int, top_k: int, **tiles: int) -> Callable:
    """TileLang's fused MoE example: tokens routed to their top-k experts, each expert a SwiGLU MLP
    (the routed kernel a grouped GEMM over the tokens sorted by expert), plus one shared expert."""

    def run(device: str) -> tuple[torch.Tensor, torch.Tensor]:
        x, router, shared, routed = moe.moe_inputs(tokens, d_hidden, d_expert, experts, device, seed=56)
        out = moe.moe_forward(x, router, shared, routed, top_k, **tiles)
        return out, moe.moe_reference(x, router, shared, routed, top_k)

    return run


CASES: list[Case] = [
    Case("gemm_fp16_256", _gemm(256, 256, 256)),
    Case("gemm_fp16_tails", _gemm(200, 136, 96, block_M=64, block_N=64, block_K=32)),
    Case("gemm_tilelang_persistent", _gemm_persistent),
    Case("gemm_blocksparse_masked_pipeline", _blocksparse_gemm),
    Case("gemm_transpose_B", _gemm(256, 128, 128, trans_B=True, block_M=64, block_N=64)),
    Case("gemm_bf16_fp32_accum", _gemm(128, 256, 128, dtype=torch.bfloat16, out=torch.float32,
                                        block_M=64, block_N=64), atol=2e-2),
    Case("gemm_fp8_e4m3_transpose_B", _gemm(128, 256, 256, dtype=torch.float8_e4m3fn, out=torch.float16, trans_B=True,
                                             block_M=128, block_N=128, block_K=64, threads=256), atol=5e-2),
    Case("gemm_fp8_e4m3", _gemm(128, 256, 256, dtype=torch.float8_e4m3fn, out=torch.float16, block_M=128,
                                block_N=128, block_K=64, threads=256), atol=5e-2),  # B [K, N]: swapped wgmma
    Case("gemm_fp8_e4m3_swapped_two_m64_blocks", _gemm(128, 512, 256, dtype=torch.float8_e4m3fn, out=torch.float16,
                                                       block_M=128, block_N=256, block_K=128, threads=256),
         atol=5e-2),
    Case("gemm_relu_epilogue", _gemm(128, 128, 256, relu=True, block_M=64, block_N=64)),
    # float32: TF32 tensor cores by default (mma.sync m16n8k8; wgmma on sm_90a, as C^T = B^T A^T with B^T
    # gathered into registers when B is stored K x N), float32 products with tlx.fp32_gemm = "ieee";
    # tolerances far below TF32's 2^-11, so a missing or wrong rounding fails (wgmma truncates the operands
    # it reads from shared memory: those cases take TF32 inputs)
    Case("gemm_fp32_tf32", _gemm(192, 256, 128, dtype=torch.float32, out=torch.float32, block_M=64, block_N=64,
                                 block_K=32, num_stages=2, swap_operands=False), atol=2e-4, rtol=1e-4),
    Case("gemm_fp32_tf32_swapped", _gemm(192, 256, 128, dtype=torch.float32, out=torch.float32, tf32_inputs=True,
                                         block_M=64, block_N=64, block_K=32, num_stages=2), atol=2e-4, rtol=1e-4),
    Case("gemm_fp32_tf32_swapped_two_warpgroups", _gemm(256, 512, 256, dtype=torch.float32, out=torch.float32,
                                                        tf32_inputs=True, block_M=128, block_N=256, block_K=32,
                                                        num_stages=3, threads=256), atol=2e-4, rtol=1e-4),
    Case("gemm_fp32_tf32_swapped_ragged", _gemm(200, 328, 96, dtype=torch.float32, out=torch.float32,
                                                tf32_inputs=True, block_M=128, block_N=256, block_K=32,
                                                num_stages=3, threads=256), atol=2e-4, rtol=1e-4),
    Case("gemm_fp32_tf32_transpose_B", _gemm(256, 256, 256, dtype=torch.float32, out=torch.float32, trans_B=True,
                                             tf32_inputs=True, block_M=128, block_N=128, block_K=32,
                                             threads=256), atol=2e-4, rtol=1e-4),
    # int8: mma.sync m16n8k32 (B stored K x N: gathered byte by byte), IGMMA on sm_90a with B [N, K]
    Case("gemm_int8", _gemm_int8(192, 128, 256, block_M=64, block_N=64, block_K=64, num_stages=2), atol=0, rtol=0),
    Case("gemm_int8_swapped_two_warpgroups", _gemm_int8(256, 512, 256, block_M=128, block_N=256, block_K=64,
                                                        num_stages=3, threads=256), atol=0, rtol=0),
    Case("gemm_int8_transpose_B", _gemm_int8(256, 256, 256, trans_B=True, block_M=128, block_N=128, block_K=64,
                                             threads=256), atol=0, rtol=0),
    Case("gemm_fp32_ieee", _gemm(128, 128, 64, dtype=torch.float32, out=torch.float32, fp32_gemm="ieee",
                                 block_M=64, block_N=64, block_K=16), atol=2e-4, rtol=1e-4),
    Case("gemm_decode_16_rows", _gemm(16, 192, 1024, block_M=16, block_N=64, block_K=256, num_stages=4),
         atol=2e-2),
    Case("gemm_eager_relu", _gemm_eager),
    Case("gemm_sp_fp16", _gemm_sp(256, 256, 256)),
    Case("gemm_sp_bf16_uint8_meta_transpose_B", _gemm_sp(128, 256, 512, dtype=torch.bfloat16, out=torch.float32,
                                                         trans_B=True, arch="9.0", block_M=64, block_K=128)),
    Case("gemm_sp_fp16_transpose_A_tails", _gemm_sp(200, 136, 128, trans_A=True, block_M=64, block_N=64)),
    Case("dequant_w4a16_tails", _matmul_w4a16(72, 128, 256, 128, block_M=64, block_N=64, block_K=64,
                                              num_stages=2, threads=128)),
    Case("dequant_w4a16_groups", _matmul_w4a16(128, 256, 512, 64, block_M=64, block_N=128, block_K=128,
                                               num_stages=3, threads=128)),
    Case("dequant_w4a16_split_k_two_kernels", _matmul_w4a16(5, 192, 512, 128, split_k=4, block_M=16, block_N=32,
                                                           block_K=64, num_stages=3)),
    Case("dequant_w4a16_weights_in_registers", _matmul_w4a16(40, 128, 256, 128, registers=True, block_M=16,
                                                            block_N=64, block_K=64, num_stages=2, threads=128)),
    Case("dequant_w4a16_registers_split_k", _matmul_w4a16(5, 192, 512, 128, split_k=2, registers=True, block_M=16,
                                                         block_N=64, block_K=128, num_stages=3)),
    Case("dequant_w4a16_bytes_in_a_fragment", _matmul_w4a16(72, 128, 256, 128, bytes_fragment=True, block_M=64,
                                                           block_N=64, block_K=64, num_stages=2, threads=128)),
    Case("leaky_add_if_then_else", _leaky_add, atol=1e-5, rtol=1e-5),
    Case("fma_rows_tilelang_spellings", _fma_rows, atol=1e-5, rtol=1e-5),
    Case("vector_add_dynamic", _vector_add, atol=1e-6, rtol=1e-6),
    Case("dropout_philox_mask", _dropout, atol=1e-3, rtol=1e-3),
    Case("random_bits_philox_exact", _random_bits, atol=0, rtol=0),
    Case("softmax_rows", _softmax, atol=2e-3),
    Case("rms_norm", _rms_norm, atol=1e-4, rtol=1e-4),
    Case("gemm_short_k_steps_tile_cleared_before_pipeline", _matmul_short_k_steps),
    Case("row_lse_and_squares_unit_dim_fragments", _row_lse_and_squares, atol=1e-4, rtol=1e-4),
    Case("group_absmax_scale_annotated_fragment", _group_absmax_scale, atol=1e-4, rtol=1e-4),
    Case("cumsum", _cumsum(False), atol=1e-4, rtol=1e-4),
    Case("cumsum_reverse", _cumsum(True), atol=1e-4, rtol=1e-4),
    Case("cummax_fp16", _cummax(False), atol=0, rtol=0),
    Case("row_bitand", _row_bits("bitand"), atol=0, rtol=0),
    Case("row_bitor", _row_bits("bitor"), atol=0, rtol=0),
    Case("row_bitxor", _row_bits("bitxor"), atol=0, rtol=0),
    Case("cummax_fp16_reverse", _cummax(True), atol=0, rtol=0),
    Case("column_sum_atomic_add", _column_sum, atol=1e-4, rtol=1e-4),
    Case("split_row_sum_two_kernels", _split_row_sum, atol=1e-4, rtol=1e-4),
    Case("split_row_sum_pdl", _split_row_sum_pdl, atol=1e-4, rtol=1e-4),
    Case("grid_sync_normalize", _grid_normalize, atol=1e-6, rtol=1e-4),
    Case("grid_sync_smooth_in_a_loop", _grid_smooth, atol=1e-5, rtol=1e-4),
    Case("grid_from_integer_argument", _grid_from_scalar, atol=0, rtol=0),
    Case("atomic_addx2_fp16", _packed_atomic_sum(2, torch.float16)),
    Case("atomic_addx4_fp32", _packed_atomic_sum(4, torch.float32), atol=1e-4, rtol=1e-4),
    Case("block_sparse_row_sum_continue_break", _block_sparse_row_sum, atol=1e-4, rtol=1e-4),
    Case("first_below_while_loop_break", _first_below, atol=0, rtol=0),
    Case("block_sparse_matmul_persistent_continue", _block_sparse_matmul),
    Case("row_flags_any_of_all_of", _row_flags, atol=0, rtol=0),
    Case("atomic_or", _column_bits("or"), atol=0, rtol=0),
    Case("atomic_and_tile", _column_bits("and", tile=True), atol=0, rtol=0),
    Case("atomic_xor_int16", _column_bits("xor", dtype=torch.int16), atol=0, rtol=0),
    Case("atomic_flags_seq_cst", _flagged_sum, atol=1e-4, rtol=1e-4),
    Case("atomic_spin_wait", _chained_prefix, atol=1e-4, rtol=1e-4),
    Case("transpose_tiles", _transpose_tiles, atol=0, rtol=0),
    Case("add_into_itself_non_restrict", _add_into_itself, atol=0, rtol=0),
    Case("block_statements_read_modify_write", _count_up, atol=0, rtol=0),
    Case("int8_row_dots_dp4a", _int8_row_dots, atol=0, rtol=0),
    Case("conv2d_im2col", _conv2d(1, 1, 1)),
    Case("conv2d_im2col_stride_dilation", _conv2d(2, 2, 2)),
    Case("flash_attention", _attention(False)),
    Case("flash_attention_causal", _attention(True)),
    Case("flash_attention_bwd", _attention_bwd(64, False)),
    Case("flash_attention_bwd_causal", _attention_bwd(64, True)),
    Case("flash_attention_bwd_element_atomics", _attention_bwd(64, False, tile_atomic=False)),
    Case("flash_attention_bwd_d128_causal", _attention_bwd(128, True)),
    # TileLang's example_mha_bwd_wgmma_pipelined: wg_wait=-1 gemms and T.wait_wgmma (the compiler places
    # the waits itself)
    Case("flash_attention_bwd_wgmma_pipelined", _attention_bwd(64, False, wgmma_pipelined=True, threads=256)),
    Case("flash_attention_bwd_wgmma_pipelined_causal", _attention_bwd(64, True, wgmma_pipelined=True, threads=256)),
    Case("gemm_split_k_alloc_global_two_kernels", _split_k_workspace),
    Case("gemm_pointers_make_tensor", _pointer_gemm, atol=1e-3, rtol=1e-3),
    Case("gqa_decode_split_kv_two_kernels", _gqa_decode),
    Case("mla_decode_fullcol_two_kernels", _mla_decode),
    # 32-key blocks: on the sm_80 path the score rows split over two warps, the output's do not; the row
    # statistics are exchanged between the two layouts through shared memory (cuda/layout_exchange.py)
    Case("mla_decode_32_key_blocks", lambda device: _mla_decode(device, block_N=32)),
    Case("paged_gqa_decode_block_table", _paged_gqa_decode),
    # TileLang's examples/linear_attention and examples/deepseek_nsa, written as those are
    Case("linear_attn_chunked_state", lambda d: linear_attention.run_linear_attn(d, 1, 128, 2, 64)),
    Case("mamba2_chunk_scan", lambda d: linear_attention.run_chunk_scan(d, 1, 256, 128, 1, 2, 64, 128)),
    Case("gated_delta_net_chunk_state", lambda d: linear_attention.run_gated_delta_h(d, 1, 256, 2, 64, 64)),
    Case("nsa_fwd_selected_blocks", lambda d: sparse_attention.run_nsa(d, 1, 128, 32, 2, 64, 3, 32)),
    Case("nsa_fwd_selected_blocks_one_warp", lambda d: sparse_attention.run_nsa(d, 1, 64, 16, 1, 32, 2, 16,
                                                                                  scale=0.1)),
    Case("nsa_fwd_varlen_block_counts", lambda d: sparse_attention.run_nsa_varlen(d, [24, 40], 16, 1, 64, 2, 16,
                                                                                   num_stages=2)),
    # the combine kernel of TileLang's flash decoding: `lse_max_local[0]`, a fragment element one thread
    # holds, read by every thread outside T.Parallel (cuda/layout_exchange.py: broadcast_reads)
    Case("combine_split_kv_4_annotated_layout", _combine_split_kv(4)),
    Case("combine_split_kv_8_annotated_layout", _combine_split_kv(8)),
    Case("combine_split_kv_4_inferred_layout", _combine_split_kv(4, annotate=False)),
    Case("combine_split_kv_8_inferred_layout", _combine_split_kv(8, annotate=False)),
    Case("combine_split_kv_8_max_in_local", _combine_split_kv(8, max_in_local=True)),
    Case("blocksparse_attention_masked_pipeline", _blocksparse_attention),
    Case("view_reshape_global", _flat_affine, atol=0, rtol=0),
    Case("view_reshape_shared_pairs", _swap_pairs, atol=0, rtol=0),
    Case("view_int8_as_uint32_dequant", _dequant_int8_words, atol=0, rtol=0),
    Case("view_pipelined_dequant_row_sum", _dequant_row_sum, atol=1e-3, rtol=1e-5),
    Case("view_fp16_pairs_as_uint32", _negate_fp16_bits, atol=0, rtol=0),
    Case("view_local_and_var_bits", _register_bits, atol=0, rtol=0),
    Case("view_reshape_global_gemm", _matmul_flat_a),
    Case("view_reshape_gemm_accumulator_heads", _head_weighted_scores(torch.float16), atol=1e-3, rtol=1e-3),
    # float8: mma.sync m16n8k32 from sm_89, wgmma on sm_90a (whose float8 sums keep fewer bits)
    Case("view_reshape_gemm_accumulator_heads_fp8", _head_weighted_scores(torch.float8_e4m3fn), atol=2e-2,
         rtol=1e-2),
    Case("unpack_int4_bit_ops", _unpack_int4, atol=0, rtol=0),
    Case("dequant_int4_fp16_reinterpret", _dequant_int4, atol=0, rtol=0),
    Case("dequant_signed_int4_quantize_helper", _dequant_signed_int4, atol=0, rtol=0),
    Case("bit_casts_reinterpret", _bit_casts, atol=0, rtol=0),
    Case("bit_counts_limits_nearbyint", _bit_counts, atol=0, rtol=0),
    # CUDA's __expf & co. are within a few ulp here (__sinf / __cosf / __logf: 2^-21.4 absolute)
    Case("fast_math_intrinsics", _fast_math, atol=1e-5, rtol=1e-5),
    Case("ieee_rounding_modes", _ieee_rounding, atol=0, rtol=0),
    Case("gemv_splitk_warp_reduce", _gemv("splitk_gemv", 200, 1000)),
    Case("gemv_shared_atomic_add", _gemv("gemv_shared_atomic", 64, 256)),
    Case("gemv_thread_allreduce_shuffles", lambda d: thread_allreduce.run_gemv(d, 2, 19, 300, 16, 4)),
    Case("gemv_thread_allreduce_across_warps", lambda d: thread_allreduce.run_gemv(d, 2, 19, 300, 128, 2)),
    Case("gemv_splitk_tvm_thread_allreduce_y", lambda d: thread_allreduce.run_splitk_gemv_tvm(d, 64, 512, 2, 32)),
    Case("row_max_thread_allreduce", lambda d: thread_allreduce.run_row_max(d, 7, 300, 64, 2), atol=0, rtol=0),
    Case("warp_shuffles_votes", _warp_shuffles, atol=1e-5, rtol=1e-5),
    Case("leading_rows_scaled_ir_if_then_else", _leading_rows_scaled, atol=1e-5, rtol=1e-5),
    Case("warp_walsh_hadamard_32", _warp_walsh_hadamard(32), atol=1e-4, rtol=1e-4),
    Case("warp_walsh_hadamard_8_lane_groups", _warp_walsh_hadamard(8), atol=1e-4, rtol=1e-4),
    Case("warp_match_any_shuffle_elect", _warp_match_elect, atol=0, rtol=0),
    Case("simt_per_thread_atomic_loads", _flagged_copy, atol=0, rtol=0),
    Case("reducer_column_sums", _column_sums_reducer(128), atol=1e-4, rtol=1e-4),
    Case("reducer_column_sums_64_threads", _column_sums_reducer(64), atol=1e-4, rtol=1e-4),
    Case("reducer_column_sums_pipelined", _column_sums_pipelined, atol=1e-2, rtol=1e-3),
    Case("reducer_row_col_max", _row_col_max, atol=0, rtol=0),
    Case("reducer_histogram_sum_min_bits", _histogram_bits, atol=0, rtol=0),
    Case("ws_gemm_producer_consumer", _ws_gemm(warp_specialize.gemm_producer_consumer, 256, 256, 128)),
    Case("ws_gemm_two_stage_barriers", _ws_gemm(warp_specialize.gemm_two_stage, 200, 136, 160, block_M=128,
                                                block_N=64, block_K=32)),
    Case("ws_gemm_tilelang_mbarrier_list", _ws_gemm(warp_specialize.gemm_regions_in_loop, 128, 256, 256,
                                                    block_K=64)),
    Case("ws_gemm_tilelang_softpipe", _ws_gemm(warp_specialize.gemm_producer_consumer, 256, 128, 192, block_K=64,
                                               regions_in_loop=True)),
    Case("ws_scale_rows_producer_consumer", _ws_scale_rows(1), atol=1e-4, rtol=1e-4),
    Case("ws_block_statements_beside_regions", _ws_column_sums, atol=1e-4, rtol=1e-4),
    Case("ws_region_of_two_warpgroups", _ws_scale_rows(2), atol=1e-4, rtol=1e-4),
    Case("tma_copy_ws_ring_gemm", _ws_gemm(tma_copy.gemm_tma_ring, 200, 136, 320, block_N=64)),
    Case("tma_copy_tilelang_pipelined", _ws_gemm(tma_copy.gemm_tma_pipelined, 256, 128, 96, num_stages=3)),
    Case("async_copy_double_buffered_gemm", _ws_gemm(tma_copy.gemm_async_copy, 100, 72, 96)),
    Case("tma_copy_store_gemm", _ws_gemm(tma_copy.gemm_tma_store, 200, 136, 96)),
    Case("regs_ws_setmaxnreg_gemm", _ws_gemm(register_control.gemm_ws_setmaxnreg, 256, 256, 192)),
    Case("regs_ws_hints_in_regions", _ws_gemm(register_control.gemm_ws_setmaxnreg, 256, 256, 192, hints=True)),
    Case("regs_ws_manual_wgmma_sync", _ws_gemm(register_control.gemm_ws_setmaxnreg, 200, 136, 320,
                                               manual_wgmma=True)),
    Case("regs_split_hints_gemm", _ws_gemm(register_control.gemm_split_hints, 256, 256, 192, producer=24,
                                           consumer=240)),
    Case("regs_thread_index_branches", _rows_by_warpgroup, atol=0, rtol=0),
    Case("regs_branch_specialized_gemm", _ws_gemm(register_control.gemm_branch_specialized, 200, 136, 320)),
    # TileLang's DeepSeek-V3 fp8 examples: per-block scales (ragged M and N), 2xAcc promotion with a tail
    Case("deepgemm_fp8_blockscale", _deepgemm_fp8(200, 192, 384, 64), atol=0.25, rtol=1e-2),
    Case("deepgemm_fp8_blockscale_fp32_out", _deepgemm_fp8(128, 256, 256, 128, out=torch.float32), atol=5e-2,
         rtol=1e-2),
    Case("gemm_fp8_2xacc_promote_tail", _gemm_fp8_2xacc(128, 192, 320, 64), atol=5e-2, rtol=1e-2),
    # TileLang's grouped GEMM and fused MoE examples: index tensors pick each block's group and rows
    Case("grouped_gemm_padded_groups", _grouped_gemm([63, 0, 130, 40], 96, 128, block_M=64, block_N=64,
                                                     block_K=32), atol=2e-2),
    Case("grouped_gemm_bwd_trip_count_from_tensor", _grouped_gemm_bwd([64, 128, 0, 192], 96, 128, block_M=64,
                                                                       block_N=64, block_K=64), atol=2e-2),
    Case("grouped_gemm_fp8_weights_simt_dequant", _grouped_gemm_fp8_weights([63, 130, 40], 128, 128, block_M=64,
                                                                            block_N=64, block_K=32), atol=0.25),
    Case("fused_moe_shared_and_routed", _fused_moe(96, 128, 64, 4, 2, block_token=64, block_dhidden=64,
                                                   block_dexpert=64, threads=128, coalesced_width=2), atol=1e-2),
]
