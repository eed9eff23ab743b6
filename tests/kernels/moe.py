"""Grouped GEMM and a fused mixture of experts written as TileLang's examples write them
(grouped_gemm's ``example_grouped_gemm_fwd`` and fusedmoe's ``example_fusedmoe_tilelang``): the
rows of each group (the tokens routed to one expert) are stacked, every group starts at a multiple
of the row block, and each block finds its group and the rows it owns from small index tensors."""

import math

import torch
import torch.nn.functional as F

import tilelang_x as tilelang
import tilelang_x.language as T

__all__ = ["grouped_gemm", "grouped_gemm_bwd", "grouped_gemm_fp8_weights", "group_offsets", "moe_forward",
           "moe_inputs", "moe_reference", "moe_routed", "moe_shared"]

_NO_TMA = {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True}


@tilelang.jit(out_idx=[2], pass_configs=_NO_TMA)
def grouped_gemm(batch_sizes_list, K, N, block_M, block_N, block_K, num_stages=2, threads=128, dtype="float16"):
    """``C[rows of g] = A[rows of g] @ B[g]`` for the groups of ``batch_sizes_list`` rows; a block
    finds its group itself, from the groups' padded offsets."""
    batch_sum = sum(batch_sizes_list)
    batch_count = len(batch_sizes_list)
    accum_dtype = "float32"

    @T.prim_func
    def kernel(
            A: T.Tensor([batch_sum, K], dtype),
            B: T.Tensor([batch_count, K, N], dtype),
            C: T.Tensor([batch_sum, N], dtype),
            batch_sizes: T.Tensor([batch_count], "int32"),
            batch_offsets: T.Tensor([batch_count], "int32"),
            batch_padded_offsets: T.Tensor([batch_count], "int32"),
    ):
        with T.Kernel(T.ceildiv(batch_sum, block_M) + batch_count, T.ceildiv(N, block_N), threads=threads) as (bx, by):
            A_shared = T.alloc_shared([block_M, block_K], dtype)
            B_shared = T.alloc_shared([block_K, block_N], dtype)
            C_local = T.alloc_fragment([block_M, block_N], accum_dtype)
            cur_batch_idx = T.alloc_local([1], "int32")
            cur_batch_size = T.alloc_local([1], "int32")

            m_start_padded = bx * block_M

            # the last group whose padded start is at or before this block's first row
            for i in range(batch_count):
                in_cur_batch_idx = (m_start_padded >= batch_padded_offsets[i])
                cur_batch_idx[0] = T.if_then_else(in_cur_batch_idx, i, cur_batch_idx[0])

            cur_batch_size[0] = batch_sizes[cur_batch_idx[0]]
            m_start = m_start_padded - batch_padded_offsets[cur_batch_idx[0]] + batch_offsets[cur_batch_idx[0]]
            actual_rows = T.max(
                0, T.min(block_M, cur_batch_size[0] + batch_padded_offsets[cur_batch_idx[0]] - m_start_padded))

            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[m_start:m_start + block_M, k * block_K:(k + 1) * block_K], A_shared)
                T.copy(B[cur_batch_idx[0], k * block_K:(k + 1) * block_K, by * block_N:(by + 1) * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)

            for i, j in T.Parallel(block_M, block_N):
                with T.If(i < actual_rows), T.Then():
                    C[m_start + i, by * block_N + j] = C_local[i, j]

    return kernel


@tilelang.jit(out_idx=[2], pass_configs=_NO_TMA)
def grouped_gemm_bwd(batch_sum, batch_count, M, N, block_M, block_N, block_K, num_stages=2, threads=128,
                     dtype="float16"):
    """The weight gradient of the grouped GEMM (grouped_gemm's ``example_grouped_gemm_bwd``):
    ``C[g] = A[rows of g]^T @ B[rows of g]``, block ``bz`` walking its group's rows in a pipelined
    loop whose trip count it reads from ``batch_sizes``. As in the example, a row block is guarded
    by ``i < batch_sizes[bz]`` only, so group sizes must be multiples of ``block_K``."""
    accum_dtype = "float32"

    @T.prim_func
    def kernel(
            A: T.Tensor([batch_sum, M], dtype),
            B: T.Tensor([batch_sum, N], dtype),
            C: T.Tensor([batch_count, M, N], dtype),
            batch_sizes: T.Tensor([batch_count], "int32"),
            batch_offsets: T.Tensor([batch_count], "int32"),
    ):
        with T.Kernel(T.ceildiv(M, block_M), T.ceildiv(N, block_N), batch_count, threads=threads) as (bx, by, bz):
            A_shared = T.alloc_shared([block_K, block_M], dtype)
            B_shared = T.alloc_shared([block_K, block_N], dtype)
            C_local = T.alloc_fragment([block_M, block_N], accum_dtype)

            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(batch_sizes[bz], block_K), num_stages=num_stages):
                for i, j in T.Parallel(block_K, block_M):
                    A_shared[i, j] = T.if_then_else(i < batch_sizes[bz],
                                                    A[batch_offsets[bz] + k * block_K + i, bx * block_M + j], 0)
                for i, j in T.Parallel(block_K, block_N):
                    B_shared[i, j] = T.if_then_else(i < batch_sizes[bz],
                                                    B[batch_offsets[bz] + k * block_K + i, by * block_N + j], 0)
                T.gemm(A_shared, B_shared, C_local, transpose_A=True)

            T.copy(C_local, C[bz, bx * block_M, by * block_N])

    return kernel


