# Kernel code is written as users write it (unused block and loop variables included).
# ruff: noqa: F841, F842, B007
"""TileLang's frontend sugar: ``T.Ref``, ``T.inline`` and ``T.meta_class``.

Each lowers to IR the frontend already builds (loads, stores, inlined macro bodies); the kernels
run in the interpreter against torch and one per construct goes through the CUDA backend.
"""

from __future__ import annotations

import torch

import tilelang_x
import tilelang_x.language as T
from tests.null.cuda_helpers import cuda_source
from tests.null.located import located_errors
from tilelang_x.core_ir.buffer import Buffer
from tilelang_x.core_ir.errors import TileLangSyntaxError
from tilelang_x.core_ir.stmt import Alloc, Store
from tilelang_x.core_ir.visit import walk
from tilelang_x.frontend.meta import InlineMethod
from tilelang_x.frontend.ref import ref_params

where, raises = located_errors(__file__)


def nodes(func, kind):
    return [n for n in walk(func.body) if isinstance(n, kind)]


# ---- T.Ref ------------------------------------------------------------------------------------

@T.prim_func
def row_sums(A: T.Tensor((8, 16), T.float32), B: T.Tensor((8,), T.float32)):
    with T.Kernel(8, threads=32) as bx:
        r = T.Ref(B[bx])
        r = 0.0
        for j in T.serial(16):
            r += A[bx, j]
        r = r * 2.0 + 1.0


def test_ref_reads_and_assigns_one_element():
    a = torch.randn(8, 16)
    b = torch.zeros(8)
    tilelang_x.compile(row_sums, target="interp")(a, b)
    torch.testing.assert_close(b, a.sum(1) * 2 + 1)
    stores = nodes(row_sums, Store)
    assert {s.buffer.name for s in stores} == {"B"} and len(stores) == 3
    assert not nodes(row_sums, Alloc)  # a reference is no variable: it stores to B directly


