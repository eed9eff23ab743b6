"""The interpreter's check for data races between the blocks of one launch on global memory
(plugins/interp/races.py): what it reports, with which lines, and what it lets pass."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels import grid
from tests.null.located import located_errors
from tilelang_x import knobs
from tilelang_x.core_ir.errors import RaceError

where, raises = located_errors(__file__)


@pytest.fixture(autouse=True)
def _check_on() -> Iterator[None]:
    """The check on, whatever TILELANG_X_INTERP_RACE_CHECK says in the environment."""
    with knobs.scope(interp_race_check=True):
        yield

#: Two sequences of rows, [0, 5) and [5, 12), one block each, as in varlen attention.
STARTS = torch.tensor([0, 5, 12], dtype=torch.int32)


def _interp(func: object, **configs: object) -> object:
    return tilelang.compile(func, target="interp", pass_configs=configs or None)


def _rows(block_m: int, guard: bool, same: bool = False, slack: int = 0) -> object:
    """Each block scales its sequence's rows of X into Y, a whole ``block_m``-row tile at a time
    (``same``: every block by 2, else block ``bx`` by ``bx + 1``). Unguarded, block 0's tile runs
    past its sequence into rows block 1 stores; ``slack``: the guard lets that many rows more."""

    @T.prim_func
    def main(X: T.Tensor((12, 8), T.float32), Starts: T.Tensor((3,), T.int32), Y: T.Tensor((12, 8), T.float32)):
        with T.Kernel(2, threads=32) as bx:
            s = Starts[bx]
            e = Starts[bx + 1]
            t = T.alloc_fragment((block_m, 8), T.float32)
            T.copy(X[s, 0], t)
            for i, j in T.Parallel(block_m, 8):
                t[i, j] = t[i, j] * (2.0 if same else T.cast(bx + 1, T.float32))
            if guard:
                for i, j in T.Parallel(block_m, 8):
                    if s + i < T.min(e + slack, 12):
                        Y[s + i, j] = t[i, j]  # E:element_store
            else:
                T.copy(t, Y[s, 0])  # E:tile_store

    return main


def _expected(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x[:5] * 1, x[5:] * 2])


def test_blocks_storing_overlapping_row_tiles_race() -> None:
    x = torch.randn(12, 8)
    err = raises(RaceError, "tile_store", lambda: _interp(_rows(8, guard=False))(x, STARTS, torch.zeros(12, 8)),
                 "block (1) stores to `Y`[5, 0]", "block (0) also stores to", "T.atomic_add")
    assert f"{where('tile_store')[:-1]}) in the same launch" in str(err)  # the other store's line too
    assert "guard the store" in (err.hint or "")


def test_the_same_kernel_guarded_by_each_row_s_bound_passes() -> None:
    x, y = torch.randn(12, 8), torch.zeros(12, 8)
    _interp(_rows(8, guard=True))(x, STARTS, y)
    torch.testing.assert_close(y, _expected(x))


def test_an_off_by_one_guard_on_element_stores_races() -> None:
    """The per-lane (scatter) path: block 0's guard lets row 5 through, which block 1 owns."""
    raises(RaceError, "element_store",
           lambda: _interp(_rows(8, guard=True, slack=1))(torch.randn(12, 8), STARTS, torch.zeros(12, 8)),
           "block (1) stores to `Y`[5, 0], which block (0) also stores to")


def test_blocks_storing_the_same_values_do_not_race() -> None:
    """The documented rule: a store that leaves the element's bits unchanged conflicts with nothing."""
    x, y = torch.randn(12, 8), torch.zeros(12, 8)
    _interp(_rows(8, guard=False, same=True))(x, STARTS, y)
    torch.testing.assert_close(y, x * 2)


def test_the_check_can_be_turned_off() -> None:
    x, y = torch.randn(12, 8), torch.zeros(12, 8)
    _interp(_rows(8, guard=False), **{"tlx.interp_race_check": False})(x, STARTS, y)
    torch.testing.assert_close(y[:5], x[:5])  # block 1 ran last: its rows win
    with knobs.scope(interp_race_check=False):
        _interp(_rows(8, guard=False))(x, STARTS, y)
    with knobs.scope(interp_race_check=False), pytest.raises(RaceError):  # the pass config wins over the knob
        _interp(_rows(8, guard=False), **{"tlx.interp_race_check": True})(x, STARTS, y)


def _block_sums(atomic: bool) -> object:
    @T.prim_func
    def main(X: T.Tensor((4, 16), T.float32), Out: T.Tensor((2,), T.float32)):
        with T.Kernel(4, threads=32) as bx:
            row = T.alloc_fragment((16,), T.float32)
            total = T.alloc_fragment((1,), T.float32)
            T.copy(X[bx, 0], row)
            T.reduce_sum(row, total, dim=0)
            if atomic:
                T.atomic_add(Out[0], total[0])
                for i in T.Parallel(16):
                    T.atomic_add(Out[1], row[i])
            else:
                Out[0] = Out[0] + total[0]  # E:plain_sum

    return main


