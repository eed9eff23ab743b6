"""tilelang_x.cdiv / tilelang_x.next_power_of_2: TileLang's integer helpers for tile sizes."""

from __future__ import annotations

import pytest

import tilelang_x as tilelang


@pytest.mark.parametrize(("a", "b", "want"), [(0, 4, 0), (1, 4, 1), (8, 4, 2), (9, 4, 3), (8192, 8192, 1)])
def test_cdiv(a: int, b: int, want: int) -> None:
    assert tilelang.cdiv(a, b) == want
    assert tilelang.math.cdiv(a, b) == want


@pytest.mark.parametrize(("x", "want"), [(0, 1), (1, 1), (2, 2), (3, 4), (200, 256), (8192, 8192), (2**40 + 1, 2**41)])
def test_next_power_of_2(x: int, want: int) -> None:
    assert tilelang.next_power_of_2(x) == want
