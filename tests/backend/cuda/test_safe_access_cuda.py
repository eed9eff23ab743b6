"""Guarded element accesses to global tensors (core_ir/safe_access.py) on the GPU: the kernels of
tests/kernels/safe_access.py, written as TileLang's DeepSeek v3.2 examples rely on the guards, and
atomic loads and returning atomics past their tensors (which read 0 and update nothing, memory
after the tensor included), against torch, on the device's path and the sm_80-class one."""

from __future__ import annotations

import pytest
import torch

from tests.kernels import safe_access as kernels
from tilelang_x import knobs

TARGETS = ["cuda", "cuda:sm_90"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dynamic", [False, True])
def test_indexer_logits_past_seq_len_kv(dynamic: bool, target: str) -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    seq_q, seq_kv, heads, dim = 8, 1000, 16, 64
    q = torch.randn(seq_q * heads, dim, device="cuda", generator=gen).half()
    k = torch.randn(seq_kv, dim, device="cuda", generator=gen).half()
    w = torch.randn(seq_q, heads, device="cuda", generator=gen)
    # memory after the tensor the kernel sees: the last row's stores past its end must not reach it
    storage = torch.full((seq_q * seq_kv + 64,), 7.0, device="cuda")
    logits = storage[: seq_q * seq_kv].view(seq_q, seq_kv)
    with knobs.scope(target_default=target):
        kernels.indexer_logits(seq_q, seq_kv, heads, dim, dynamic=dynamic)(q, k, w, logits)
    torch.cuda.synchronize()
    ref = (torch.relu(k.float() @ q.float().T).reshape(seq_kv, seq_q, heads) * w[None]).sum(-1).T
    torch.testing.assert_close(logits, ref, atol=2e-2, rtol=1e-2)
    assert torch.all(storage[seq_q * seq_kv:] == 7.0)


@pytest.mark.parametrize("target", TARGETS)
def test_clean_logits_whole_rows(target: str) -> None:
    gen = torch.Generator(device="cuda").manual_seed(1)
    seq_len, seq_kv = 64, 1000
    storage = torch.randn(seq_len * seq_kv + 256, device="cuda", generator=gen)
    logits = storage[: seq_len * seq_kv].view(seq_len, seq_kv)
    starts = torch.randint(0, seq_kv, (seq_len,), device="cuda", generator=gen, dtype=torch.int32)
    ends = torch.minimum(starts + torch.randint(0, seq_kv, (seq_len,), device="cuda", generator=gen,
                                                dtype=torch.int32), torch.tensor(seq_kv, device="cuda"))
    want = storage.clone()
    cols = torch.arange(seq_kv, device="cuda")
    inside = (cols[None, :] >= starts[:, None].long()) & (cols[None, :] < ends[:, None].long())
    want[: seq_len * seq_kv].view(seq_len, seq_kv)[~inside] = float("-inf")  # the tail stays
    with knobs.scope(target_default=target):
        kernels.clean_logits()(logits, starts, ends.to(torch.int32))
    torch.cuda.synchronize()
    assert torch.equal(storage, want)


@pytest.mark.parametrize("target", TARGETS)
def test_sparse_gather_with_the_sentinel(target: str) -> None:
    gen = torch.Generator(device="cuda").manual_seed(2)
    seq_len, seq_kv, topk, dim = 32, 500, 64, 128
    kv = torch.randn(seq_kv, dim, device="cuda", generator=gen)
    idx = torch.randint(0, seq_kv, (seq_len, topk), device="cuda", generator=gen, dtype=torch.int32)
    idx[:, topk // 2:] = seq_kv  # unused slots
    with knobs.scope(target_default=target):
        out = kernels.sparse_gather_sum(seq_len, seq_kv, topk, dim)(kv, idx)
    ref = torch.cat([kv, torch.zeros(1, dim, device="cuda")])[idx.long()].sum(1)
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_load_store_and_scalar_atomic_outside(target: str) -> None:
    n, shift = 1000, 3
    a = torch.randn(n, device="cuda")
    storage = torch.ones(n + 8, device="cuda")
    acc = storage[:n]
    with knobs.scope(target_default=target):
        out = kernels.shifted_copy(n, shift)(a, acc)
    want_out = torch.zeros(n, device="cuda")
    want_out[: n - shift] = a[shift:]
    want_acc = torch.ones(n + 8, device="cuda")
    want_acc[shift:n] += a[: n - shift]
    torch.testing.assert_close(out, want_out)
    torch.testing.assert_close(storage, want_acc)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind", ["add", "max", "min"])
def test_atomic_load_and_returning_atomic_past_the_end(kind: str, target: str) -> None:
    n, shift = 1000, 3
    gen = torch.Generator(device="cuda").manual_seed(3)
    a = torch.randn(n, device="cuda", generator=gen)
    # memory after Acc: an update past its end must not reach it
    storage = torch.randn(n + 8, device="cuda", generator=gen)
    acc = storage[:n]
    want_acc = storage.clone()
    combine = {"add": torch.add, "max": torch.maximum, "min": torch.minimum}[kind]
    want_acc[shift:n] = combine(storage[shift:n], a[: n - shift])
    want_prev, want_out = torch.zeros(n, device="cuda"), torch.zeros(n, device="cuda")
    want_prev[: n - shift] = storage[shift:n]
    want_out[: n - shift] = a[shift:]
    prev = torch.full((n,), 7.0, device="cuda")
    with knobs.scope(target_default=target):
        out = kernels.shifted_atomic_reads(n, shift, kind)(a, acc, prev)
    torch.cuda.synchronize()
    assert torch.equal(out, want_out) and torch.equal(prev, want_prev) and torch.equal(storage, want_acc)


@pytest.mark.parametrize("target", TARGETS)
def test_gather_tickets_with_sentinels(target: str) -> None:
    n, bins = 4096, 37
    gen = torch.Generator(device="cuda").manual_seed(4)
    idx = torch.randint(0, bins, (n,), device="cuda", generator=gen, dtype=torch.int32)
    idx[::7] = bins
    idx[::11] = -1
    counts = torch.randint(0, 50, (bins,), device="cuda", generator=gen, dtype=torch.int32)
    table = torch.randint(1, 1000, (bins,), device="cuda", generator=gen, dtype=torch.int32)
    storage = torch.zeros(bins + 8, device="cuda", dtype=torch.int32)  # the counters, then memory after them
    storage[:bins] = counts
    ticket, seen = torch.full_like(idx, -5), torch.full_like(idx, -5)
    with knobs.scope(target_default=target):
        kernels.gather_tickets(n, bins)(idx, storage[:bins], table, ticket, seen)
    torch.cuda.synchronize()
    valid = (idx >= 0) & (idx < bins)
    assert torch.equal(storage[:bins], counts + torch.bincount(idx[valid].long(), minlength=bins).int())
    assert torch.all(storage[bins:] == 0)
    assert torch.all(ticket[~valid] == 0) and torch.all(seen[~valid] == 0)
    assert torch.equal(seen[valid], table[idx[valid].long()])
    for b in range(bins):  # a bin's tickets: its counter's values before the updates, in some order
        got = ticket[idx == b].sort().values
        assert torch.equal(got, torch.arange(int(counts[b]), int(storage[b]), device="cuda", dtype=torch.int32))


@pytest.mark.parametrize("target", TARGETS)
def test_block_level_atomic_reads_past_the_flags(target: str) -> None:
    blocks, nflags = 64, 40
    flags = torch.arange(1, nflags + 1, device="cuda", dtype=torch.int32)
    storage = torch.zeros(nflags + 8, device="cuda", dtype=torch.int32)
    storage[:nflags] = torch.arange(nflags, device="cuda", dtype=torch.int32) * 3
    before = storage.clone()
    with knobs.scope(target_default=target):
        out = kernels.block_flags(blocks, nflags)(flags, storage[:nflags])
    torch.cuda.synchronize()
    want = torch.zeros(blocks, device="cuda", dtype=torch.int32)
    want[:nflags] = before[:nflags] * 10 + flags
    assert torch.equal(out, want)
    assert torch.equal(storage[:nflags], before[:nflags] + 1) and torch.all(storage[nflags:] == 0)


@pytest.mark.parametrize("target", TARGETS)
def test_per_thread_atomic_reads_past_the_counters(target: str) -> None:
    blocks, ncounters = 16, 100
    storage = torch.zeros(ncounters + 32, device="cuda", dtype=torch.int32)
    storage[:ncounters] = torch.arange(ncounters, device="cuda", dtype=torch.int32) * 10
    out = torch.full((blocks, 8), -7, device="cuda", dtype=torch.int32)
    with knobs.scope(target_default=target):
        kernels.thread_tickets(blocks, ncounters)(storage[:ncounters], out)
    torch.cuda.synchronize()
    want = torch.zeros(blocks * 8, device="cuda", dtype=torch.int32)
    want[:ncounters] = torch.arange(ncounters, device="cuda", dtype=torch.int32) * 20 + 1
    assert torch.equal(out.flatten(), want)
    assert torch.equal(storage[:ncounters], torch.arange(ncounters, device="cuda", dtype=torch.int32) * 10 + 1)
    assert torch.all(storage[ncounters:] == 0)
