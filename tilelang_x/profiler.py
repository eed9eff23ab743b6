"""Timing and checking a compiled kernel, as TileLang's ``kernel.get_profiler()`` does.

``Profiler`` makes random inputs from the kernel's signature (``TensorSupplyType``), times the
kernel (or any function of those inputs) with the target's timer from ``tlx_profiler``, and
compares the kernel's outputs with a reference program's (``assert_allclose``).

The timer contract: ``timer(fn, n_warmup, n_repeat) -> list of milliseconds``, one per timed
repetition, where both counts are numbers of calls. ``do_bench`` turns its millisecond budgets
(``warmup``, ``rep``) into those counts from a first estimate, unless ``n_warmup`` /
``n_repeat`` are given.
"""

from __future__ import annotations

import enum
import statistics
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .args import eval_dim, torch_dtype
from .core_ir.dtypes import DType
from .core_ir.errors import ArgumentError

if TYPE_CHECKING:
    from .args import ParamSpec
    from .kernel import JITKernel

__all__ = ["Profiler", "TensorSupplyType", "make_tensor", "wall_timer", "do_bench", "compare"]


class TensorSupplyType(enum.Enum):
    """How ``Profiler`` fills the inputs it makes."""

    Integer = 1  # small integers in [-2, 2] (unsigned: [0, 2]), exact in every float type
    Uniform = 2  # uniform in [-1, 1)
    Normal = 3  # normal with mean -1 and std 1 (as TileLang)
    Randn = 4  # standard normal
    Zero = 5
    One = 6
    Auto = 7  # Normal for 16/32-bit floats, Integer otherwise


def _supply(value: TensorSupplyType | str | int) -> TensorSupplyType:
    if isinstance(value, TensorSupplyType):
        return value
    if isinstance(value, str):
        for member in TensorSupplyType:
            if member.name.lower() == value.lower():
                return member
    if isinstance(value, int):
        return TensorSupplyType(value)
    names = ", ".join(m.name for m in TensorSupplyType)
    raise ValueError(f"unknown tensor supply type {value!r}; use one of {names}")


def make_tensor(shape: Sequence[int], dtype: DType, supply: TensorSupplyType, device: Any) -> Any:
    """A torch tensor of ``shape`` and ``dtype`` on ``device`` filled as ``supply`` says."""
    import torch

    tdt = torch_dtype(dtype)
    shape = tuple(shape)
    if supply is TensorSupplyType.Auto:
        supply = TensorSupplyType.Normal if dtype.is_float and dtype.bits >= 16 else TensorSupplyType.Integer
    if supply is TensorSupplyType.Zero:
        return torch.zeros(shape, dtype=tdt, device=device)
    if supply is TensorSupplyType.One:
        return torch.ones(shape, dtype=tdt, device=device)
    if dtype.is_bool:
        return torch.randint(0, 2, shape, device=device).to(tdt)
    if supply is TensorSupplyType.Integer or not dtype.is_float:
        low = 0 if dtype.kind == "uint" or dtype.is_bool else -2
        return torch.randint(low, 3, shape, device=device).to(tdt)
    out = torch.empty(shape, dtype=torch.float32, device=device)
    if supply is TensorSupplyType.Uniform:
        out.uniform_(-1.0, 1.0)
    elif supply is TensorSupplyType.Normal:
        out.normal_(-1.0, 1.0)
    else:
        out.normal_(0.0, 1.0)
    return out.to(tdt)


def wall_timer(
    fn: Callable[[], Any], n_warmup: int, n_repeat: int, sync: Callable[[], Any] | None = None
) -> list[float]:
    """Milliseconds per call of ``fn`` by the wall clock (for targets without a timer)."""
    for _ in range(n_warmup):
        fn()
    if sync is not None:
        sync()
    times = []
    for _ in range(n_repeat):
        start = time.perf_counter()
        fn()
        if sync is not None:
            sync()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def _reduce(times: list[float], return_mode: str) -> Any:
    if return_mode == "median":
        return statistics.median(times)
    if return_mode == "mean":
        return statistics.fmean(times)
    if return_mode == "min":
        return min(times)
    if return_mode == "max":
        return max(times)
    if return_mode == "all":
        return list(times)
    raise ValueError(f"return_mode must be median, mean, min, max or all, not {return_mode!r}")


