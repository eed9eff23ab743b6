"""JITKernel: argument checks, dynamic dims, output allocation (hand-built PrimFuncs)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from tilelang_x.args_fast import fast_path
from tilelang_x.core_ir import Buffer, PrimFunc, Seq, SourceLoc, Var, dtypes
from tilelang_x.core_ir.errors import ArgumentError, TileLangError
from tilelang_x.kernel import JITKernel
from tilelang_x.target import Target

LOC = SourceLoc("/home/user/kernels.py", 12, "add")


class Recorder:
    """A launcher that remembers its calls (and computes ``C = A + B`` when ``add`` is set)."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[Any], dict[str, int]]] = []
        self.add = False

    def __call__(self, args: list[Any], dims: dict[str, int]) -> None:
        self.calls.append((list(args), dict(dims)))
        if self.add:
            args[2][...] = args[0] + args[1]


def add_func(out_idx: tuple[int, ...] = (2,), dtype=dtypes.float32) -> PrimFunc:
    m = Var("M")
    a = Buffer("A", (m, 4), dtype)
    b = Buffer("B", (m, 4), dtype)
    c = Buffer("C", (m, 4), dtype)
    return PrimFunc("add", (a, b, c), Seq(()), out_idx=out_idx, loc=LOC)


def make(func: PrimFunc, out_idx: Any = None, device_type: str = "cpu") -> tuple[JITKernel, Recorder]:
    rec = Recorder()
    kernel = JITKernel(func, Target("interp"), "// source", rec, out_idx, device_type=device_type)
    return kernel, rec


def test_allocates_torch_outputs_like_the_inputs() -> None:
    kernel, rec = make(add_func())
    rec.add = True
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    c = kernel(a, b)
    assert isinstance(c, torch.Tensor) and c.shape == (3, 4) and c.dtype == torch.float32
    torch.testing.assert_close(c, a + b)
    args, dims = rec.calls[0]
    assert args[0] is a and args[1] is b and args[2] is c
    assert dims == {"M": 3}


def test_allocates_numpy_outputs_for_numpy_inputs() -> None:
    kernel, rec = make(add_func(dtype=dtypes.float16))
    rec.add = True
    a = np.ones((5, 4), np.float16)
    c = kernel(a, a)
    assert isinstance(c, np.ndarray) and c.dtype == np.float16 and c.shape == (5, 4)
    assert (c == 2).all()


def test_explicit_outputs_are_not_allocated() -> None:
    kernel, rec = make(add_func())
    a, b, c = torch.ones(2, 4), torch.ones(2, 4), torch.zeros(2, 4)
    assert kernel(a, b, c) is None
    assert rec.calls[0][0][2] is c


def test_out_idx_variants() -> None:
    func = add_func(out_idx=())
    kernel, rec = make(func)
    assert kernel(torch.ones(2, 4), torch.ones(2, 4), torch.ones(2, 4)) is None  # no outputs
    kernel, _ = make(func, out_idx=-1)
    assert kernel.out_idx == (2,)
    kernel, _ = make(func, out_idx=[-2, -1])
    assert kernel.out_idx == (1, 2)
    b, c = kernel(torch.ones(6, 4))
    assert b.shape == c.shape == (6, 4)
    with pytest.raises(TileLangError, match="out_idx 3 is out of range"):
        make(func, out_idx=3)


def test_output_with_unbound_dim_needs_explicit_tensor() -> None:
    m, n = Var("M"), Var("N")
    a = Buffer("A", (m,), dtypes.float32)
    out = Buffer("Out", (n,), dtypes.float32)
    kernel, _ = make(PrimFunc("f", (a, out), Seq(()), out_idx=(1,), loc=LOC))
    with pytest.raises(ArgumentError, match="dimension 0 .`N`. is not set by any input"):
        kernel(torch.ones(3))
    assert kernel(torch.ones(3), torch.ones(7)) is None


