"""Guarded element accesses to global tensors (core_ir/safe_access.py, TileLang's
``LegalizeSafeMemoryAccess``): the DeepSeek v3.2 kernels that rely on them, and atomic loads and
returning atomics past their tensors, run in the interpreter against torch,
``tl.disable_safe_memory_legalize`` gives back the out-of-bounds error, and the guards appear in the
IR and the CUDA source only where an access cannot be proven in range."""

from __future__ import annotations

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import control_flow, elementwise, gemm, views
from tests.kernels import safe_access as kernels
from tests.null.cuda_helpers import cuda_source
from tests.null.cuda_suite_funcs import suite_funcs
from tilelang_x.core_ir.errors import OutOfBoundsError
from tilelang_x.core_ir.passes import CORE_STAGES
from tilelang_x.core_ir.stages import StageContext, run_stages
from tilelang_x.core_ir.stmt import PrimFunc

OFF = {tilelang.PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS: True}


def _interp(func: PrimFunc, configs: dict | None = None) -> tilelang.JITKernel:
    return tilelang.compile(func, target="interp", pass_configs=configs)


def _core(func: PrimFunc, configs: dict | None = None) -> str:
    """The IR after the core stages, as text."""
    ctx = StageContext(None, {"pass_configs": configs or {}})
    return run_stages(func, CORE_STAGES, ctx).script()


def _line_of(text: str, module: object = kernels) -> int:
    """The line of ``module`` (tests/kernels/safe_access.py) holding ``text``."""
    lines = open(module.__file__).read().splitlines()  # type: ignore[attr-defined]
    return next(n for n, line in enumerate(lines, 1) if text in line)


def _logits_inputs(seq_kv: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seq_kv)
    q = torch.randn(4 * 4, 32, generator=gen).half()
    k = torch.randn(seq_kv, 32, generator=gen).half()
    w = torch.randn(4, 4, generator=gen)
    ref = (torch.relu(k.float() @ q.float().T).reshape(seq_kv, 4, 4) * w[None]).sum(-1).T
    return q, k, w, ref


def _gather_inputs() -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(1)
    kv = torch.randn(100, 128, generator=gen)
    idx = torch.randint(0, 100, (4, 16), generator=gen, dtype=torch.int32)
    idx[:, -3:] = 100  # unused slots hold the sentinel seq_len_kv
    ref = torch.cat([kv, torch.zeros(1, 128)])[idx.long()].sum(1)
    return kv, idx, ref


# ---- the TileLang examples' patterns in the interpreter --------------------------------------------

@pytest.mark.parametrize("dynamic", [False, True])
def test_indexer_logits_store_past_seq_len_kv_is_dropped(dynamic: bool) -> None:
    q, k, w, ref = _logits_inputs(100)
    out = torch.full((4, 100), 7.0)
    _interp(kernels.indexer_logits.get_ir(4, 100, 4, 32, dynamic=dynamic))(q, k, w, out)
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)


def test_clean_logits_whole_rows_past_the_end_are_dropped() -> None:
    logits, starts, ends, want = kernels.window_inputs()
    _interp(kernels.clean_logits.get_ir())(logits, starts, ends)
    assert torch.equal(logits, want)


def test_sparse_gather_with_the_sentinel_index_reads_zeros() -> None:
    kv, idx, ref = _gather_inputs()
    torch.testing.assert_close(_interp(kernels.sparse_gather_sum.get_ir(4, 100, 16, 128))(kv, idx), ref)


def test_load_store_and_scalar_atomic_outside_are_zero_and_dropped() -> None:
    a, acc = torch.randn(200), torch.ones(200)
    want_out, want_acc = torch.zeros(200), torch.ones(200)
    want_out[:197] = a[3:]
    want_acc[3:] += a[:197]
    torch.testing.assert_close(_interp(kernels.shifted_copy.get_ir(200, 3))(a, acc), want_out)
    torch.testing.assert_close(acc, want_acc)


# ---- switched off: today's out-of-bounds errors ----------------------------------------------------