@tilelang.jit(out_idx=[2])
def grouped_gemm_fp8_weights(batch_sizes_list, K, N, block_M=128, block_N=128, block_K=64, num_stages=2, threads=128,
                             in_dtype_a=T.bfloat16, in_dtype_b=T.float8_e4m3fn, out_dtype=T.bfloat16,
                             accum_dtype=T.float32):
    """The grouped GEMM with float8 expert weights (grouped_gemm's ``..._sm90_fp8_to_bf16``): each
    thread widens its runs of 8 weights from a float8 tile into a bfloat16 one through local
    buffers; groups start at multiples of ``block_M`` (no spare block after a group)."""
    batch_sum = sum(batch_sizes_list)
    batch_count = len(batch_sizes_list)
    total_m_blocks = sum((size + block_M - 1) // block_M for size in batch_sizes_list)
    vecs_per_thread = (block_K * block_N) // (threads * 8)

    @T.prim_func
    def kernel(
        A: T.Tensor([batch_sum, K], in_dtype_a),
        B: T.Tensor([batch_count, K, N], in_dtype_b),
        C: T.Tensor([batch_sum, N], out_dtype),
        batch_sizes: T.Tensor([batch_count], T.int32),
        batch_offsets: T.Tensor([batch_count], T.int32),
        batch_padded_offsets: T.Tensor([batch_count], T.int32),
    ):
        with T.Kernel(total_m_blocks, T.ceildiv(N, block_N), threads=threads) as (bx, by):
            A_shared = T.alloc_shared([block_M, block_K], in_dtype_a)
            B_fp8_shared = T.alloc_shared([block_K, block_N], in_dtype_b)
            B_shared = T.alloc_shared([block_K, block_N], in_dtype_a)
            C_local = T.alloc_fragment([block_M, block_N], accum_dtype)
            cur_fp8x8 = T.alloc_local((8,), in_dtype_b)
            cur_fp32x8 = T.alloc_local((8,), T.float32)
            cur_bf16x8 = T.alloc_local((8,), in_dtype_a)
            cur_batch_idx = T.alloc_var(dtype=T.int32)
            cur_batch_size = T.alloc_var(dtype=T.int32)

            tx = T.get_thread_binding()
            m_start_padded = bx * block_M

            for i in range(batch_count):
                in_cur_batch_idx = m_start_padded >= batch_padded_offsets[i]
                cur_batch_idx = T.if_then_else(in_cur_batch_idx, i, cur_batch_idx)

            cur_batch_size = batch_sizes[cur_batch_idx]
            m_start = m_start_padded - batch_padded_offsets[cur_batch_idx] + batch_offsets[cur_batch_idx]
            actual_rows = T.max(0, T.min(block_M,
                                         cur_batch_size + batch_padded_offsets[cur_batch_idx] - m_start_padded))

            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[m_start:m_start + block_M, k * block_K:(k + 1) * block_K], A_shared)
                T.copy(B[cur_batch_idx, k * block_K:(k + 1) * block_K, by * block_N:(by + 1) * block_N], B_fp8_shared)

                for vi in T.serial(vecs_per_thread):
                    flat = (vi * threads + tx) * 8
                    row = flat // block_N
                    col_base = flat % block_N
                    for i in T.vectorized(8):
                        cur_fp8x8[i] = B_fp8_shared[row, col_base + i]
                    for i in T.vectorized(8):
                        cur_fp32x8[i] = T.cast(cur_fp8x8[i], "float")
                    for i in T.vectorized(8):
                        cur_bf16x8[i] = T.cast(cur_fp32x8[i], in_dtype_a)
                    for i in T.vectorized(8):
                        B_shared[row, col_base + i] = cur_bf16x8[i]

                T.gemm(A_shared, B_shared, C_local)

            for i, j in T.Parallel(block_M, block_N):
                if i < actual_rows:
                    C[m_start + i, by * block_N + j] = T.cast(C_local[i, j], out_dtype)

    return kernel


