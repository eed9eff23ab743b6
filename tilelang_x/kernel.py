"""``JITKernel``: a compiled kernel you can call.

``kernel(*inputs)`` takes the non-output parameters in order, checks them (count, dtype, rank,
static dims, dynamic dims bound consistently, device, contiguity), allocates the outputs named by
``out_idx`` like the inputs (torch tensors for torch inputs, numpy arrays for numpy ones, on the
same device), launches and returns the outputs: one tensor, a tuple of several, or ``None``.
Passing every parameter, outputs included, writes into the caller's tensors and returns ``None``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from .args import ArgBinder, normalize_out_idx
from .core_ir.stmt import PrimFunc
from .target import Target

if TYPE_CHECKING:
    from .profiler import Profiler, TensorSupplyType

__all__ = ["JITKernel", "device_type_of"]

#: Where each built-in backend expects tensors (torch device type), unless its TargetInfo says.
_DEVICE_BY_BACKEND = {"interp": "cpu", "cuda": "cuda", "hip": "cuda", "metal": "mps", "ascend": "npu"}


def device_type_of(target: Target) -> str:
    """The torch device type a target's kernels take: its ``TargetInfo.capabilities["device"]``,
    else a rule by backend (``cpu`` for unknown ones)."""
    from . import registry

    try:
        info = registry.target_info(target)
    except Exception:  # noqa: BLE001 - a broken registry must not hide the rule below
        info = None
    if info is not None and isinstance(info.capabilities.get("device"), str):
        return info.capabilities["device"]
    return _DEVICE_BY_BACKEND.get(target.backend, "cpu")


class JITKernel:
    """A kernel compiled for one target.

    ``func`` is the tile-level function that was compiled and ``lowered_func`` what the backend
    ran its code generator on; ``compile_time`` is the total in seconds, ``stage_times`` the time
    per stage (core passes, backend stages, ``codegen``, ``compile``, ``load``).
    """

    def __init__(
        self,
        func: PrimFunc,
        target: Target,
        source: str | None,
        launcher: Any,
        out_idx: Any = None,
        *,
        lowered_func: PrimFunc | None = None,
        stage_times: dict[str, float] | None = None,
        device_type: str | None = None,
    ) -> None:
        self.func = func
        self.target = target
        self.source = source if source is not None else ""
        self._launcher = launcher
        self._call: Any = self._first_call
        self.lowered_func = lowered_func if lowered_func is not None else func
        if len(self.lowered_func.params) != len(func.params):
            raise ValueError(
                f"backend for {target} changed the parameter count of `{func.name}` "
                f"({len(func.params)} -> {len(self.lowered_func.params)})"
            )
        self.out_idx = normalize_out_idx(func, out_idx)
        self.stage_times = dict(stage_times or {})
        self.compile_time = sum(self.stage_times.values())
        self.device_type = device_type or device_type_of(target)
        self._binder = ArgBinder(self.lowered_func, self.out_idx, self.device_type, str(target))

    @property
    def name(self) -> str:
        return self.func.name

    @property
    def params(self) -> tuple[Any, ...]:
        return self.func.params

    @property
    def launcher(self) -> Any:
        """``launcher(values, dims)``: the backend's launch of the compiled kernel."""
        return self._launcher

    @launcher.setter
    def launcher(self, launcher: Any) -> None:
        self._launcher = launcher
        self._call = self._first_call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise self._binder.error(
                None, f"arguments are passed by position, not by name ({', '.join(f'{k}=...' for k in kwargs)})",
                hint=f"call it as {self.name}({', '.join(s.name for s in self._binder.inputs)})")
        return self._call(args)

    def _first_call(self, args: tuple[Any, ...]) -> Any:
        """Generate the fused check-and-launch path (``args_fast.fused_call``) once torch is loaded."""
        from .args_fast import fused_call

        fused = fused_call(self._binder, self._launcher, self._checked_call)
        if fused is not None:
            self._call = fused
        elif "torch" in sys.modules:
            self._call = self._checked_call
        return self._call(args) if fused is not None else self._checked_call(args)

    def _checked_call(self, args: tuple[Any, ...]) -> Any:
        values, dims, outputs = self._binder.bind(args)
        self._launcher(values, dims)
        return outputs

    def get_kernel_source(self) -> str:
        """The generated source (for the interpreter: the lowered IR as text)."""
        return self.source

    def get_profiler(
        self,
        tensor_supply_type: TensorSupplyType | str | None = None,
        *,
        dynamic_dims: dict[str, int] | None = None,
    ) -> Profiler:
        """A ``Profiler`` that makes random inputs for this kernel, times it and checks it
        against a reference. ``dynamic_dims`` sets sizes for ``T.dynamic`` dimensions."""
        from .profiler import Profiler, TensorSupplyType

        supply = TensorSupplyType.Auto if tensor_supply_type is None else tensor_supply_type
        return Profiler(self, supply, dynamic_dims=dynamic_dims)

    def __repr__(self) -> str:
        loc = f" at {self.func.loc}" if self.func.loc is not None else ""
        return f"<JITKernel {self.func.name}{loc} for {self.target}>"