@pytest.mark.parametrize(("case", "access"), [
    ("logits", "scores[n, g]  # the last block: past seq_kv too"),
    ("clean", "Logits[bx, idx] = -T.infinity(T.float32)"),
    ("gather", "kv_f[i, d] = KV[Indices[by, i], bx * block_D + d]"),
])
def test_disabled_raises_out_of_bounds_naming_the_line(case: str, access: str) -> None:
    if case == "logits":
        q, k, w, _ = _logits_inputs(100)
        run = lambda: _interp(kernels.indexer_logits.get_ir(4, 100, 4, 32), OFF)(q, k, w, torch.zeros(4, 100))  # noqa: E731
    elif case == "clean":
        logits, starts, ends, _ = kernels.window_inputs()
        run = lambda: _interp(kernels.clean_logits.get_ir(), OFF)(logits, starts, ends)  # noqa: E731
    else:
        kv, idx, _ = _gather_inputs()
        run = lambda: _interp(kernels.sparse_gather_sum.get_ir(4, 100, 16, 128), OFF)(kv, idx)  # noqa: E731
    with pytest.raises(OutOfBoundsError) as err:
        run()
    module = views if case == "logits" else kernels  # the indexer's kernel is views.weighted_scores
    assert err.value.loc is not None and err.value.loc.line == _line_of(access, module)
    assert f"{module.__name__.rsplit('.', 1)[-1]}.py:" in str(err.value)


def test_disabled_through_the_body_annotation() -> None:
    @T.prim_func
    def main(A: T.Tensor((8,), T.float32), Out: T.Tensor((8,), T.float32)):
        T.annotate_pass_configs({"tl.disable_safe_memory_legalize": True})
        with T.Kernel(1, threads=32):
            for i in T.Parallel(8):
                Out[i] = A[i + 1]

    with pytest.raises(OutOfBoundsError):
        tilelang.compile(main, target="interp")(torch.zeros(8), torch.zeros(8))


# ---- which accesses get a guard ----------------------------------------------------------------------

def test_guards_in_the_ir() -> None:
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n, 16), T.float32), B: T.Tensor((n,), T.float32), Idx: T.Tensor((4,), T.int32),
             Out: T.Tensor((n, 16), T.float32)):
        with T.Kernel(T.ceildiv(n, 32), threads=128) as bx:
            s = T.alloc_shared((32,), T.float32)
            for i, j in T.Parallel(32, 16):
                Out[bx * 32 + i, j] = A[bx * 32 + i, j]  # dim 0 guarded against n, not dim 1
            for i in T.Parallel(32):
                if bx * 32 + i < n:
                    B[bx * 32 + i] = T.if_then_else(bx * 32 + i >= 1, B[bx * 32 + i - 1], 0.0)  # proven
            for i in T.Parallel(32):
                s[i] = B[Idx[i % 4] - 1]  # data-dependent, may be negative: both sides checked
            for i in T.Parallel(32):
                s[i] = s[i + Idx[0]]  # shared: never guarded

    text = _core(main)
    # the store's guard proves the load
    assert "if bx * 32 + i < n:\n                    Out[bx * 32 + i, j] = A[bx * 32 + i, j]" in text
    assert text.count("bx * 32 + i_1 < n") == 1  # the user's own if, nothing added under it
    assert "T.if_then_else(1 <= Idx[i_2 % 4] and Idx[i_2 % 4] < n + 1, B[Idx[i_2 % 4] - 1], 0.0)" in text
    assert "s[i_3] = s[i_3 + Idx[0]]" in text
    assert _core(main, OFF).count("if_then_else") == 1  # the user's own


def test_facts_read_from_a_buffer_stop_holding_after_a_write() -> None:
    @T.prim_func
    def main(A: T.Tensor((16,), T.float32), Out: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=32):
            k = T.alloc_var(T.int32, 0)
            while k < 16:
                Out[k] = A[k]  # the while condition proves the upper bound
                k += 1
                Out[k] = A[k]  # no longer

    text = _core(main)
    assert "if 0 <= k[0]:\n                Out[k[0]] = A[k[0]]" in text
    assert "if 0 <= k[0] and k[0] < 16:\n                Out[k[0]] = A[k[0]]" in text


def test_persistent_loop_indices_are_proven_case_by_case() -> None:
    # T.Persistent's tile coordinates are in range only for the waves each block runs
    text = _core(suite_funcs()["block_sparse_matmul_persistent_continue"]())
    assert "if_then_else" not in text


def test_vector_add_and_gemm_epilogue_sources_unchanged() -> None:
    for func in (elementwise.vector_add.get_ir(), gemm.matmul.get_ir(200, 136, 96, block_M=64, block_N=64),
                 gemm.matmul.get_ir(128, 128, 256, relu=True, block_M=64, block_N=64)):
        for arch in ("sm_80", "sm_90a"):
            assert cuda_source(func, arch)[0] == cuda_source(func, arch, OFF)[0]