@tilelang.jit(pass_configs=_NO_TMA)
def moe_shared(d_hidden, d_expert, n_shared_experts, dtype, num_tokens, block_token=128, block_dhidden=128,
               block_dexpert=128, threads=256, num_stages=1):
    """The shared experts, every token through one SwiGLU MLP of ``d_expert * n_shared_experts``
    columns: gate and up logits, SiLU(gate) * up into ``up_logits``, then a second kernel for the
    down projection into ``output``."""
    scale = 1.44269504  # log2(e)
    dhidden = d_hidden
    dexpert = d_expert * n_shared_experts
    input_shape = (num_tokens, dhidden)
    accum_type = "float32"

    @T.prim_func
    def kernel_shared(
            input: T.Tensor(input_shape, dtype),
            shared_W_gate: T.Tensor((dexpert, dhidden), dtype),
            shared_W_up: T.Tensor((dexpert, dhidden), dtype),
            shared_W_down: T.Tensor((dhidden, dexpert), dtype),
            up_logits: T.Tensor((num_tokens, dexpert), dtype),
            output: T.Tensor(input_shape, dtype),
    ):
        with T.Kernel(T.ceildiv(num_tokens, block_token), T.ceildiv(dexpert, block_dexpert),
                      threads=threads) as (bx, by):
            input_shared = T.alloc_fragment((block_token, block_dhidden), dtype=dtype)
            W_gate_shared = T.alloc_shared((block_dexpert, block_dhidden), dtype=dtype)
            W_up_shared = T.alloc_shared((block_dexpert, block_dhidden), dtype=dtype)
            gate_logits_local = T.alloc_fragment((block_token, block_dexpert), dtype=accum_type)
            up_logits_local = T.alloc_fragment((block_token, block_dexpert), dtype=accum_type)

            T.use_swizzle(10)
            T.clear(gate_logits_local)
            T.clear(up_logits_local)

            for k in T.Pipelined(T.ceildiv(dhidden, block_dhidden), num_stages=num_stages):
                T.copy(input[bx * block_token, k * block_dhidden], input_shared)
                T.copy(shared_W_gate[by * block_dexpert, k * block_dhidden], W_gate_shared)
                T.copy(shared_W_up[by * block_dexpert, k * block_dhidden], W_up_shared)
                T.gemm(input_shared, W_gate_shared, gate_logits_local, transpose_B=True)
                T.gemm(input_shared, W_up_shared, up_logits_local, transpose_B=True)

            for i, j in T.Parallel(block_token, block_dexpert):
                gate_logits_local[i, j] = gate_logits_local[i, j] * (
                    1.0 / (1.0 + T.exp2(-gate_logits_local[i, j] * scale)))
                up_logits_local[i, j] = up_logits_local[i, j] * gate_logits_local[i, j]

            T.copy(up_logits_local, up_logits[bx * block_token, by * block_dexpert])

        with T.Kernel(T.ceildiv(num_tokens, block_token), T.ceildiv(dhidden, block_dhidden),
                      threads=threads) as (bx, by):
            up_logits_shared = T.alloc_fragment((block_token, block_dexpert), dtype=dtype)
            W_down_shared = T.alloc_shared((block_dhidden, block_dexpert), dtype=dtype)
            output_local = T.alloc_fragment((block_token, block_dhidden), dtype=accum_type)

            T.use_swizzle(10)
            T.clear(output_local)

            for k in T.Pipelined(T.ceildiv(dexpert, block_dexpert), num_stages=num_stages):
                T.copy(up_logits[bx * block_token, k * block_dexpert], up_logits_shared)
                T.copy(shared_W_down[by * block_dhidden, k * block_dexpert], W_down_shared)
                T.gemm(up_logits_shared, W_down_shared, output_local, transpose_B=True)

            T.copy(output_local, output[bx * block_token, by * block_dhidden])

    return kernel_shared