def do_bench(
    fn: Callable[[], Any],
    timer: Callable[..., list[float]] | None = None,
    warmup: float = 25.0,
    rep: float = 100.0,
    n_warmup: int = 0,
    n_repeat: int = 0,
    return_mode: str = "median",
) -> Any:
    """Time ``fn()`` in milliseconds: ``warmup`` and ``rep`` are budgets in ms, ``n_warmup`` /
    ``n_repeat`` (when > 0) exact call counts."""
    timer = timer or wall_timer
    if n_warmup <= 0 or n_repeat <= 0:
        first = min(timer(fn, 0, 1))
        estimate = statistics.median(timer(fn, 1, 5)) if first < 10.0 else first
        estimate = max(estimate, 1e-4)
        if n_warmup <= 0:
            n_warmup = max(1, int(warmup / estimate))
        if n_repeat <= 0:
            n_repeat = max(1, int(rep / estimate))
    return _reduce(list(timer(fn, n_warmup, n_repeat)), return_mode)


def compare(actual: Any, expected: Any, rtol: float, atol: float, max_mismatched_ratio: float, what: str) -> None:
    """Raise ``AssertionError`` with a summary when more than ``max_mismatched_ratio`` of the
    elements differ by more than ``atol + rtol * |expected|`` (NaN matches NaN only)."""
    import torch

    a = torch.as_tensor(actual).detach().cpu()
    e = torch.as_tensor(expected).detach().cpu()
    if tuple(a.shape) != tuple(e.shape):
        raise AssertionError(f"{what}: shape {list(a.shape)} differs from the reference's {list(e.shape)}")
    a64, e64 = a.to(torch.float64), e.to(torch.float64)
    diff = (a64 - e64).abs()
    both_nan = torch.isnan(a64) & torch.isnan(e64)
    same_inf = torch.isinf(a64) & (a64 == e64)
    bad = ~((diff <= atol + rtol * e64.abs()) | both_nan | same_inf)
    total = bad.numel()
    count = int(bad.sum())
    if total == 0 or count <= max_mismatched_ratio * total:
        return
    flat_bad = bad.reshape(-1)
    flat_diff = torch.where(flat_bad, diff.reshape(-1), torch.zeros(1, dtype=torch.float64))
    worst = int(flat_diff.nan_to_num(nan=float("inf")).argmax())
    rel = diff / e64.abs().clamp_min(1e-12)
    first = torch.nonzero(flat_bad)[:5].reshape(-1).tolist()
    flat_a, flat_e = a64.reshape(-1), e64.reshape(-1)

    def show(flat: int) -> str:
        where = list(_unravel(flat, tuple(a.shape)))
        return f"{where}: got {float(flat_a[flat]):.6g}, expected {float(flat_e[flat]):.6g}"

    lines = [
        f"{what} differs from the reference: {count} of {total} elements ({100 * count / total:.2f}%) "
        f"are off by more than atol={atol} + rtol={rtol}*|expected| (allowed: {100 * max_mismatched_ratio:.2f}%)",
        f"  largest difference {float(flat_diff[worst]):.6g} at {show(worst)}",
        f"  largest relative difference among mismatches: {float(rel[bad].max()):.6g}",
        "  first mismatches: " + "; ".join(show(i) for i in first),
    ]
    raise AssertionError("\n".join(lines))


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    pos = []
    for extent in reversed(shape):
        flat, r = divmod(flat, extent)
        pos.append(r)
    return tuple(reversed(pos))