def test_cuda_source_guards_only_unprovable_accesses() -> None:
    source = cuda_source(kernels.indexer_logits.get_ir(4, 100, 4, 32, dynamic=True), "sm_80")[0]
    assert "< seq_len_kv) {" in source  # the logits store
    assert source.count("seq_len_kv") == cuda_source(
        kernels.indexer_logits.get_ir(4, 100, 4, 32, dynamic=True), "sm_80", OFF)[0].count("seq_len_kv") + 1
    gather = cuda_source(kernels.sparse_gather_sum.get_ir(4, 100, 16, 128), "sm_80")[0]
    # the gathered row, checked both ways; not its column, nor Indices (both in range)
    assert "] < 100)) ? KV[" in gather and "((0 <= Indices[" in gather
    assert gather[gather.index("__global__"):].count(" ? ") == 1


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", ["logits", "clean", "gather", "shifted"])
def test_guarded_kernels_compile(name: str, arch: str) -> None:
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    func = {"logits": lambda: kernels.indexer_logits.get_ir(4, 100, 4, 32, dynamic=True),
            "clean": kernels.clean_logits.get_ir,
            "gather": lambda: kernels.sparse_gather_sum.get_ir(4, 100, 16, 128),
            "shifted": lambda: kernels.shifted_copy.get_ir(200, 3)}[name]()
    source, ctx = cuda_source(func, arch)
    if find_nvcc() is None and find_nvrtc() is None:
        pytest.skip("needs nvcc or NVRTC")
    assert len(compile_cuda(source, arch, kernel_name=ctx.data["cuda.meta"].kernel_name).cubin) > 0


def test_while_loop_suite_kernel_guards_only_the_lower_bound() -> None:
    source = cuda_source(control_flow.first_below.get_ir(64, 40, -1.0), "sm_80")[0]
    assert "((0 <= col) ? A[" in source


def test_suite_kernels_get_guards_only_where_an_access_is_unprovable() -> None:
    # `first_below`: `col`, a variable, may be negative as far as anyone can prove; `scale_first_rows`:
    # the bound `n` is a scalar argument, not Y's length; varlen NSA: its rows come from `Offsets` and
    # `TokenIndices`, read from memory; the grouped GEMMs and MoE: rows and groups read from index
    # tensors; `deepgemm_fp8_blockscale`: the row scales of the last, partial row block
    guarded = {name for name, make in suite_funcs().items() if _core(make()) != _core(make(), OFF)}
    assert guarded == {"first_below_while_loop_break", "grid_from_integer_argument", "nsa_fwd_varlen_block_counts",
                       "deepgemm_fp8_blockscale", "fused_moe_routed_down", "fused_moe_routed_gate_up",
                       "grouped_gemm_bwd_trip_count_from_tensor", "grouped_gemm_fp8_weights_simt_dequant",
                       "grouped_gemm_padded_groups"}


# ---- atomics that read: T.atomic_load, return_prev=True ----------------------------------------------

def _shifted_reference(a: torch.Tensor, acc: torch.Tensor, shift: int, kind: str) -> tuple[torch.Tensor, ...]:
    """(Out, Prev, Acc after) of ``shifted_atomic_reads``: zeros where ``i + shift`` is past the end."""
    n = len(a)
    out, prev, after = torch.zeros(n), torch.zeros(n), acc.clone()
    out[: n - shift] = a[shift:]
    prev[: n - shift] = acc[shift:]
    combine = {"add": torch.add, "max": torch.maximum, "min": torch.minimum}[kind]
    after[shift:] = combine(acc[shift:], a[: n - shift])
    return out, prev, after


def _gather_tickets_inputs(n: int = 256, bins: int = 10) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(3)
    idx = torch.randint(0, bins, (n,), generator=gen, dtype=torch.int32)
    idx[::7] = bins  # the sentinels: past the end...
    idx[::11] = -1  # ...and before the start
    counts = torch.randint(0, 50, (bins,), generator=gen, dtype=torch.int32)
    table = torch.randint(1, 1000, (bins,), generator=gen, dtype=torch.int32)
    return idx, counts, table


def _check_gather_tickets(idx: torch.Tensor, counts: torch.Tensor, table: torch.Tensor, after: torch.Tensor,
                          ticket: torch.Tensor, seen: torch.Tensor) -> None:
    """Each bin's tickets are its counter's values before the updates, in some order; a sentinel
    updates nothing and reads 0."""
    bins = len(counts)
    valid = (idx >= 0) & (idx < bins)
    assert torch.equal(after, counts + torch.bincount(idx[valid].long(), minlength=bins).int())
    assert torch.all(ticket[~valid] == 0) and torch.all(seen[~valid] == 0)
    assert torch.equal(seen[valid], table[idx[valid].long()])
    for b in range(bins):
        got = ticket[idx == b].sort().values
        assert torch.equal(got, torch.arange(int(counts[b]), int(after[b]), dtype=torch.int32))