@tilelang.jit(pass_configs=_NO_TMA)
def moe_routed(d_hidden, d_expert, n_routed_experts, dtype, group_sum, group_count, block_token=128,
               block_dhidden=128, block_dexpert=128, threads=256, num_stages=1, k_pack=1, coalesced_width=None):
    """The routed experts as one grouped GEMM over the tokens stacked by expert: block ``bx`` takes
    ``block_token`` rows of expert ``group_idx_for_bx[bx]`` through its SwiGLU MLP; the output rows
    are scaled by the tokens' routing weights."""
    scale = 1.44269504  # log2(e)
    dhidden = d_hidden
    dexpert = d_expert
    M = math.ceil(group_sum / block_token) + group_count
    accum_dtype = "float32"

    input_shape = (group_sum, dhidden)
    intermediate_shape = (group_sum, dexpert)
    group_sizes_shape = (n_routed_experts)

    @T.prim_func
    def kernel(
            input: T.Tensor(input_shape, dtype),
            routed_expert_gate: T.Tensor((n_routed_experts, dexpert, dhidden), dtype),
            routed_expert_up: T.Tensor((n_routed_experts, dexpert, dhidden), dtype),
            routed_expert_down: T.Tensor((n_routed_experts, dhidden, dexpert), dtype),
            routed_expert_weights: T.Tensor((group_sum), dtype),
            group_sizes: T.Tensor(group_sizes_shape, "int32"),
            group_offsets: T.Tensor(group_sizes_shape, "int32"),
            group_padded_offsets: T.Tensor(group_sizes_shape, "int32"),
            group_idx_for_bx: T.Tensor((M,), "int32"),
            up_logits: T.Tensor(intermediate_shape, dtype),
            output: T.Tensor(input_shape, dtype),
    ):
        with T.Kernel(M, T.ceildiv(dexpert, block_dexpert), threads=threads) as (bx, by):
            input_shared = T.alloc_fragment((block_token, block_dhidden), dtype=dtype)
            routed_expert_gate_shared = T.alloc_shared((block_dexpert, block_dhidden), dtype=dtype)
            routed_expert_up_shared = T.alloc_shared((block_dexpert, block_dhidden), dtype=dtype)
            gate_logits_local = T.alloc_fragment((block_token, block_dexpert), dtype=accum_dtype)
            up_logits_local = T.alloc_fragment((block_token, block_dexpert), dtype=accum_dtype)
            cur_group_idx = T.alloc_local([1], "int32")
            cur_group_size = T.alloc_local([1], "int32")

            T.use_swizzle(10, enable=True)

            m_start_padded = bx * block_token
            cur_group_idx[0] = group_idx_for_bx[bx]
            cur_group_size[0] = group_sizes[cur_group_idx[0]]
            m_start = m_start_padded - group_padded_offsets[cur_group_idx[0]] + group_offsets[cur_group_idx[0]]
            actual_rows = T.max(
                0, T.min(block_token, cur_group_size[0] - (m_start_padded - group_padded_offsets[cur_group_idx[0]])))

            T.clear(gate_logits_local)
            T.clear(up_logits_local)

            for k in T.Pipelined(T.ceildiv(dhidden, block_dhidden), num_stages=num_stages):
                T.copy(input[m_start:m_start + block_token, k * block_dhidden:(k + 1) * block_dhidden],
                       input_shared, coalesced_width=coalesced_width)
                T.copy(routed_expert_gate[cur_group_idx[0], by * block_dexpert:(by + 1) * block_dexpert,
                                          k * block_dhidden:(k + 1) * block_dhidden],
                       routed_expert_gate_shared, coalesced_width=coalesced_width)
                T.gemm(input_shared, routed_expert_gate_shared, gate_logits_local, k_pack=k_pack, transpose_B=True)
                T.copy(routed_expert_up[cur_group_idx[0], by * block_dexpert:(by + 1) * block_dexpert,
                                        k * block_dhidden:(k + 1) * block_dhidden],
                       routed_expert_up_shared, coalesced_width=coalesced_width)
                T.gemm(input_shared, routed_expert_up_shared, up_logits_local, k_pack=k_pack, transpose_B=True)

            for i, j in T.Parallel(block_token, block_dexpert):
                gate_logits_local[i, j] = gate_logits_local[i, j] * (
                    1.0 / (1.0 + T.exp2(-gate_logits_local[i, j] * scale)))
                up_logits_local[i, j] = up_logits_local[i, j] * gate_logits_local[i, j]

            for i, j in T.Parallel(block_token, block_dexpert):
                with T.If(i < actual_rows), T.Then():
                    up_logits[m_start + i, by * block_dexpert + j] = up_logits_local[i, j]

        with T.Kernel(M, T.ceildiv(dhidden, block_dhidden), threads=threads) as (bx, by):
            up_logits_shared = T.alloc_fragment((block_token, block_dexpert), dtype=dtype)
            routed_expert_down_shared = T.alloc_shared((block_dhidden, block_dexpert), dtype=dtype)
            output_local = T.alloc_fragment((block_token, block_dhidden), dtype=accum_dtype)
            cur_group_idx = T.alloc_local([1], "int32")
            cur_group_size = T.alloc_local([1], "int32")

            T.use_swizzle(10, enable=True)

            m_start_padded = bx * block_token
            cur_group_idx[0] = group_idx_for_bx[bx]
            cur_group_size[0] = group_sizes[cur_group_idx[0]]
            m_start = m_start_padded - group_padded_offsets[cur_group_idx[0]] + group_offsets[cur_group_idx[0]]
            actual_rows = T.max(
                0, T.min(block_token, cur_group_size[0] - (m_start_padded - group_padded_offsets[cur_group_idx[0]])))

            T.clear(output_local)

            for k in T.Pipelined(T.ceildiv(dexpert, block_dexpert), num_stages=num_stages):
                T.copy(up_logits[m_start:m_start + block_token, k * block_dexpert:(k + 1) * block_dexpert],
                       up_logits_shared, coalesced_width=coalesced_width)
                T.copy(routed_expert_down[cur_group_idx[0], by * block_dhidden:(by + 1) * block_dhidden,
                                          k * block_dexpert:(k + 1) * block_dexpert],
                       routed_expert_down_shared, coalesced_width=coalesced_width)
                T.gemm(up_logits_shared, routed_expert_down_shared, output_local, k_pack=k_pack, transpose_B=True)

            for i, j in T.Parallel(block_token, block_dhidden):
                with T.If(i < actual_rows), T.Then():
                    output[m_start + i, by * block_dhidden + j] = (
                        output_local[i, j] * routed_expert_weights[m_start + i])

    return kernel


