"""The CUDA launchers without a GPU: argument packing, grids, contexts and errors, checked
against a fake driver (ctypes callbacks standing in for cuLaunchKernel and the context calls)."""

from __future__ import annotations

import ctypes
import dataclasses
import struct
from types import SimpleNamespace

import pytest
import torch

from tilelang_x.core_ir.errors import ArgumentError
from tilelang_x.plugins.cuda import driver, runtime
from tilelang_x.plugins.cuda.meta import KernelMeta, ParamSpec

try:
    from tilelang_x.plugins.cuda import _launcher
except ImportError:
    _launcher = None

LAUNCH_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *([ctypes.c_uint] * 7), ctypes.c_void_p,
                            ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p))
GETCTX_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))
PUSH_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
POP_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))

FN, CTX = 0x1000, 0x2000

# C size of each parameter's value, read back from the packed slots.
SIZES = {"buffer": 8, "int32": 4, "int64": 8, "uint64": 8, "float32": 4, "float64": 8, "float16": 2,
         "bfloat16": 2, "bool": 1, "int8": 1, "int16": 2, "uint32": 4}


class FakeDriver:
    """Records launches; ``current`` is what cuCtxGetCurrent reports; ``result`` what launches return."""

    def __init__(self, meta: KernelMeta) -> None:
        self.meta = meta
        self.launches: list[dict] = []
        self.current = CTX
        self.result = 0
        self.pushed: list[int] = []
        self.popped = 0

        def launch(fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
            values = []
            for i, p in enumerate(meta.params):
                size = 128 if p.kind == "tmap" else SIZES["buffer" if p.kind == "buffer" else p.dtype]
                values.append(ctypes.string_at(params[i], size))
            self.launches.append(dict(fn=fn, grid=(gx, gy, gz), block=(bx, by, bz), smem=smem, stream=stream,
                                      values=values))
            return self.result

        def getctx(out):
            out[0] = self.current
            return 0

        def push(ctx):
            self.pushed.append(ctx)
            return 0

        def pop(out):
            self.popped += 1
            return 0

        self.cb = (LAUNCH_T(launch), GETCTX_T(getctx), PUSH_T(push), POP_T(pop))
        fail = lambda code, out: 1  # cuGetErrorName/String unavailable: generic names
        self.lib = SimpleNamespace(cuLaunchKernel=self.cb[0], cuCtxGetCurrent=self.cb[1],
                                   cuCtxPushCurrent_v2=self.cb[2], cuCtxPopCurrent_v2=self.cb[3],
                                   cuGetErrorName=fail, cuGetErrorString=fail)

    def addresses(self) -> tuple[int, ...]:
        return tuple(ctypes.cast(c, ctypes.c_void_p).value for c in self.cb)


class FakeKernel:
    def __init__(self, meta: KernelMeta) -> None:
        self.meta = meta
        self.resolved: list[int] = []

    def resolve(self, device: int) -> tuple[int, int]:
        self.resolved.append(device)
        return FN + device, CTX


class FakeTensor:
    def __init__(self, ptr: int, device: int = 0, contiguous: bool = True) -> None:
        self.ptr, self.device, self.contiguous = ptr, device, contiguous

    def get_device(self) -> int:
        return self.device

    def is_contiguous(self) -> bool:
        return self.contiguous

    def data_ptr(self) -> int:
        return self.ptr

    shape = (4, 4)

    def stride(self) -> tuple[int, int]:
        return (1, 4)


class FakeVar:
    def __init__(self, name: str) -> None:
        self.name = name

    def __hash__(self) -> int:
        return id(self)


def _meta(**kw) -> KernelMeta:
    params = (
        ParamSpec("A", "buffer", 0, "float16", "half*"),
        ParamSpec("B", "buffer", 1, "float16", "half*"),
        ParamSpec("n", "scalar", 2, "int32", "int"),
        ParamSpec("alpha", "scalar", 3, "float32", "float"),
        ParamSpec("h", "scalar", 4, "float16", "half"),
        ParamSpec("bf", "scalar", 5, "bfloat16", "nv_bfloat16"),
        ParamSpec("d", "scalar", 6, "float64", "double"),
        ParamSpec("big", "scalar", 7, "int64", "long long"),
        ParamSpec("flag", "scalar", 8, "bool", "bool"),
        ParamSpec("M", "dim", 0, "int32", "int"),
        ParamSpec("C", "buffer", 9, "float16", "half*"),
    )
    base = dict(kernel_name="k", params=params, block=(128, 1, 1), smem_bytes=1024, dims=("M",),
                grid_source="(({M} + 127) // 128, 2, 1)")
    base.update(kw)
    return KernelMeta(**base)


KINDS = ["ctypes", pytest.param("cython", marks=pytest.mark.skipif(_launcher is None,
                                                                     reason="compiled launcher not built"))]


@pytest.fixture
def make(monkeypatch):
    """``make(meta, kind) -> (launcher, fake driver, fake kernel)`` with the fake driver bound."""
    saved = _launcher.bound_addresses() if _launcher is not None else None

    def build(meta: KernelMeta, kind: str):
        fake = FakeDriver(meta)
        kernel = FakeKernel(meta)
        monkeypatch.setattr(driver, "_LIB", fake.lib)
        plan = runtime._Plan(meta)
        helper = runtime._Helper(kernel)
        helper.get_stream = lambda dev: 0x77 + dev
        helper.default_device = lambda: 0
        if kind == "cython":
            _launcher.bind_driver(*fake.addresses())
            launcher = _launcher.Launcher(kernel, plan, helper)
        else:
            monkeypatch.setattr(runtime, "_Helper", lambda k: helper)
            launcher = runtime.CtypesLauncher(kernel, plan)
        return launcher, fake, kernel

    yield build
    if saved is not None:
        _launcher.bind_driver(*saved)


ARGS = [FakeTensor(0xA000), FakeTensor(0xB000), 300, 1.5, -2.0, 3.0, 0.1, -(2**40), True,
        FakeTensor(0xC000)]


@pytest.mark.parametrize("kind", KINDS)
def test_packs_every_parameter(make, kind):
    meta = _meta()
    launcher, fake, kernel = make(meta, kind)
    launcher(ARGS, [300])
    (rec,) = fake.launches
    assert rec["fn"] == FN and rec["grid"] == (3, 2, 1) and rec["block"] == (128, 1, 1)
    assert rec["smem"] == 1024 and rec["stream"] == 0x77
    v = rec["values"]
    assert struct.unpack("<Q", v[0])[0] == 0xA000
    assert struct.unpack("<Q", v[1])[0] == 0xB000
    assert struct.unpack("<i", v[2])[0] == 300
    assert struct.unpack("<f", v[3])[0] == 1.5
    assert v[4] == torch.tensor(-2.0, dtype=torch.float16).view(torch.int16).numpy().tobytes()
    assert v[5] == torch.tensor(3.0, dtype=torch.bfloat16).view(torch.int16).numpy().tobytes()
    assert struct.unpack("<d", v[6])[0] == 0.1
    assert struct.unpack("<q", v[7])[0] == -(2**40)
    assert v[8] == b"\x01"
    assert struct.unpack("<i", v[9])[0] == 300
    assert struct.unpack("<Q", v[10])[0] == 0xC000
    assert kernel.resolved == [0] and fake.pushed == [] and fake.popped == 0


@pytest.mark.parametrize("kind", KINDS)
def test_dims_by_name_or_var_and_dynamic_grid(make, kind):
    launcher, fake, _ = make(_meta(), kind)
    launcher(ARGS, {"M": 129})
    launcher(ARGS, {FakeVar("M"): 1})
    launcher(ARGS, (1000,))
    assert [r["grid"] for r in fake.launches] == [(2, 2, 1), (1, 2, 1), (8, 2, 1)]
    assert [struct.unpack("<i", r["values"][9])[0] for r in fake.launches] == [129, 1, 1000]


@pytest.mark.parametrize("kind", KINDS)
def test_static_grid(make, kind):
    launcher, fake, _ = make(_meta(grid_static=(5, 6, 7), grid_source=""), kind)
    launcher(ARGS, [1])
    assert fake.launches[0]["grid"] == (5, 6, 7)


@pytest.mark.parametrize("kind", KINDS)
def test_context_pushed_when_another_is_current(make, kind):
    launcher, fake, _ = make(_meta(), kind)
    fake.current = 0  # a thread with no current context
    launcher(ARGS, [1])
    assert fake.pushed == [CTX] and fake.popped == 1


@pytest.mark.parametrize("kind", KINDS)
def test_device_follows_the_tensors(make, kind):
    launcher, fake, kernel = make(_meta(), kind)
    on1 = [FakeTensor(1, device=1) if isinstance(a, FakeTensor) else a for a in ARGS]
    launcher(on1, [1])
    launcher(ARGS, [1])
    assert kernel.resolved == [1, 0]
    assert [r["stream"] for r in fake.launches] == [0x78, 0x77]
    assert [r["fn"] for r in fake.launches] == [FN + 1, FN]


@pytest.mark.parametrize("kind", KINDS)
def test_argument_errors(make, kind):
    launcher, fake, _ = make(_meta(), kind)
    cpu = torch.zeros(4, dtype=torch.float16)
    args = list(ARGS)
    args[1] = cpu
    with pytest.raises(ArgumentError, match="'B'.* is on cpu"):
        launcher(args, [1])
    args = list(ARGS)
    args[9] = FakeTensor(0xC000, device=1)
    with pytest.raises(ArgumentError, match="different GPUs"):
        launcher(args, [1])
    args = list(ARGS)
    args[0] = FakeTensor(0xA000, contiguous=False)
    with pytest.raises(ArgumentError, match="not contiguous"):
        launcher(args, [1])
    args = list(ARGS)
    args[0] = "not a tensor"
    with pytest.raises(ArgumentError, match="must be a torch tensor"):
        launcher(args, [1])
    args = list(ARGS)
    args[2] = "three"
    with pytest.raises(ArgumentError, match="int32 number"):
        launcher(args, [1])
    with pytest.raises(ArgumentError, match="arguments"):
        launcher(ARGS[:3], [1])
    with pytest.raises(ArgumentError, match="dynamic dimension 'M'"):
        launcher(ARGS, {})
    assert fake.launches == []


@pytest.mark.parametrize("kind", KINDS)
def test_misaligned_buffer_is_refused_before_the_launch(make, kind):
    params = tuple(dataclasses.replace(p, align=16) if p.name == "B" else p for p in _meta().params)
    launcher, fake, _ = make(_meta(params=params), kind)
    args = list(ARGS)
    args[1] = FakeTensor(0xB002)  # a slice starting one fp16 element in
    with pytest.raises(ArgumentError, match=r"'B'.* starts at address 0xb002, not a multiple of 16 bytes"):
        launcher(args, [1])
    assert fake.launches == []
    args[1] = FakeTensor(0xB010)
    launcher(args, [1])
    assert len(fake.launches) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_launch_failure_names_the_error(make, kind):
    launcher, fake, _ = make(_meta(), kind)
    fake.result = driver.INVALID_VALUE
    with pytest.raises(driver.CudaError) as info:
        launcher(ARGS, [1])
    assert info.value.code == driver.INVALID_VALUE
    assert "launching kernel 'k'" in str(info.value) and "grid (1, 2, 1)" in str(info.value)


def test_scalar_bit_helpers():
    for x in (0.0, 1.0, -2.5, 3.14159, 65504.0, 1e-8, float("inf")):
        assert runtime.half_bits(x) == torch.tensor(x, dtype=torch.float16).view(torch.int16).item() & 0xFFFF
        assert runtime.bf16_bits(x) == torch.tensor(x, dtype=torch.bfloat16).view(torch.int16).item() & 0xFFFF
    nan = runtime.bf16_bits(float("nan"))
    assert (nan & 0x7F80) == 0x7F80 and (nan & 0x7F)


def test_plan_rejects_unknown_parameter_kinds():
    meta = _meta(params=(ParamSpec("x", "tensormap", 0, "float16", "CUtensorMap"),))
    with pytest.raises(ArgumentError, match="unknown kind"):
        runtime._Plan(meta)


def test_driver_error_text_without_a_driver(monkeypatch):
    monkeypatch.setattr(driver, "_LIB", None)
    err = driver.make_error(driver.ILLEGAL_ADDRESS, "launching kernel 'k'")
    assert "CUDA error 700" in str(err) and "restart" in str(err) and err.code == 700


def test_missing_libcuda_is_a_clear_error(monkeypatch):
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        pass
    else:
        pytest.skip("this machine has a CUDA driver")
    monkeypatch.setattr(driver, "_LIB", None)
    with pytest.raises(driver.CudaNotAvailableError, match="libcuda.so.1"):
        driver.libcuda()


@pytest.mark.parametrize("kind", KINDS)
def test_unchecked_launcher_reads_only_the_first_device(make, kind, monkeypatch):
    launcher, fake, kernel = make(_meta(), kind)
    plan, helper = runtime._Plan(launcher.meta), runtime._Helper(kernel)
    helper.get_stream = lambda dev: 0x77 + dev
    if kind == "cython":
        unchecked = _launcher.Launcher(kernel, plan, helper, False)
    else:
        monkeypatch.setattr(runtime, "_Helper", lambda k: helper)
        unchecked = runtime.CtypesLauncher(kernel, plan, check_args=False)
    args = list(ARGS)
    args[1] = FakeTensor(0xB000, contiguous=False)
    unchecked(args, [1])
    assert struct.unpack("<Q", fake.launches[-1]["values"][1])[0] == 0xB000


@pytest.mark.skipif(_launcher is None, reason="compiled launcher not built")
def test_launch_repeat(make):
    launcher, fake, _ = make(_meta(), "cython")
    with pytest.raises(RuntimeError, match="once first"):
        launcher._launch_repeat(3)
    launcher(ARGS, [300])
    launcher._launch_repeat(3)
    assert len(fake.launches) == 4 and all(r["grid"] == (3, 2, 1) for r in fake.launches)


def test_load_without_a_driver_defers_the_error(monkeypatch):
    from tilelang_x.plugins.cuda.compile import CudaBinary

    def missing() -> None:
        raise driver.CudaNotAvailableError("the CUDA driver library libcuda.so.1 was not found")

    monkeypatch.setattr(driver, "libcuda", missing)
    meta = _meta()
    launcher = runtime.load(CudaBinary(b"\x7fELF", "sm_90a", "k"), meta)
    with pytest.raises(driver.CudaNotAvailableError, match="libcuda.so.1"):
        launcher(ARGS, [1])


def test_cubin_and_metadata_must_name_the_same_kernel():
    from tilelang_x.plugins.cuda.compile import CudaBinary

    with pytest.raises(ArgumentError, match="launch metadata names 'k'"):
        runtime.load(CudaBinary(b"\x7fELF", "sm_90a", "other"), _meta())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("source", [
    "(({M} + 127) // 128, 2, 1)",
    "(max({M} // 3, 1), min({M}, 7) % 4, (0 - {M}) // 100 + 50)",  # floor division of negatives
    "({M} * 8000000 * 8000000 // 1000000000000, 1, 1)",  # a product beyond the program: the Python function
    "(({M} + 1) // ({M} - {M} + 1), 1, 1)",
])
def test_grid_program_matches_the_grid_function(make, kind, source):
    from tilelang_x.plugins.cuda.grid_program import grid_program

    meta = _meta(grid_source=source)
    launcher, fake, _ = make(meta, kind)
    values = [1, 127, 129, 1000, 4097, 65535]
    for m in values:
        launcher(ARGS, [m])
    assert [r["grid"] for r in fake.launches] == [meta.grid([m]) for m in values]
    assert grid_program(source, ("M",)) is not None


@pytest.mark.skipif(_launcher is None, reason="compiled launcher not built")
def test_grid_program_runs_without_python(make):
    meta = _meta(grid_source="(({M} + 127) // 128, 2, 1)")
    launcher, fake, kernel = make(meta, "cython")
    plan = runtime._Plan(meta)
    plan.grid_fn = None  # calling it would raise TypeError (and fail the launch)
    helper = runtime._Helper(kernel)
    helper.get_stream = lambda dev: 0x77
    _launcher.Launcher(kernel, plan, helper)(ARGS, [300])
    assert fake.launches[-1]["grid"] == (3, 2, 1)


def test_grid_program_rejects_what_it_cannot_run():
    from tilelang_x.plugins.cuda.grid_program import grid_program, run

    assert grid_program("(({M} + 127) / 128, 1, 1)", ("M",)) is None
    assert grid_program("(abs({M}), 1, 1)", ("M",)) is None
    assert grid_program("({M}, 1)", ("M",)) is None
    prog = grid_program("(-{M} // 3, max({M}, {N}, 9), {N} % 5)", ("M", "N"))
    assert prog is not None and run(prog, [10, 12]) == (1, 12, 2)
    assert run(prog, [-10, 3]) == (3, 9, 3) and run(prog, [7, 0]) == (1, 9, 1)


@pytest.mark.parametrize("kind", KINDS)
def test_launch_on_takes_the_callers_device_and_ordered_dims(make, kind):
    launcher, fake, kernel = make(_meta(), kind)
    assert launcher.dim_names == ("M",)
    on1 = [FakeTensor(1, device=1) if isinstance(a, FakeTensor) else a for a in ARGS]
    launcher.launch_on(1, on1, (300,))
    assert fake.launches[-1]["grid"] == (3, 2, 1) and fake.launches[-1]["stream"] == 0x78
    assert struct.unpack("<i", fake.launches[-1]["values"][9])[0] == 300
    with pytest.raises(ArgumentError, match="dynamic dimension 'M'"):
        launcher.launch_on(1, on1, ())


def _tma_meta() -> KernelMeta:
    params = (ParamSpec("A", "tmap", 0, "float16", "CUtensorMap"),
              ParamSpec("B", "buffer", 1, "float16", "half*"),
              ParamSpec("M", "dim", 0, "int32", "int"))
    return KernelMeta(kernel_name="k", params=params, block=(128, 1, 1), dims=("M",),
                      grid_source="(({M} + 127) // 128, 1, 1)", tensor_maps=((0, "float16", (64, 64), 3),))


@pytest.mark.parametrize("kind", KINDS)
def test_tma_maps_are_cached_passed_by_value_and_fall_back(monkeypatch, make, kind):
    from tilelang_x.plugins.cuda import runtime_tma

    encoded: list[int] = []

    def encode(t, dtype, box, swizzle):
        if t.data_ptr() % 16:
            raise runtime_tma.TmaUnsupported(f"address {t.data_ptr():#x}")
        encoded.append(t.data_ptr())
        return bytes([t.data_ptr() >> 8 & 0xFF]) * 128

    fallback_calls: list[tuple] = []
    monkeypatch.setattr(runtime_tma, "encode", encode)
    meta = _tma_meta()
    fake = FakeDriver(meta)
    kernel = FakeKernel(meta)
    monkeypatch.setattr(driver, "_LIB", fake.lib)
    maps = runtime_tma.TmaMaps(kernel, lambda: lambda args, dims: fallback_calls.append((args, dims)))
    saved = _launcher.bound_addresses() if _launcher is not None else None
    if kind == "cython":
        _launcher.bind_driver(*fake.addresses())
        helper = maps.helper()
        helper.get_stream = lambda dev: 0x77
        launcher = _launcher.Launcher(kernel, runtime._Plan(meta), helper)
    else:
        launcher = runtime_tma.TmaLauncher(kernel, maps)
        launcher._helper.get_stream = lambda dev: 0x77
    try:
        x, y = FakeTensor(0xA100), FakeTensor(0xB000)
        launcher([x, y], [300])
        launcher([x, y], {"M": 1})
        launcher([FakeTensor(0xC200), y], [1])
        launcher([FakeTensor(0xC208), y], [1])  # not 16-byte aligned: the fallback runs it
    finally:
        if saved is not None:
            _launcher.bind_driver(*saved)
    assert encoded == [0xA100, 0xC200]
    assert [r["values"][0] for r in fake.launches] == [b"\xA1" * 128] * 2 + [b"\xC2" * 128]
    assert [struct.unpack("<Q", r["values"][1])[0] for r in fake.launches] == [0xB000] * 3
    assert [r["grid"] for r in fake.launches] == [(3, 1, 1), (1, 1, 1), (1, 1, 1)]
    assert len(fallback_calls) == 1 and fallback_calls[0][0][0].ptr == 0xC208