def test_derived_output_shape() -> None:
    m = Var("M")
    a = Buffer("A", (m, 2), dtypes.float32)
    out = Buffer("Out", (m * 2 + 1, m // 2), dtypes.int32)
    kernel, _ = make(PrimFunc("f", (a, out), Seq(()), out_idx=(1,), loc=LOC))
    assert kernel(torch.ones(6, 2)).shape == (13, 3)


def test_scalar_parameters() -> None:
    m = Var("M")
    a = Buffer("A", (m,), dtypes.float32)
    alpha = Var("alpha", dtypes.float32)
    n = Var("n", dtypes.int32)
    out = Buffer("Out", (m,), dtypes.float32)
    kernel, rec = make(PrimFunc("f", (a, alpha, n, out), Seq(()), out_idx=(3,), loc=LOC))
    kernel(torch.ones(4), 2, np.int64(5))
    args, dims = rec.calls[0]
    assert args[1] == 2.0 and isinstance(args[1], float) and args[2] == 5
    assert dims == {"M": 4, "n": 5}
    with pytest.raises(ArgumentError, match="`n`.*expected an integer, got float"):
        kernel(torch.ones(4), 2.0, 1.5)
    with pytest.raises(ArgumentError, match="`alpha`.*expected a number, got str"):
        kernel(torch.ones(4), "x", 1)


def test_scalar_must_agree_with_shape_var() -> None:
    m = Var("M")
    a = Buffer("A", (m,), dtypes.float32)
    kernel, _ = make(PrimFunc("f", (a, m), Seq(()), loc=LOC))
    kernel(torch.ones(3), 3)
    with pytest.raises(ArgumentError, match="is 4, but a tensor dimension `M` is 3"):
        kernel(torch.ones(3), 4)


# ---- every mistake names the kernel, its file:line and the parameter -------------------------
@pytest.mark.parametrize(
    "args, match, hint",
    [
        ((torch.ones(3, 4),), r"takes 2 input\(s\) \(A, B\) but got 1", "pass A, B in this order"),
        ((torch.ones(3, 4),) * 4, r"takes 2 input\(s\) \(A, B\) but got 4", "pass all 3 parameters"),
        ((torch.ones(3, 4, dtype=torch.float16), torch.ones(3, 4)),
         r"parameter `A` \(float32\[M, 4\]\): expected dtype float32, got torch.float16", ".to(torch.float32)"),
        ((np.ones((3, 4)), np.ones((3, 4))), "expected dtype float32, got float64", ".astype(numpy.float32)"),
        ((torch.ones(3, 4), torch.ones(3, 4, 1)), "parameter `B`.*expected a 2-d tensor, got 3-d", "reshape"),
        ((torch.ones(3, 4), torch.ones(3, 5)), "parameter `B`.*dimension 1 must be 4, got 5", None),
        ((torch.ones(3, 4), torch.ones(2, 4)),
         "parameter `B`.*dimension 0 is `M` = 2, but another argument set `M` = 3", "agree on `M`"),
        ((torch.ones(3, 4), torch.ones(4, 3).t()), "parameter `B`.*not contiguous", ".contiguous()"),
        ((np.ones((3, 4), np.float32), np.ones((4, 3), np.float32).T), "not contiguous", "ascontiguousarray"),
        ((torch.ones(3, 4), torch.ones(3, 4, device="meta")),
         "parameter `B`.*is on device 'meta', but target interp runs kernels on 'cpu'", ".cpu()"),
        ((torch.ones(3, 4), [[1.0] * 4] * 3), "parameter `B`.*expected a tensor, got list", "numpy array"),
    ],
)
def test_argument_errors(args: tuple[Any, ...], match: str, hint: str | None) -> None:
    kernel, rec = make(add_func())
    with pytest.raises(ArgumentError, match=match) as info:
        kernel(*args)
    text = str(info.value)
    assert text.startswith("/home/user/kernels.py:12: kernel `add`")
    if hint is not None:
        assert hint in info.value.hint
    assert not rec.calls


def test_device_rule_for_gpu_targets() -> None:
    kernel, _ = make(add_func(), device_type="cuda")
    with pytest.raises(ArgumentError, match="is on device 'cpu'.*runs kernels on 'cuda'") as info:
        kernel(torch.ones(3, 4), torch.ones(3, 4))
    assert ".to('cuda')" in info.value.hint
    with pytest.raises(ArgumentError, match="is on device 'cpu'"):
        kernel(np.ones((3, 4), np.float32), np.ones((3, 4), np.float32))


def test_device_type_comes_from_the_target(fresh_registry: None) -> None:
    from tilelang_x.kernel import device_type_of

    assert device_type_of(Target("interp")) == "cpu"
    assert device_type_of(Target("cuda", "sm_90a")) == "cuda"
    assert device_type_of(Target("hip", "gfx942")) == "cuda"
    assert device_type_of(Target("metal")) == "mps"
    assert device_type_of(Target("ascend", "dav-3510")) == "npu"


def test_kernel_surface() -> None:
    kernel, _ = make(add_func())
    assert kernel.get_kernel_source() == "// source"
    assert kernel.name == "add" and len(kernel.params) == 3
    assert "kernels.py:12" in repr(kernel)


# ---- the generated fast path agrees with the full checks --------------------------------------
def _bind_slow(kernel: JITKernel, args: tuple[Any, ...]) -> Any:
    binder = kernel._binder
    saved = binder._fast, binder._fast_ready
    binder._fast, binder._fast_ready = None, True
    try:
        return binder.bind(args)
    except ArgumentError:
        return "error"
    finally:
        binder._fast, binder._fast_ready = saved


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
        return isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape == y.shape \
            and x.dtype == y.dtype and x.device == y.device
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    return x == y and type(x) is type(y)


def test_fast_path_agrees_with_full_checks() -> None:
    m = Var("M")
    a = Buffer("A", (m, 4), dtypes.float16)
    alpha = Var("alpha", dtypes.float32)
    out = Buffer("Out", (m, 4), dtypes.float16)
    func = PrimFunc("f", (a, alpha, m, out), Seq(()), out_idx=(3,), loc=LOC)
    kernel, _ = make(func)
    h = torch.ones(3, 4, dtype=torch.float16)
    cases = [
        (h, 1.5, 3), (h, 2, 3), (h, 2, 4), (h, True, 3), (h, 1.0, 3.0), (h, 1.0, True),
        (h.float(), 1.0, 3), (h.t(), 1.0, 4), (h[:, :2], 1.0, 3), (torch.nn.Parameter(h), 1.0, 3),
        (h.numpy(), 1.0, 3), (h, 1.0), (h, 1.0, 3, torch.empty(3, 4, dtype=torch.float16)),
        (h, 1.0, 3, torch.empty(2, 4, dtype=torch.float16)), (h, 1.0, 3, torch.empty(3, 4)),
        (torch.ones(0, 4, dtype=torch.float16), 1.0, 0),
    ]
    kernel(h, 1.0, 3)  # the fast path is generated on the first call
    fast = fast_path(kernel._binder)
    assert fast is not None
    for args in cases:
        slow = _bind_slow(kernel, args)
        quick = fast(args)
        if quick is None:
            continue  # the full checks decide (and may accept: numpy, Parameter, bool, ...)
        assert slow != "error", f"fast path accepted {args!r} that the full checks reject"
        assert _same(list(quick[0]), list(slow[0])) and quick[1] == slow[1] and _same(quick[2], slow[2])
    assert fast((h, 1.0, 3)) is not None  # the common case really is fast
    _check_fused(kernel, cases, (h, 1.0, 3))


class OrderedRecorder(Recorder):
    """A launcher that takes its dims as a tuple ordered like ``dim_names``."""

    def __init__(self, dim_names: tuple[str, ...]) -> None:
        super().__init__()
        self.dim_names = dim_names

    def __call__(self, args: list[Any], dims: Any) -> None:
        self.calls.append((list(args), dims if isinstance(dims, dict) else dict(zip(self.dim_names, dims))))


def _outcome(call: Any, rec: Recorder, args: tuple[Any, ...]) -> Any:
    rec.calls.clear()
    try:
        result = call(args)
    except ArgumentError as e:
        return "error", str(e)
    return result, rec.calls[:]


def _same_output(x: Any, y: Any) -> bool:
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.shape == y.shape and x.dtype == y.dtype
    return _same(x, y)


def _check_fused(kernel: JITKernel, cases: list[tuple[Any, ...]], common: tuple[Any, ...],
                 dim_names: tuple[str, ...] = ("M",)) -> None:
    """The fused check-and-launch path does what the full checks and the launcher do."""
    for rec in (Recorder(), OrderedRecorder(dim_names)):
        kernel.launcher = rec
        kernel(*common)
        assert kernel._call != kernel._checked_call and "launcher(" in kernel._call.source
        for args in [*cases, common]:
            fused = _outcome(kernel._call, rec, args)
            full = _outcome(kernel._checked_call, rec, args)
            if isinstance(full[0], str):
                assert fused == full, args
            else:
                assert _same_output(fused[0], full[0]), args
                assert len(fused[1]) == len(full[1]) == 1
                assert all(_same_output(a, b) for a, b in zip(fused[1][0][0], full[1][0][0]))
                assert fused[1][0][1] == full[1][0][1], args


# ---- declared strides (T.StridedTensor) ---------------------------------------------------------
def strided_func() -> PrimFunc:
    m, s = Var("M"), Var("s")
    a = Buffer("A", (m, 4), dtypes.float32, strides=(s, 1))  # a row stride that varies
    b = Buffer("B", (m, 4), dtypes.float32, strides=(8, 1))  # a fixed one
    c = Buffer("C", (m, 4), dtypes.float32, strides=(4, 1))  # row-major, declared
    return PrimFunc("f", (a, b, c), Seq(()), loc=LOC)


def test_declared_strides_are_checked_and_symbolic_ones_bound() -> None:
    kernel, rec = make(strided_func())
    big = torch.zeros(3, 8)
    kernel(big[:, :4], big[:, :4], torch.zeros(3, 4))
    assert rec.calls[-1][1] == {"M": 3, "s": 8}
    kernel(torch.zeros(3, 6)[:, 1:5], big.numpy()[:, :4], np.zeros((3, 4), np.float32))  # numpy: byte strides
    assert rec.calls[-1][1] == {"M": 3, "s": 6}
    kernel(big[:1, :4], torch.zeros(1, 4), torch.zeros(4, 1).t())  # a dimension of extent 1 is never stepped
    with pytest.raises(ArgumentError, match=r"parameter `B` .*has strides \(4, 1\), but the kernel declares "
                                            r"strides \(8, 1\)") as info:
        kernel(big[:, :4], torch.zeros(3, 4), torch.zeros(3, 4))
    assert "strides=(4, 1)" in info.value.hint and "kernels.py:12" in str(info.value)
    with pytest.raises(ArgumentError, match=r"parameter `C` .*has strides \(1, 3\)") as info:
        kernel(big[:, :4], big[:, :4], torch.zeros(4, 3).t())
    assert ".contiguous()" in info.value.hint
    with pytest.raises(ArgumentError, match=r"parameter `A` .*has strides \(1, 3\)"):
        kernel(torch.zeros(4, 3).t(), big[:, :4], torch.zeros(3, 4))


def test_strided_outputs_are_allocated_with_their_strides() -> None:
    m = Var("M")
    a = Buffer("A", (m, 4), dtypes.float32)
    out = Buffer("Out", (m, 4), dtypes.float32, strides=(8, 1))
    kernel, _ = make(PrimFunc("g", (a, out), Seq(()), out_idx=(1,), loc=LOC))
    result = kernel(torch.zeros(3, 4))
    assert result.shape == (3, 4) and result.stride() == (8, 1)
    result = kernel(np.zeros((3, 4), np.float32))
    assert result.shape == (3, 4) and result.strides == (32, 4)


def test_fast_path_agrees_with_full_checks_on_strides() -> None:
    kernel, _ = make(strided_func())
    big = torch.zeros(3, 8)
    good = (big[:, :4], big[:, :4], torch.zeros(3, 4))
    kernel(*good)
    fast = fast_path(kernel._binder)
    assert fast is not None and fast(good) is not None
    cases = [
        good, (torch.zeros(3, 4), big[:, :4], torch.zeros(3, 4)), (big[:, :4], torch.zeros(3, 4), torch.zeros(3, 4)),
        (big[:, :4], big[:, :4], torch.zeros(4, 3).t()), (torch.zeros(4, 3).t(), big[:, :4], torch.zeros(3, 4)),
        (big[:1, :4], torch.zeros(1, 4), torch.zeros(4, 1).t()), (big[:, :4], big[:2, :4], torch.zeros(3, 4)),
        (big[:, 1:5], big[:, :4], torch.zeros(3, 4)), (big[:, ::2], big[:, :4], torch.zeros(3, 4)),
    ]
    for args in cases:
        slow = _bind_slow(kernel, args)
        quick = fast(args)
        if quick is None:
            continue
        assert slow != "error", f"fast path accepted {args!r} that the full checks reject"
        assert _same(list(quick[0]), list(slow[0])) and quick[1] == slow[1]
    _check_fused(kernel, cases, good, ("M", "s"))
