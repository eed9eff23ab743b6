"""TVMScript's statement if (``T.If`` / ``T.Then`` / ``T.Else``): a Python-valued condition, and
the misplaced blocks, each a TileLangSyntaxError at its line."""

from __future__ import annotations

import pytest
import torch

import tilelang_x
import tilelang_x.language as T
from tilelang_x.core_ir.errors import TileLangSyntaxError


def _kernel(body):
    @T.prim_func
    def main(Y: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32):
            body(Y)

    return main


def _python_conditions(Y):
    with T.If(False), T.Then():
        Y[0] = 1.0
    with T.If(2 > 1):
        with T.Then():
            Y[1] = 2.0
        with T.Else():
            Y[1] = 3.0


def test_a_python_condition_is_a_constant_if_not_a_skipped_body() -> None:
    y = torch.zeros(4)
    tilelang_x.compile(_kernel(_python_conditions), target="interp")(y)
    assert y.tolist() == [0.0, 2.0, 0.0, 0.0]


def _then_alone(Y):
    with T.Then():  # misplaced
        Y[0] = 1.0


def _no_then(Y):
    with T.If(Y[0] > 0):  # misplaced
        Y[0] = 1.0


def _else_first(Y):
    with T.If(Y[0] > 0):
        with T.Else():  # misplaced
            Y[0] = 1.0


@pytest.mark.parametrize(("body", "match"), [
    (_then_alone, "must be directly inside `with T.If"),
    (_no_then, "has no `with T.Then"),
    (_else_first, "before `with T.Then"),
])
def test_misplaced_blocks_are_syntax_errors(body, match: str) -> None:
    with pytest.raises(TileLangSyntaxError, match=match) as info:
        _kernel(body)
    assert "# misplaced" in open(info.value.loc.file).read().splitlines()[info.value.loc.line - 1]
