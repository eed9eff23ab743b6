"""``T.atomic_add / max / min(..., return_prev=True)`` on the GPU: blocks racing for tickets each get
a distinct one, every element appended by stream compaction lands in its own slot, per-thread
slots from a shared counter are a permutation, and the previous values of max / min / add are
values the element really held."""

from __future__ import annotations

import pytest
import torch

from tests.kernels import atomic_fetch as K


@pytest.mark.parametrize(("tiles", "blocks"), [(4096, 132), (257, 1000)])
def test_every_tile_of_the_queue_is_taken_exactly_once(tiles: int, blocks: int) -> None:
    kernel = K.ticket_queue(tiles, blocks)
    x = torch.randn(tiles * 64, device="cuda")
    for _ in range(3):
        counter = torch.zeros(1, dtype=torch.int32, device="cuda")
        y = torch.zeros_like(x)
        owner = torch.full((tiles,), -1, dtype=torch.int32, device="cuda")
        claims = torch.zeros(tiles, dtype=torch.int32, device="cuda")
        kernel(x, counter, y, owner, claims)
        torch.testing.assert_close(y, x * 2)
        assert bool((claims == 1).all()), claims
        # each block stops at its first ticket past the end: one per block
        assert int(counter) == tiles + blocks
        assert bool(((owner >= 0) & (owner < blocks)).all())


def test_stream_compaction_claims_distinct_slots() -> None:
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    count = torch.zeros(1, dtype=torch.int32, device="cuda")
    y = torch.zeros_like(x)
    K.compact_positive(n)(x, count, y)
    k = int(count)
    assert k == int((x > 0).sum())
    torch.testing.assert_close(torch.sort(y[:k]).values, torch.sort(x[x > 0]).values, atol=0, rtol=0)


def test_per_thread_slots_are_a_permutation() -> None:
    blocks = 264
    slots = torch.zeros(blocks, 128, dtype=torch.int32, device="cuda")
    total = torch.zeros(1, dtype=torch.int32, device="cuda")
    K.even_thread_slots(blocks)(slots, total)
    expect = torch.arange(64, dtype=torch.int32, device="cuda").expand(blocks, 64)
    assert torch.equal(torch.sort(slots[:, 0::2], dim=1).values, expect)
    assert bool((slots[:, 1::2] == -1).all())
    assert int(total) == blocks * 64


@pytest.mark.parametrize(("kind", "dtype"), [("max", "float32"), ("min", "float32"), ("max", "int32"),
                                             ("min", "int64")])
def test_max_and_min_return_values_the_element_held(kind: str, dtype: str) -> None:
    """The updates happened in some order: each previous value is the start value or a thread's
    value that improved on what that thread saw, and never the thread's own (the values are
    distinct)."""
    n = 1024
    x = (torch.randperm(1800)[:n] - 900).to(getattr(torch, dtype)).cuda()  # never the start value
    prev = torch.zeros_like(x)
    final = torch.zeros(1, dtype=x.dtype, device="cuda")
    K.running_max(n, kind, dtype)(x, prev, final)
    xs, ps = x.long().tolist(), prev.long().tolist()
    start = -1000 if kind == "max" else 1000
    better = (lambda a, b: a > b) if kind == "max" else (lambda a, b: a < b)
    assert int(final.long()) == (max if kind == "max" else min)([start, *xs])
    assert start in ps
    where = {v: i for i, v in enumerate(xs)}
    for i, p in enumerate(ps):
        assert p != xs[i]
        if p != start:
            assert better(p, ps[where[p]]), (i, p)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64"])
def test_block_level_add_returns_each_partial_sum_once(dtype: str) -> None:
    blocks = 200
    tdt = getattr(torch, dtype)
    x = torch.randint(1, 3, (blocks, 64), device="cuda").to(tdt)  # positive sums: the partial sums grow
    acc = torch.zeros(1, dtype=tdt, device="cuda")
    before = torch.zeros(blocks, dtype=tdt, device="cuda")
    K.block_sums_with_prev(blocks, dtype=dtype)(x, acc, before)
    sums = x.double().sum(1)
    # the blocks came in some order (the partial sums grow), each saw what the one before left:
    # its value plus its block's sum, rounded once to the dtype (exact for float32 and int64 here)
    order = torch.argsort(before.double()).tolist()
    seen = before.cpu()
    step = sums.to(tdt).cpu()
    assert float(seen[order[0]]) == 0
    for prev, nxt in zip(order, order[1:]):
        assert seen[nxt] == seen[prev] + step[prev], (prev, nxt)
    assert acc.cpu()[0] == seen[order[-1]] + step[order[-1]]
    if dtype in ("float32", "int64"):
        assert float(acc.double()) == float(sums.sum())