def group_offsets(sizes: list[int], padding: int, spare_block: bool = True) -> tuple[list[int], list[int]]:
    """The groups' first rows stacked (``offsets``) and in the padded numbering the blocks walk
    (``padded``: each group starts a fresh block; with ``spare_block``, as the fp16 examples pad,
    it keeps at least one row past its end)."""
    offsets, padded = [0], [0]
    for size in sizes[:-1]:
        offsets.append(offsets[-1] + size)
        padded.append(padded[-1] + math.ceil((size + int(spare_block)) / padding) * padding)
    return offsets, padded


def moe_inputs(tokens: int, d_hidden: int, d_expert: int, experts: int, device: str, seed: int = 0
               ) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """Random float16 tokens, router, one shared expert and ``experts`` routed ones for ``moe_forward``
    (weights scaled by 1 / sqrt(fan-in), so every layer keeps values near 1)."""
    g = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g) * shape[-1] ** -0.5).half().to(device)

    x = (torch.randn(tokens, d_hidden, generator=g)).half().to(device)
    shared = randn(d_expert, d_hidden), randn(d_expert, d_hidden), randn(d_hidden, d_expert)
    routed = randn(experts, d_expert, d_hidden), randn(experts, d_expert, d_hidden), randn(experts, d_hidden, d_expert)
    return x, randn(experts, d_hidden), shared, routed