def test_atomic_sums_over_blocks_pass() -> None:
    x, out = torch.randn(4, 16), torch.zeros(2)
    _interp(_block_sums(atomic=True))(x, out)
    torch.testing.assert_close(out, x.sum().repeat(2), atol=1e-5, rtol=1e-5)


def test_a_plain_read_modify_write_over_blocks_races() -> None:
    raises(RaceError, "plain_sum", lambda: _interp(_block_sums(atomic=False))(torch.randn(4, 16), torch.zeros(2)),
           "block (1) reads `Out`[0], which block (0) stores to")


def test_reading_other_blocks_output_across_a_grid_sync_passes() -> None:
    x = torch.rand(32, 16, generator=torch.Generator().manual_seed(3))
    y = _interp(grid.normalize.get_ir(32, 16))(x, torch.zeros(32))
    torch.testing.assert_close(y, x / x.sum())


def _total_without_barrier(sync: bool) -> object:
    @T.prim_func
    def main(X: T.Tensor((4,), T.float32), Partial: T.Tensor((4,), T.float32), Y: T.Tensor((4,), T.float32)):
        with T.Kernel(4, threads=32) as bx:
            Partial[bx] = X[bx] * 2.0  # E:partial_store
            if sync:
                T.sync_grid()
            Y[bx] = Partial[(bx + 3) % 4]  # E:neighbour_read

    return main


def test_reading_another_block_s_output_without_a_grid_sync_races() -> None:
    """Block 1 reads Partial[0], which block 0 stored earlier; on a GPU it may run first."""
    x = torch.arange(4, dtype=torch.float32)
    err = raises(RaceError, "neighbour_read",
                 lambda: _interp(_total_without_barrier(False))(x, torch.zeros(4), torch.zeros(4)),
                 "block (1) reads `Partial`[0], which block (0) stores to", where("partial_store")[:-1])
    assert "T.sync_grid()" in (err.hint or "")


def test_a_store_to_what_another_block_read_races() -> None:
    """Block 0 reads Partial[1] before block 1 stores it: reported at the store."""

    @T.prim_func
    def main(Partial: T.Tensor((2,), T.float32), Y: T.Tensor((2,), T.float32)):
        with T.Kernel(2, threads=32) as bx:
            if bx == 0:
                Y[0] = Partial[1]  # E:early_read
            else:
                Partial[1] = 1.0  # E:late_store

    err = raises(RaceError, "late_store", lambda: _interp(main)(torch.zeros(2), torch.zeros(2)),
                 "block (1) stores to `Partial`[1], which block (0) reads", where("early_read")[:-1])
    assert "T.sync_grid()" in (err.hint or "")


def test_the_same_kernel_with_a_grid_sync_passes() -> None:
    x, y = torch.arange(4, dtype=torch.float32), torch.zeros(4)
    _interp(_total_without_barrier(True))(x, torch.zeros(4), y)
    torch.testing.assert_close(y, torch.roll(x, 1) * 2)


def test_a_plain_store_to_what_another_block_updates_atomically_races() -> None:
    @T.prim_func
    def main(Out: T.Tensor((1,), T.float32)):
        with T.Kernel(2, threads=32) as bx:
            if bx == 0:
                T.atomic_add(Out[0], 1.0)  # E:atomic
            else:
                Out[0] = 5.0  # E:plain_after_atomic

    raises(RaceError, "plain_after_atomic", lambda: _interp(main)(torch.zeros(1)),
           "block (1) stores to `Out`[0], which block (0) atomically updates", where("atomic")[:-1])


def test_a_race_after_a_grid_sync_is_still_reported() -> None:
    """The barrier forgets what came before it, not what comes after."""

    @T.prim_func
    def main(Out: T.Tensor((2,), T.float32)):
        with T.Kernel(2, threads=32) as bx:
            Out[bx] = 1.0
            T.sync_grid()
            Out[0] = T.cast(bx, T.float32)  # E:after_barrier

    raises(RaceError, "after_barrier", lambda: _interp(main)(torch.zeros(2)),
           "block (1) stores to `Out`[0], which block (0) also stores to")


def test_blocks_ordered_by_flags_are_not_checked() -> None:
    """A kernel that reads T.atomic_load may order its blocks through flags, which the check does not
    model: block 1 reads what block 0 published before raising its flag, and that is correct."""

    @T.prim_func
    def main(Data: T.Tensor((2,), T.float32), Flags: T.Tensor((2,), T.int32), Y: T.Tensor((2,), T.float32)):
        with T.Kernel(2, threads=32) as bx:
            Data[bx] = T.cast(bx + 1, T.float32)
            T.atomic_store(Flags[bx], 1, memory_order="release")
            if bx > 0:
                while T.atomic_load(Flags[bx - 1], memory_order="acquire") == 0:
                    pass
                Y[bx] = Data[bx - 1]

    y = torch.zeros(2)
    _interp(main)(torch.zeros(2), torch.zeros(2, dtype=torch.int32), y)
    assert y.tolist() == [0.0, 1.0]