@pytest.mark.parametrize("kind", ["add", "max", "min"])
def test_atomic_load_and_returning_atomic_past_the_end_read_zero_and_update_nothing(kind: str) -> None:
    n, shift = 200, 3
    a, acc = torch.randn(n), torch.randn(n)
    want_out, want_prev, want_acc = _shifted_reference(a, acc, shift, kind)
    prev = torch.full((n,), 7.0)
    out = _interp(kernels.shifted_atomic_reads.get_ir(n, shift, kind))(a, acc, prev)
    assert torch.equal(out, want_out) and torch.equal(prev, want_prev) and torch.equal(acc, want_acc)


def test_gather_with_sentinel_indices_takes_no_ticket_and_reads_zero() -> None:
    idx, counts, table = _gather_tickets_inputs()
    after = counts.clone()
    ticket, seen = torch.full_like(idx, -5), torch.full_like(idx, -5)
    _interp(kernels.gather_tickets.get_ir(len(idx), len(counts)))(idx, after, table, ticket, seen)
    _check_gather_tickets(idx, counts, table, after, ticket, seen)


def test_block_level_atomic_reads_past_the_flags() -> None:
    flags, counters = torch.arange(1, 6, dtype=torch.int32), torch.arange(5, dtype=torch.int32) * 3
    before = counters.clone()
    out = _interp(kernels.block_flags.get_ir(8, 5))(flags, counters)
    assert out.tolist() == (before * 10 + flags).tolist() + [0, 0, 0]
    assert torch.equal(counters, before + 1)


def test_per_thread_atomic_reads_past_the_counters() -> None:
    counters = torch.arange(12, dtype=torch.int32) * 10
    out = torch.full((2, 8), -7, dtype=torch.int32)
    _interp(kernels.thread_tickets.get_ir(2, 12))(counters, out)
    want = torch.zeros(16, dtype=torch.int32)
    want[:12] = 2 * torch.arange(12, dtype=torch.int32) * 10 + 1
    assert torch.equal(out.flatten(), want)
    assert torch.equal(counters, torch.arange(12, dtype=torch.int32) * 10 + 1)


def test_atomic_reads_guarded_in_the_ir() -> None:
    text = _core(kernels.shifted_atomic_reads.get_ir(200, 3))
    assert ("T.if_then_else(bx * 64 + i < 197, T.atomic_load(A[bx * 64 + i + 3], memory_order='acquire'), 0.0)"
            in text)
    assert ("prev = T.alloc_var(float32, 0.0)\n"
            "            if bx * 64 + i_1 < 197:\n"
            "                prev_in = T.alloc_var(float32, T.atomic_add(Acc[bx * 64 + i_1 + 3], A[bx * 64 + i_1], "
            "return_prev=True))\n"
            "                prev[0] = prev_in[0]\n") in text
    gather = _core(kernels.gather_tickets.get_ir(128, 10))
    assert gather.count("0 <= Idx[bx * 64 + i] and Idx[bx * 64 + i] < 10") == 2  # the update, the load


def test_atomic_reads_proven_in_range_get_no_guard() -> None:
    func = kernels.checked_atomic_reads.get_ir(200, 3)
    assert _core(func) == _core(func, OFF)
    for arch in ("sm_80", "sm_90a"):
        assert cuda_source(func, arch)[0] == cuda_source(func, arch, OFF)[0]


def test_an_atomic_load_proves_nothing_about_the_next_one() -> None:
    @T.prim_func
    def main(C: T.Tensor((1,), T.int32), A: T.Tensor((16,), T.float32), Out: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=32):
            if T.atomic_load(C[0]) < 16:
                Out[0] = A[T.atomic_load(C[0])]  # another block may have raised C[0] in between
            k = T.alloc_var(T.int32, C[0])
            if k < 16:
                Out[1] = A[k]  # a variable holds its value: only `0 <=` is left

    text = _core(main)
    assert "A[T.atomic_load(C[0], memory_order='seq_cst')]" in text
    assert "T.atomic_load(C[0], memory_order='seq_cst') < 16, A[" in text
    assert "T.if_then_else(0 <= k[0], A[k[0]], 0.0)" in text


