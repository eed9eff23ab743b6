"""The generated fast paths of ``ArgBinder``: plain torch tensors bound in a few attribute reads.

``fast_path(binder)`` is ``bind``'s shortcut: ``fast(args) -> (values, dims, outputs)``, or
``None`` for anything it does not accept outright (``bind`` then runs the full checks, which raise
the precise error). ``fused_call(binder, launcher, slow)`` is the same checks with the launch
inside: ``call(args) -> outputs``, handing every other call to ``slow(args)``; ``JITKernel``
calls it. Both accept only what the full checks accept (tests compare them).

A launcher with ``dim_names`` gets the dims as a tuple in that order instead of a mapping; one
with ``launch_on(device, values, dims)`` (the CUDA runtime's) also gets the tensors' device,
read here, where every tensor is checked to be on it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .core_ir import expr as E
from .core_ir.arith import dtype_range

if TYPE_CHECKING:
    from .args import ArgBinder, ParamSpec

__all__ = ["fast_path", "fused_call"]


def fast_path(binder: ArgBinder) -> Any:
    """``fast(args) -> (values, dims, outputs) | None`` for ``binder``'s signature, or ``None`` when
    it has no fast path (torch not loaded, a device other than cpu/cuda, shapes derived from
    other dims, ``T.ptr`` parameters)."""
    return _Generator(binder, None, None).build()


def fused_call(binder: ArgBinder, launcher: Any, slow: Callable[[tuple[Any, ...]], Any]) -> Any:
    """``call(args) -> outputs`` that checks ``args``, allocates the outputs and launches
    ``launcher``; anything it does not accept goes to ``slow(args)``. ``None`` where
    ``fast_path`` is."""
    return _Generator(binder, launcher, slow).build()


class _Generator:
    """Writes the fast path's source. ``device_flag`` replaces the CUDA tensors' ``is_cuda`` test
    (``bench/launch_overhead.py --fake-driver`` passes ``"is_cpu"`` to time the CUDA path on CPU
    tensors)."""

    def __init__(self, binder: ArgBinder, launcher: Any, slow: Any, device_flag: str = "is_cuda") -> None:
        self.binder = binder
        self.device_flag = device_flag
        self.fused = launcher is not None
        self.miss = "return slow(args)" if self.fused else "return None"
        self.launcher = launcher
        self.on_device = (self.fused and binder.device_type == "cuda"
                          and callable(getattr(launcher, "launch_on", None)))
        self.env: dict[str, Any] = {"slow": slow}
        self.names: dict[E.Var, str] = {}

    def build(self) -> Any:
        from .args import torch_dtype

        binder = self.binder
        torch = sys.modules.get("torch")
        if torch is None or binder.device_type not in ("cpu", "cuda") or binder.pointers:
            return None
        names = self.names
        for spec in binder.specs:
            dims = spec.shape if spec.is_tensor else (spec.param,) if spec.dtype.is_int else ()
            if spec.is_tensor and spec.strides is not None:
                dims = (*dims, *spec.strides)
            for d in dims:
                if isinstance(d, E.Var):
                    names.setdefault(d, f"d{len(names)}")
                elif not isinstance(d, int):
                    return None
        if len({v.name for v in names}) != len(names):
            return None  # two variables share a name: the dims mapping would be ambiguous
        env = self.env
        env.update(Tensor=torch.Tensor, empty_like=torch.empty_like)
        for spec in binder.specs:
            if spec.is_tensor:
                env[f"DT{spec.index}"] = torch_dtype(spec.dtype)
        body = ["n = len(args)"]
        inputs = self._branch(binder.inputs, allocate=True)
        if inputs is not None:
            body += [f"if n == {len(binder.inputs)}:", *("    " + line for line in inputs)]
        every = self._branch(binder.visible, allocate=False) if binder.outputs else None
        if every is not None:
            body += [f"if n == {len(binder.visible)}:", *("    " + line for line in every)]
        body.append(self.miss)
        source = "def fast(args):\n" + "".join(f"    {line}\n" for line in body)
        kind = "call" if self.fused else "binder"
        exec(compile(source, f"<tilelang_x {kind} for {binder.func.name}>", "exec"), env)  # noqa: S102
        fast = env["fast"]
        fast.source = source
        return fast

    # ---- one branch: the checks of the parameters given, the outputs, the result ----------------
    def _branch(self, given: list[ParamSpec], allocate: bool) -> list[str] | None:
        binder = self.binder
        bound: set[E.Var] = set()
        lines = [f"{', '.join(f'a{s.index}' for s in given)}, = args" if given else "pass"]
        first: str | None = None
        for spec in given:
            if spec.is_tensor:
                lines += self._tensor_checks(spec, bound, first)
                first = first or f"a{spec.index}"
            else:
                lines += self._scalar_checks(spec, bound)
        for spec in [*binder.workspaces, *(binder.outputs if allocate else ())]:
            alloc = self._allocation(spec, given, bound, first)
            if alloc is None:
                return None
            lines.append(alloc)
        params = ", ".join(f"a{s.index}" for s in binder.specs)
        outs = [f"a{s.index}" for s in binder.outputs] if allocate else []
        result = "None" if not outs else outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ",)"
        if not self.fused:
            lines.append(f"return [{params}], {self._dims_dict()}, {result}")
            return lines
        if self.on_device and first is not None:
            self.env["launch"] = self.launcher.launch_on
            lines.append(f"launch(dv, [{params}], {self._dims_tuple() or self._dims_dict()})")
        else:
            self.env["call_launcher"] = self.launcher
            lines.append(f"call_launcher([{params}], {self._dims_tuple() or self._dims_dict()})")
        lines.append(f"return {result}")
        return lines

    def _scalar_checks(self, spec: ParamSpec, bound: set[E.Var]) -> list[str]:
        x, miss, var = f"a{spec.index}", self.miss, spec.param
        if spec.dtype.is_int:
            assert isinstance(var, E.Var)
            lo, hi = dtype_range(spec.dtype)
            out = [f"if type({x}) is not int or not {lo} <= {x} <= {hi}: {miss}"]
            if var in bound:
                return [*out, f"if {x} != {self.names[var]}: {miss}"]
            bound.add(var)
            return [*out, f"{self.names[var]} = {x}"]
        if spec.dtype.is_float:
            return [f"if type({x}) is int: {x} = float({x})", f"elif type({x}) is not float: {miss}"]
        return [f"if type({x}) is not bool: {miss}"]

    def _match(self, seq: str, want: Sequence[Any], bound: set[E.Var]) -> list[str]:
        """Lines checking each ``seq[axis]`` against ``want[axis]``: a constant, a variable bound
        already, or a variable this binds."""
        out = []
        for axis, d in enumerate(want):
            if isinstance(d, int):
                out.append(f"if {seq}[{axis}] != {d}: {self.miss}")
            elif d in bound:
                out.append(f"if {seq}[{axis}] != {self.names[d]}: {self.miss}")
            else:
                out.append(f"{self.names[d]} = {seq}[{axis}]")
                bound.add(d)
        return out

    def _tensor_checks(self, spec: ParamSpec, bound: set[E.Var], first: str | None) -> list[str]:
        x, miss = f"a{spec.index}", self.miss
        out = [f"if type({x}) is not Tensor or {x}.dtype is not DT{spec.index}: {miss}"]
        if all(isinstance(d, int) for d in spec.shape):
            out.append(f"if {x}.shape != {tuple(spec.shape)!r}: {miss}")
        else:
            out += ["s = " + f"{x}.shape", f"if len(s) != {len(spec.shape)}: {miss}"]
            out += self._match("s", spec.shape, bound)
        if self.binder.device_type == "cpu":
            out.append(f"if not {x}.is_cpu: {miss}")
        elif first is None:  # CUDA: every tensor on the first one's GPU
            out += [f"if not {x}.{self.device_flag}: {miss}", f"dv = {x}.get_device()"]
        else:
            out.append(f"if not {x}.{self.device_flag} or {x}.get_device() != dv: {miss}")
        if spec.contiguous:
            out.append(f"if not {x}.is_contiguous(): {miss}")
        elif spec.strides is not None:  # exact strides only; size-1 dims etc. take the full checks
            out.append(f"st = {x}.stride()")
            out += self._match("st", spec.strides, bound)
        return out

    def _allocation(self, spec: ParamSpec, given: list[ParamSpec], bound: set[E.Var], first: str | None) -> str | None:
        """The line allocating output or workspace ``spec`` (row-major, on the first tensor's device), or
        ``None`` when the fast path cannot: ``empty_like`` of a checked contiguous input of the same
        shape and dtype (the cheapest allocation torch has), else ``new_empty``."""
        if first is None or spec.strides is not None or any(
                isinstance(d, E.Var) and d not in bound for d in spec.shape):
            return None
        x = f"a{spec.index}"
        for other in given:
            if other.is_tensor and other.contiguous and other.dtype == spec.dtype \
                    and len(other.shape) == len(spec.shape) \
                    and all(a is b or (isinstance(a, int) and a == b) for a, b in zip(other.shape, spec.shape)):
                return f"{x} = empty_like(a{other.index})"
        shape = ", ".join(str(d) if isinstance(d, int) else self.names[d] for d in spec.shape)
        return f"{x} = {first}.new_empty(({shape},), dtype=DT{spec.index})"

    # ---- dims ---------------------------------------------------------------------------------
    def _dims_dict(self) -> str:
        return "{" + ", ".join(f"{v.name!r}: {n}" for v, n in self.names.items()) + "}"

    def _dims_tuple(self) -> str | None:
        """The dims as a tuple in the launcher's ``dim_names`` order, or ``None`` (the launcher has
        no order, or wants a dim the signature does not bind)."""
        order = getattr(self.launcher, "dim_names", None)
        if not isinstance(order, tuple):
            return None
        by_name = {v.name: n for v, n in self.names.items()}
        if any(name not in by_name for name in order):
            return None
        return "(" + "".join(f"{by_name[name]}, " for name in order) + ")"