def test_ref_reading_a_reference_name_gives_the_value():
    @T.prim_func
    def main(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            r = T.Ref(A[1])
            s = r  # the value of A[1], not a second reference
            s = 7.0  # rebinds s
            A[0] = s
            if r == 0.0:
                r = 3.0

    a = torch.zeros(4)
    tilelang_x.compile(main, target="interp")(a)
    assert a.tolist() == [7.0, 3.0, 0.0, 0.0]


@T.macro
def add_capped(dst: T.Ref, value, cap):
    dst += value
    if dst > cap:
        dst = cap


@T.macro
def put_then_advance(slot: T.Ref, k, value):
    k += 1
    slot = value


def test_ref_macro_parameter_assigns_the_callers_element():
    @T.prim_func
    def main(A: T.Tensor((4, 8), T.float32), B: T.Tensor((4,), T.float32), C: T.Tensor((4,), T.float32)):
        with T.Kernel(4, threads=32) as bx:
            acc = T.alloc_var(T.float32, 0.0)
            for j in T.serial(8):
                add_capped(B[bx], A[bx, j], 3.0)
                add_capped(acc, A[bx, j], 2.0)  # a T.alloc_var is passed by reference
            C[bx] = acc

    a = torch.rand(4, 8)
    b = torch.zeros(4)
    c = torch.zeros(4)
    tilelang_x.compile(main, target="interp")(a, b, c)
    want_b, want_c = torch.zeros(4), torch.zeros(4)
    for i in range(4):
        for j in range(8):
            want_b[i] = min(want_b[i] + a[i, j], 3.0)
            want_c[i] = min(want_c[i] + a[i, j], 2.0)
    torch.testing.assert_close(b, want_b)
    torch.testing.assert_close(c, want_c)


def test_ref_argument_indices_are_fixed_at_the_call():
    @T.prim_func
    def main(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            k = T.alloc_var(T.int32, 0)
            for i in T.serial(3):
                put_then_advance(A[k], k, i + 1.0)

    a = torch.zeros(4)
    tilelang_x.compile(main, target="interp")(a)
    assert a.tolist() == [1.0, 2.0, 3.0, 0.0]
    assert "ref_index" in {n.buffer.name for n in nodes(main, Alloc)}


def test_ref_annotation_objects_and_strings():
    def f(x, y, z):
        pass

    f.__annotations__ = {"x": T.Ref, "y": "T.Ref", "z": "T.FragmentBuffer((64, 64), T.float32)"}
    assert ref_params(f, None) == {"x", "y"}


def test_ref_kernel_compiles_for_cuda_unchanged():
    source, _ = cuda_source(row_sums, "sm_90a")
    assert "B[" in source


# ---- T.meta_class and T.inline ----------------------------------------------------------------

@T.meta_class
class Counter:
    """A trace-time helper holding one T.alloc_var of state."""

    def __init__(self, prefix: str, start, step: int) -> None:
        self.count = T.alloc_var(T.int32, start)
        self.step = step

    def advance(self):  # stores: inlined
        self.count[0] = self.count[0] + self.step

    def value(self):  # no store: a plain Python method
        return self.count * 10

    @T.inline
    def cap(self, hi):  # branches on a symbolic value: marked explicitly
        if self.count > hi:
            self.count[0] = hi


def test_meta_class_inlines_storing_methods_only():
    assert isinstance(Counter.__dict__["advance"], InlineMethod)
    assert isinstance(Counter.__dict__["cap"], InlineMethod)
    assert not isinstance(Counter.__dict__["value"], InlineMethod)


@T.prim_func
def counters(B: T.Tensor((4, 5), T.int32)):
    with T.Kernel(4, threads=32) as bx:
        c = Counter("sched", bx, 2)
        for i in T.serial(5):
            c.advance()
            c.cap(7)
            B[bx, i] = c.value()


def test_meta_class_state_in_the_interpreter():
    b = torch.zeros(4, 5, dtype=torch.int32)
    tilelang_x.compile(counters, target="interp")(b)
    want = torch.zeros(4, 5, dtype=torch.int32)
    for s in range(4):
        count = s
        for i in range(5):
            count = min(count + 2, 7)
            want[s, i] = count * 10
    assert torch.equal(b, want)
    assert [a.buffer.name for a in nodes(counters, Alloc)] == ["sched_count"]


class Tile:
    """T.inline on an ordinary class: the method traces where it is called."""

    def __init__(self, buf: Buffer, row) -> None:
        self.buf = buf
        self.row = row

    @T.inline
    def scale(self, factor):
        for j in T.Parallel(8):
            if j % 2 == 0:
                self.buf[self.row, j] = self.buf[self.row, j] * factor


@T.prim_func
def scale_even(A: T.Tensor((4, 8), T.float32)):
    with T.Kernel(4, threads=32) as bx:
        Tile(A, bx).scale(3.0)


def test_inline_method_in_the_interpreter():
    a = torch.rand(4, 8)
    want = a.clone()
    want[:, ::2] *= 3
    tilelang_x.compile(scale_even, target="interp")(a)
    torch.testing.assert_close(a, want)


def test_meta_class_and_inline_compile_for_cuda_unchanged():
    assert "sched_count" in cuda_source(counters, "sm_90a")[0]
    assert "A[" in cuda_source(scale_even, "sm_90a")[0]


# ---- misuse -----------------------------------------------------------------------------------

def test_ref_of_a_region():
    def build():
        @T.prim_func
        def main(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1) as bx:
                r = T.Ref(A[0:4])  # E:ref-region

    raises(TileLangSyntaxError, "ref-region", build, "T.Ref takes one buffer element", "Region")


def test_ref_of_a_number():
    def build():
        @T.prim_func
        def main(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1) as bx:
                r = T.Ref(1.0)  # E:ref-number

    raises(TileLangSyntaxError, "ref-number", build, "T.Ref takes one buffer element", "A[i, j]")


def test_ref_parameter_given_a_value():
    def build():
        @T.prim_func
        def main(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1) as bx:
                add_capped(A[0] + 1.0, 1.0, 2.0)  # E:ref-arg

    raises(TileLangSyntaxError, "ref-arg", build, "argument `dst` of `add_capped` is annotated T.Ref")


def test_ref_unsupported_augmented_operator():
    def build():
        @T.prim_func
        def main(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1) as bx:
                r = T.Ref(A[0])
                r @= 2.0  # E:ref-matmul

    raises(TileLangSyntaxError, "ref-matmul", build, "`@=` on a T.Ref")


def test_ref_annotation_that_does_not_evaluate():
    @T.macro
    def bad(x: U.Ref):  # noqa: F821  # E:ref-ann
        x = 1.0

    def build():
        @T.prim_func
        def main(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1) as bx:
                bad(A[0])

    raises(TileLangSyntaxError, "ref-ann", build, "cannot evaluate the annotation 'U.Ref'")


def test_inline_method_called_through_the_class():
    def build():
        @T.prim_func
        def main(A: T.Tensor((4, 8), T.float32)):
            with T.Kernel(4) as bx:
                Tile.scale(Tile(A, bx), 2.0)  # E:inline-unbound

    raises(TileLangSyntaxError, "inline-unbound", build, "`scale` is a T.inline method", "obj.scale(...)")


def test_inline_and_meta_class_on_the_wrong_things():
    raises(TileLangSyntaxError, "inline-value", lambda: T.inline(3), "@T.inline decorates a method")  # E:inline-value
    raises(TileLangSyntaxError, "meta-value", lambda: T.meta_class(len), "decorates a class")  # E:meta-value