@pytest.mark.parametrize(("case", "access"), [
    ("load", "Out[bx * block + i] = T.atomic_load(A[bx * block + i + shift]"),
    ("fetch", "Ticket[bx * block + i] = T.atomic_add(Counts[Idx[bx * block + i]], 1, return_prev=True)"),
    ("block", "f = T.atomic_load(Flags[bx], memory_order=\"acquire\")"),
])
def test_atomic_reads_disabled_raise_out_of_bounds_naming_the_line(case: str, access: str) -> None:
    if case == "load":
        func, args = kernels.shifted_atomic_reads.get_ir(200, 3), (torch.randn(200), torch.randn(200), torch.zeros(200))
    elif case == "fetch":
        idx, counts, table = _gather_tickets_inputs()
        func = kernels.gather_tickets.get_ir(len(idx), len(counts))
        args = (idx, counts, table, idx.clone(), idx.clone())
    else:
        func = kernels.block_flags.get_ir(8, 5)
        args = (torch.ones(5, dtype=torch.int32), torch.ones(5, dtype=torch.int32))
    with pytest.raises(OutOfBoundsError) as err:
        _interp(func, OFF)(*args)
    assert err.value.loc is not None and err.value.loc.line == _line_of(access)
    assert "safe_access.py:" in str(err.value)


def test_cuda_atomic_reads_stay_behind_their_guards() -> None:
    block = cuda_source(kernels.block_flags.get_ir(8, 5), "sm_80")[0]
    # the block's one load is made by thread 0, only for a flag that exists; its one update likewise
    assert "[0] = (bx < 5) ? ((int)(tlx_ld_acquire_32(&Flags[bx]))) : 0;" in block
    guarded = block[block.index("if (bx < 5) {"):]
    assert guarded.index("atomicAdd(&Counters[bx], 1)") < guarded.index("}")
    gather = cuda_source(kernels.gather_tickets.get_ir(128, 10), "sm_80")[0]
    update = gather.index("atomicAdd(&Counts[")
    assert gather.rindex("if ((0 <= Idx[", 0, update) > gather.rindex("int prev = 0;", 0, update)
    assert "< 10)) ? ((int)(tlx_ld_relaxed_32(&Table[" in gather


def _block_level_guarded_loads() -> PrimFunc:
    @T.prim_func
    def main(F: T.Tensor((4,), T.int32), Ix: T.Tensor((1,), T.int32), Out: T.Tensor((8,), T.int32)):
        with T.Kernel(8, threads=32) as bx:
            f = T.alloc_var(T.int32)
            f = T.atomic_load(F[T.atomic_load(Ix[0])])  # an index only another atomic load knows
            g = T.alloc_var(T.int32)
            g = T.if_then_else(bx < 4, 0, T.atomic_load(F[bx - 4]))  # the user's own guard
            Out[bx] = f + g

    return main


def test_cuda_block_level_atomic_loads_are_fetched_with_their_guards() -> None:
    source = cuda_source(_block_level_guarded_loads(), "sm_80")[0]
    assert "< 4)) ? ((int)(tlx_ld_seq_cst_32(&F[(int)(tlx_ld_seq_cst_32(&Ix[0]))]))) : 0;" in source
    assert "[0] = (bx < 4) ? 0 : ((int)(tlx_ld_seq_cst_32(&F[bx - 4])));" in source


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", ["shifted_add", "shifted_max", "gather", "block", "thread", "checked", "guards"])
def test_guarded_atomic_reads_compile(name: str, arch: str) -> None:
    from tilelang_x.plugins.cuda.compile import compile_cuda, find_nvcc, find_nvrtc

    func = {"shifted_add": lambda: kernels.shifted_atomic_reads.get_ir(200, 3),
            "shifted_max": lambda: kernels.shifted_atomic_reads.get_ir(200, 3, "max"),
            "gather": lambda: kernels.gather_tickets.get_ir(128, 10),
            "block": lambda: kernels.block_flags.get_ir(8, 5),
            "thread": lambda: kernels.thread_tickets.get_ir(2, 12),
            "checked": lambda: kernels.checked_atomic_reads.get_ir(200, 3),
            "guards": _block_level_guarded_loads}[name]()
    source, ctx = cuda_source(func, arch)
    if find_nvcc() is None and find_nvrtc() is None:
        pytest.skip("needs nvcc or NVRTC")
    assert len(compile_cuda(source, arch, kernel_name=ctx.data["cuda.meta"].kernel_name).cubin) > 0
