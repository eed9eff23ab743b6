"""Layouts and fragments: construction in TileLang's spellings, mapping, output shapes,
bijectivity, inverses (round trip by enumeration) and the bank-conflict-free swizzle."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir.buffer import Buffer
from tilelang_x.core_ir.errors import LayoutError
from tilelang_x.core_ir.expr import Const, Var, as_int
from tilelang_x.core_ir.layout import (
    Fragment,
    Layout,
    make_fully_replicated_layout_fragment,
    make_half_bank_swizzled_layout,
    make_linear_layout,
    make_swizzled_layout,
)
from tilelang_x.core_ir.simplify import evaluate


def ints(exprs) -> tuple[int, ...]:
    out = tuple(as_int(e) for e in exprs)
    assert None not in out, exprs
    return out  # type: ignore[return-value]


def table(layout: Layout) -> dict[tuple[int, ...], tuple[int, ...]]:
    shape = ints(layout.input_shape)
    return {idx: ints(layout.map(idx)) for idx in itertools.product(*[range(s) for s in shape])}


def round_trip(layout: Layout) -> None:
    inv = layout.inverse()
    assert ints(inv.input_shape) == ints(layout.output_shape)
    for idx, phys in table(layout).items():
        assert ints(inv.map(phys)) == idx


# ---- Layout ---------------------------------------------------------------------------------

def test_layout_from_function_maps_and_shapes() -> None:
    lay = Layout((16, 8), lambda i, j: i * 8 + j)
    assert ints(lay.output_shape) == (128,)
    assert ints(lay.map((2, 3))) == (19,)
    i = Var("r")
    assert str(lay(i, 1)[0]) == "r * 8 + 1"
    assert lay.is_bijective()
    assert ints(lay.get_input_shape()) == (16, 8) and len(lay.get_forward_vars()) == 2


def test_layout_from_expressions_over_given_vars() -> None:
    a, b = Var("a"), Var("b")
    lay = Layout((4, 4), (b, a), vars=(a, b))
    assert table(lay)[(1, 3)] == (3, 1)
    with pytest.raises(LayoutError):
        Layout((4, 4), (a,), vars=(a,))


def test_transpose_and_tiled_layouts_invert() -> None:
    round_trip(Layout((16, 8), lambda i, j: (j, i)))
    round_trip(make_linear_layout((4, 8, 16)))
    round_trip(Layout((32, 32), lambda i, j: (i // 8, j // 8, i % 8, j % 8)))
    round_trip(Layout((16, 16), lambda i, j: j * 16 + i))
    col = Layout((16, 8), lambda i, j: j * 16 + i).inverse()
    assert str(col) == "T.Layout((128,), lambda i: (i % 16, i // 16))"


def test_non_bijective_layouts_are_reported() -> None:
    pad = Layout((8, 8), lambda i, j: i * 9 + j)  # a padded row
    assert not pad.is_bijective()
    with pytest.raises(LayoutError, match="cannot invert"):
        pad.inverse()
    squash = Layout((8, 8), lambda i, j: (i + j) % 8)
    assert not squash.is_bijective()
    with pytest.raises(LayoutError):
        squash.inverse()


def test_output_shape_of_symbolic_layout() -> None:
    m = Var("m")
    lay = Layout((m, 32), lambda i, j: i * 32 + j)
    assert str(lay.output_shape[0]) == "m * 32"
    assert Layout((m, 32), lambda i, j: (j, i)).output_shape[1] is m
    with pytest.raises(LayoutError):
        lay.is_bijective()


def test_linear_index_and_equality() -> None:
    lay = Layout((4, 8), lambda i, j: (j, i))
    assert as_int(lay.linear_index((1, 2))) == 2 * 4 + 1
    same = Layout((4, 8), lambda p, q: (q, p))
    assert lay == same and hash(lay) == hash(same)
    assert lay != Layout((4, 8), lambda i, j: (i, j))
    assert repr(lay) == "T.Layout((4, 8), lambda i, j: (j, i))"


def test_repr_is_deterministic() -> None:
    assert repr(make_swizzled_layout((8, 64), 16)) == repr(make_swizzled_layout((8, 64), 16))


# ---- swizzles -------------------------------------------------------------------------------

def _addresses(lay: Layout, elem_bytes: int) -> dict[tuple[int, ...], int]:
    """Byte address of every element in the row-major physical tile."""
    shape = ints(lay.output_shape)
    out = {}
    for idx, phys in table(lay).items():
        flat = 0
        for p, d in zip(phys, shape):
            flat = flat * d + p
        out[idx] = flat * elem_bytes
    return out


@pytest.mark.parametrize("shape, bits", [((8, 64), 16), ((16, 64), 16), ((64, 32), 16), ((32, 128), 8),
                                         ((16, 32), 32), ((2, 8, 64), 16), ((8, 16), 16)])
def test_swizzle_is_a_bijection_that_keeps_chunks_and_inverts(shape, bits) -> None:
    lay = make_swizzled_layout(shape, bits)
    assert ints(lay.output_shape) == shape
    assert lay.is_bijective()
    per_chunk = 128 // bits
    addr = _addresses(lay, bits // 8)
    for idx, a in addr.items():
        if idx[-1] % per_chunk:
            continue
        first = a
        assert first % 16 == 0
        for t in range(per_chunk):  # the elements of a 16-byte chunk stay together, in order
            assert addr[idx[:-1] + (idx[-1] + t,)] == first + t * bits // 8
    round_trip(lay)


def test_swizzle_spreads_rows_of_an_8x64_fp16_tile_over_all_banks() -> None:
    buf = Buffer("A_s", (8, 64), dtypes.float16, "shared")
    lay = make_swizzled_layout(buf)
    addr = _addresses(lay, 2)
    for chunk in range(8):  # ldmatrix reads one 16-byte chunk from each of 8 rows
        groups = {(addr[(r, chunk * 8)] // 16) % 8 for r in range(8)}
        assert len(groups) == 8, f"chunk {chunk}: rows share bank groups {groups}"
        banks = {(addr[(r, chunk * 8)] // 4 + w) % 32 for r in range(8) for w in range(4)}
        assert len(banks) == 32
    # without the swizzle every row's chunk would sit in the same banks
    plain = Layout((8, 64), lambda i, j: (i, j))
    assert len({(a // 16) % 8 for (r, c), a in _addresses(plain, 2).items() if c == 0}) == 1


@pytest.mark.parametrize("shape", [(64, 32), (32, 64), (64, 64)])
def test_swizzle_is_conflict_free_for_any_8_consecutive_rows(shape) -> None:
    lay = make_swizzled_layout(shape, 16)
    addr = _addresses(lay, 2)
    rows, cols = shape
    for r0 in range(0, rows, 8):
        for chunk in range(cols // 8):
            groups = {(addr[(r0 + r, chunk * 8)] // 16) % 8 for r in range(8)}
            assert len(groups) == 8


def test_swizzle_width_and_fallbacks() -> None:
    assert str(make_half_bank_swizzled_layout((8, 64), 16)) != str(make_swizzled_layout((8, 64), 16))
    narrow = make_swizzled_layout((8, 8), 16)  # 16-byte rows: nothing to swizzle
    assert table(narrow)[(3, 5)] == (3, 5)
    with pytest.raises(LayoutError):
        make_swizzled_layout((Var("m"), 64), 16)
    with pytest.raises(LayoutError):
        make_swizzled_layout((8, 64))  # a shape needs dtype_bits


# ---- Fragment -------------------------------------------------------------------------------

def test_fragment_forward_fn_and_split_form_agree() -> None:
    def mapping(i, j):
        linear = i * 32 + j
        return (linear // 4) % 128, (linear // (128 * 4)) * 4 + linear % 4

    a = Fragment((128, 32), forward_fn=mapping)
    b = Fragment((128, 32), forward_thread_fn=lambda i, j: mapping(i, j)[0],
                 forward_index_fn=lambda i, j: mapping(i, j)[1])
    assert a == b
    assert a.thread_count == 128 and a.get_thread_size() == 128
    assert a.locals_per_thread == 32
    assert a.is_bijective()
    assert as_int(a.map_thread((1, 5))) == (32 + 5) // 4
    assert ints(a.map_index((1, 5))) == (1,)


def test_replicated_fragment() -> None:
    def rep_map(i, j, rep):
        linear = i * 32 + j
        return (linear // 4) % 64 + rep * 64, (linear // (64 * 4)) * 4 + linear % 4

    f = Fragment((128, 32), forward_fn=rep_map, replicate=2)
    assert f.replicate == 2 and f.thread_count == 128 and f.locals_per_thread == 64
    assert f.is_bijective()
    assert as_int(f.map_thread((0, 0), rep=1)) == 64
    assert "replicate=2" in repr(f)
    full = make_fully_replicated_layout_fragment(Buffer("s", (2,), dtypes.float32, "fragment"), 256)
    assert full.thread_count == 256 and full.locals_per_thread == 2 and full.is_bijective()


def test_fragment_with_unequal_ownership_is_not_bijective() -> None:
    f = Fragment((16,), forward_thread_fn=lambda i: i // 2, forward_index_fn=lambda i: 0)
    assert f.thread_count == 8 and not f.is_bijective()


def test_fragment_from_expressions_for_backends() -> None:
    i, j, lane = Var("i"), Var("j"), Var("lane")
    f = Fragment((8, 8), forward_thread=i * 4 + j // 2, forward_index=j % 2, vars=(i, j))
    assert f.thread_count == 32 and f.locals_per_thread == 2 and f.is_bijective()
    assert str(f.map_thread((lane // 4, (lane % 4) * 2))) == "lane"


@pytest.mark.parametrize(("shape", "thread", "index"), [
    ((8, 128), lambda i, j: (i // 2) * 32 + j % 32, "i % 2 * 4 + j // 32"),  # TileLang's per-token cast
    ((128,), lambda i: i, "0"),
    ((4, 64), lambda i, j: j, "i"),
    ((16,), lambda i: (i // 4) % 2, "i % 4 + i // 8 * 4"),
])
def test_fragment_register_index_is_inferred_from_the_thread_map(shape, thread, index: str) -> None:
    """Given only forward_thread_fn, the register index is the digits of the indices the thread
    map does not read, flattened (TileLang's rule)."""
    f = Fragment(shape, forward_thread_fn=thread)
    assert str(f.forward[0]) == index
    assert f.is_bijective() or f.thread_count * f.locals_per_thread > math.prod(shape)


def test_fragment_errors() -> None:
    with pytest.raises(LayoutError, match="both forward_fn and forward_thread_fn"):
        Fragment((4,), lambda i: (i, 0), lambda i: i)
    with pytest.raises(LayoutError, match="needs a thread map"):
        Fragment((4,), forward_index_fn=lambda i: i)
    with pytest.raises(LayoutError, match="cannot infer the register index") as info:
        Fragment((4, 4), forward_thread_fn=lambda i, j: (i + j) % 4)
    assert "forward_index_fn" in info.value.hint
    with pytest.raises(LayoutError):
        Fragment((4,), forward_fn=lambda i: (i, 0)).inverse()


def test_enumeration_matches_evaluation() -> None:
    lay = make_swizzled_layout((16, 64), 16)
    i, j = lay.get_forward_vars()
    grid = np.meshgrid(np.arange(16), np.arange(64), indexing="ij")
    cols = evaluate(lay.forward[1], {i: grid[0].reshape(-1), j: grid[1].reshape(-1)})
    assert sorted(cols.tolist()) == sorted(list(range(64)) * 16)
    assert isinstance(lay.output_shape[0], Const)