def moe_forward(x: torch.Tensor, router: torch.Tensor, shared: tuple[torch.Tensor, ...],
                experts: tuple[torch.Tensor, ...], top_k: int, block_token: int = 128,
                coalesced_width: int | None = None, **tiles: int) -> torch.Tensor:
    """The example's host side around the two kernels: ``x`` [tokens, d_hidden] routed to its
    ``top_k`` experts by ``router`` [n_experts, d_hidden]; ``shared`` the shared experts' gate / up
    [d, d_hidden] and down [d_hidden, d] weights, ``experts`` the routed ones stacked ([E, ...]).
    Tokens are sorted by expert, run through the grouped kernel, and added back by index; ``tiles``
    (block sizes, ``threads``, ``num_stages``) go to both kernels."""
    tokens, d_hidden = x.shape
    gate_w, up_w, down_w = experts
    n_experts, d_expert = gate_w.shape[:2]
    scores = (x.float() @ router.float().T).softmax(dim=-1)
    top_scores, top_experts = torch.topk(scores, k=top_k, dim=-1, sorted=False)
    flat_experts = top_experts.view(-1)
    order = flat_experts.argsort(stable=True)
    counts = flat_experts.bincount(minlength=n_experts).cpu().tolist()
    token_idxs = order // top_k
    stacked = x[token_idxs].contiguous()
    weights = top_scores.view(-1)[order].to(x.dtype).contiguous()
    offsets, padded = group_offsets(counts, block_token)
    group_sum = tokens * top_k
    blocks = math.ceil(group_sum / block_token) + n_experts
    group_idx_for_bx = [max(g for g in range(n_experts) if b * block_token >= padded[g]) for b in range(blocks)]

    def ints(values: list[int]) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.int32, device=x.device)

    routed = moe_routed(d_hidden, d_expert, n_experts, "float16", group_sum, n_experts, block_token=block_token,
                        coalesced_width=coalesced_width, **tiles)
    up_logits = torch.empty(group_sum, d_expert, dtype=x.dtype, device=x.device)
    expert_out = torch.empty(group_sum, d_hidden, dtype=x.dtype, device=x.device)
    routed(stacked, gate_w, up_w, down_w, weights, ints(counts), ints(offsets), ints(padded), ints(group_idx_for_bx),
           up_logits, expert_out)

    s_gate, s_up, s_down = shared
    kernel_shared = moe_shared(d_hidden, d_expert, s_gate.shape[0] // d_expert, "float16", tokens,
                               block_token=block_token, **tiles)
    shared_up = torch.empty(tokens, s_gate.shape[0], dtype=x.dtype, device=x.device)
    shared_out = torch.empty(tokens, d_hidden, dtype=x.dtype, device=x.device)
    kernel_shared(x, s_gate, s_up, s_down, shared_up, shared_out)

    routed_sum = torch.zeros(tokens, d_hidden, dtype=torch.float32, device=x.device)
    routed_sum.index_add_(0, token_idxs, expert_out.float())
    return (shared_out.float() + routed_sum).to(x.dtype)


def moe_reference(x: torch.Tensor, router: torch.Tensor, shared: tuple[torch.Tensor, ...],
                  experts: tuple[torch.Tensor, ...], top_k: int) -> torch.Tensor:
    """The same mixture of experts token by token in float32."""

    def mlp(h: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
        return (F.silu(h @ gate.float().T) * (h @ up.float().T)) @ down.float().T

    h = x.float()
    scores = (h @ router.float().T).softmax(dim=-1)
    top_scores, top_experts = torch.topk(scores, k=top_k, dim=-1, sorted=False)
    out = mlp(h, *shared)
    for e in range(experts[0].shape[0]):
        rows, slot = (top_experts == e).nonzero(as_tuple=True)
        if rows.numel():
            out[rows] += mlp(h[rows], *(w[e] for w in experts)) * top_scores[rows, slot, None].half().float()
    return out.to(x.dtype)