class Profiler:
    """Random inputs, timing and reference checks for one compiled kernel."""

    def __init__(
        self,
        kernel: JITKernel,
        supply_type: TensorSupplyType | str = TensorSupplyType.Auto,
        *,
        dynamic_dims: dict[str, int] | None = None,
    ) -> None:
        self.kernel = kernel
        self.supply_type = _supply(supply_type)
        self.dynamic_dims = dict(dynamic_dims or {})

    # ---- inputs ---------------------------------------------------------------------------
    def _dims(self) -> dict[Any, int]:
        dims: dict[Any, int] = {}
        for spec in self.kernel._binder.specs:
            for d in spec.shape:
                name = getattr(d, "name", None)
                if name is not None and name in self.dynamic_dims:
                    dims[d] = int(self.dynamic_dims[name])
        return dims

    def _shape(self, spec: ParamSpec, dims: dict[Any, int]) -> tuple[int, ...]:
        shape = []
        for d in spec.shape:
            value = eval_dim(d, dims)
            if value is None:
                raise ArgumentError(
                    f"kernel `{self.kernel.name}`: the profiler needs a size for dimension `{d}` of "
                    f"`{spec.name}`",
                    loc=self.kernel.func.loc,
                    hint=f"pass get_profiler(dynamic_dims={{'{d}': ...}})",
                )
            shape.append(value)
        return tuple(shape)

    def get_inputs(self, with_output: bool = False) -> list[Any]:
        """Fresh random arguments: the inputs in order (and the outputs too, zeroed, with
        ``with_output=True``). Scalar parameters take 1 (or the ``dynamic_dims`` value)."""
        dims = self._dims()
        device = self.kernel.device_type
        values = []
        for spec in self.kernel._binder.visible:  # workspaces are the kernel's own
            if spec.is_output and not with_output:
                continue
            if not spec.is_tensor:
                values.append(self.dynamic_dims.get(spec.name, 1))
                continue
            supply = TensorSupplyType.Zero if spec.is_output else self.supply_type
            values.append(make_tensor(self._shape(spec, dims), spec.dtype, supply, device))
        return values

    # ---- timing ---------------------------------------------------------------------------
    def _timer(self) -> Callable[..., list[float]]:
        from . import registry

        timer = registry.hook().tlx_profiler(target=self.kernel.target)
        if timer is not None:
            return timer
        sync = None
        if self.kernel.device_type == "cuda":
            import torch

            sync = torch.cuda.synchronize
        return lambda fn, n_warmup, n_repeat: wall_timer(fn, n_warmup, n_repeat, sync)

    def do_bench(
        self,
        func: Callable[..., Any] | None = None,
        warmup: float = 25.0,
        rep: float = 100.0,
        n_warmup: int = 0,
        n_repeat: int = 0,
        return_mode: str = "median",
        input_tensors: Sequence[Any] | None = None,
    ) -> Any:
        """Milliseconds per call of ``func(*inputs)`` (default: the kernel), by the target's
        timer; ``return_mode`` is ``median`` (default), ``mean``, ``min``, ``max`` or ``all``."""
        fn = func if func is not None else self.kernel
        inputs = list(input_tensors) if input_tensors is not None else self.get_inputs()
        return do_bench(lambda: fn(*inputs), self._timer(), warmup, rep, n_warmup, n_repeat, return_mode)

    # ---- checking -------------------------------------------------------------------------
    def run_once(self, func: Callable[..., Any] | None = None) -> Any:
        """Call ``func`` (default: the kernel) once on fresh inputs and return its result."""
        fn = func if func is not None else self.kernel
        return fn(*self.get_inputs())

    def assert_allclose(
        self,
        reference_program: Callable[..., Any],
        input_tensors: Sequence[Any] | None = None,
        atol: float = 1e-2,
        rtol: float = 1e-2,
        max_mismatched_ratio: float = 0.01,
    ) -> None:
        """Run the kernel and ``reference_program`` on the same random inputs and compare every
        output; raise ``AssertionError`` with a summary of the mismatches."""
        if not self.kernel.out_idx:
            raise ArgumentError(
                f"kernel `{self.kernel.name}` has no outputs to compare",
                loc=self.kernel.func.loc,
                hint="compile it with out_idx=[...] (or T.empty outputs) so it returns its results",
            )
        inputs = list(input_tensors) if input_tensors is not None else self.get_inputs()
        expected = reference_program(*inputs)
        actual = self.kernel(*inputs)
        actual_list = list(actual) if isinstance(actual, tuple) else [actual]
        expected_list = list(expected) if isinstance(expected, (tuple, list)) else [expected]
        if len(actual_list) != len(expected_list):
            raise AssertionError(
                f"kernel `{self.kernel.name}` returns {len(actual_list)} output(s) but the reference "
                f"returns {len(expected_list)}"
            )
        outs = [self.kernel._binder.specs[i] for i in self.kernel.out_idx]
        for spec, got, want in zip(outs, actual_list, expected_list):
            what = f"kernel `{self.kernel.name}` output `{spec.name}` ({spec.describe()})"
            compare(got, want, rtol, atol, max_mismatched_ratio, what)

    def get_kernel_source(self) -> str:
        return self.kernel.get_kernel_source()
