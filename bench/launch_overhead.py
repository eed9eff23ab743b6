"""Host time per call of a 3-tensor kernel (target: <= 3 us with a preallocated output).

Measures, in microseconds of host (CPU) time per call, on tiny tensors so the GPU never limits:

- ``launcher_*``: the CUDA launcher alone on a hand-written vector add (compiled and ctypes
  launchers; dims as a list, as a {name: value} mapping, and a kernel with a static grid);
- ``tile_*``: TileLang kernels from tests/kernels through the whole kernel object (argument
  checks, output allocation when asked, launch): ``vector_add`` (dynamic n) and ``leaky_add``
  (static shape), with the output passed in (``prealloc``) and allocated by the kernel (``alloc``);
- ``torch_*``: torch.add with ``out=`` and ``a + b`` (a vendor-library launch for scale);
- ``stream_k`` (Hopper only): a persistent 2048×2048×256 GEMM with ``tlx.stream_k`` on and off,
  the output passed in: what appending the stream's shared workspace costs a call.

Each ``tile`` kernel also reports ``driver_floor`` (its own cuLaunchKernel called from C in a
loop), ``launcher_only`` (the launcher fed the checked arguments) and ``over_floor_*`` (our host
time above the floor, the part we control).

``--fake-driver`` runs without a GPU: a no-op C ``cuLaunchKernel`` and CPU tensors, timing only
our own host work per call (see ``_fake_cuda.py``).

Run: ``python bench/launch_overhead.py --out $OUT/launch_overhead.json``
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from _common import attempt, device_info, emit, parse_args

VECTOR_ADD = r"""
extern "C" __global__ void __launch_bounds__(256) vector_add(const float* __restrict__ a,
    const float* __restrict__ b, float* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
"""


def host_us(call: Callable[[], Any], calls: int, batch: int = 100, gpu: bool = True) -> dict[str, float]:
    """Median and min over batches of the host time per call, in microseconds."""
    import torch

    sync = torch.cuda.synchronize if gpu else (lambda: None)
    for _ in range(50):
        call()
    sync()
    per_call = []
    for _ in range(max(1, calls // batch)):
        sync()
        t0 = time.perf_counter_ns()
        for _ in range(batch):
            call()
        t1 = time.perf_counter_ns()
        per_call.append((t1 - t0) / batch / 1000.0)
    sync()
    return {"median_us": round(statistics.median(per_call), 3), "min_us": round(min(per_call), 3)}


def _over(total: dict[str, float], floor: dict[str, float]) -> float:
    return round(total["median_us"] - floor["median_us"], 3)


def handwritten(kind: str, calls: int) -> dict[str, Any]:
    import torch

    from tilelang_x import knobs
    from tilelang_x.plugins.cuda import driver, runtime
    from tilelang_x.plugins.cuda.compile import compile_cuda
    from tilelang_x.plugins.cuda.meta import KernelMeta, ParamSpec

    knobs.runtime.launcher = kind
    arch = driver.device_arch(0)
    binary = compile_cuda(VECTOR_ADD, arch + ("a" if arch == "sm_90" else ""), kernel_name="vector_add")
    params = (ParamSpec("a", "buffer", 0, "float32", "const float*"),
              ParamSpec("b", "buffer", 1, "float32", "const float*"),
              ParamSpec("c", "buffer", 2, "float32", "float*"),
              ParamSpec("n", "dim", 0, "int32", "int"))
    dynamic = runtime.load(binary, KernelMeta("vector_add", params, (256, 1, 1), dims=("n",),
                                              grid_source="(({n} + 255) // 256, 1, 1)"))
    static = runtime.load(binary, KernelMeta("vector_add", params, (256, 1, 1), dims=("n",),
                                             grid_static=(4, 1, 1)))
    n = 1024
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    dynamic([a, b, c], [n])
    torch.cuda.synchronize()
    assert torch.equal(c, a + b), "the hand-written vector add is wrong"
    unchecked = runtime.load(binary, KernelMeta("vector_add", params, (256, 1, 1), dims=("n",),
                                                grid_static=(4, 1, 1)), check_args=False)
    dims_list, dims_map = [n], {"n": n}
    args = [a, b, c]
    out = {
        "launcher_type": type(dynamic).__name__,
        "dynamic_grid_dims_list": host_us(lambda: dynamic(args, dims_list), calls),
        "dynamic_grid_dims_mapping": host_us(lambda: dynamic(args, dims_map), calls),
        "static_grid": host_us(lambda: static(args, dims_list), calls),
        "static_grid_check_args_false": host_us(lambda: unchecked(args, dims_list), calls),
    }
    if hasattr(static, "_launch_repeat"):
        # the floor: cuLaunchKernel alone, called from C in a loop with the same arguments
        floor = host_us(lambda: static._launch_repeat(100), calls // 100, batch=1)
        out["driver_cuLaunchKernel_only"] = {k: round(v / 100, 3) for k, v in floor.items()}
    # the same on a stream of our own instead of torch's default (legacy) stream
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        out["static_grid_side_stream"] = host_us(lambda: static(args, dims_list), calls)
        if hasattr(static, "_launch_repeat"):
            static(args, dims_list)
            floor = host_us(lambda: static._launch_repeat(100), calls // 100, batch=1)
            out["driver_cuLaunchKernel_only_side_stream"] = {k: round(v / 100, 3) for k, v in floor.items()}
    torch.cuda.synchronize()
    # the Python-side pieces of a call
    get_stream = runtime._stream_getter()
    out["parts"] = {
        "get_stream": host_us(lambda: get_stream(0), calls),
        "3x_data_ptr": host_us(lambda: (a.data_ptr(), b.data_ptr(), c.data_ptr()), calls),
        "3x_get_device_is_contiguous": host_us(lambda: (a.get_device(), a.is_contiguous(), b.get_device(),
                                                       b.is_contiguous(), c.get_device(), c.is_contiguous()), calls),
    }
    return out


def tile_kernels(calls: int) -> dict[str, Any]:
    import torch

    from tests.kernels import elementwise
    from tilelang_x import knobs

    out: dict[str, Any] = {}
    with knobs.scope(target_default="cuda"):
        vadd, err = attempt(lambda: elementwise.vector_add())
        leaky, err2 = attempt(lambda: elementwise.leaky_add(32, 32))
    n = 1024
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    a2, b2, c2 = a.view(32, 32), b.view(32, 32), c.view(32, 32)
    for name, kernel, error, args in (("vector_add", vadd, err, (a, b)), ("leaky_add_static", leaky, err2, (a2, b2))):
        if kernel is None:
            out[name] = {"error": error}
            continue
        ok, error = attempt(lambda kernel=kernel, name=name, args=args: torch.testing.assert_close(
            kernel(*args), _reference(name, *args)))
        out[name] = {"error": error} if error else tile_parts(kernel, args, c2 if args[0].dim() == 2 else c, calls)
    return out


def stream_k_gemm(calls: int) -> dict[str, Any]:
    """Host time per call of a stream-K GEMM and of the same GEMM without stream-K (Hopper)."""
    import torch

    import tilelang_x
    from tests.kernels import gemm

    m = n = 2048
    k = 256
    func = gemm.matmul.get_ir(m, n, k, block_M=128, block_N=128, block_K=64, num_stages=2, threads=256)
    a, b = torch.randn(m, k, device="cuda").half(), torch.randn(k, n, device="cuda").half()
    c = torch.empty(m, n, device="cuda", dtype=torch.half)
    out: dict[str, Any] = {}
    for name, on in (("stream_k", True), ("plain", False)):
        kernel = tilelang_x.compile(func, target="cuda", pass_configs={"tlx.stream_k": on})
        kernel(a, b, c)
        torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.25, rtol=2e-2)
        out[name] = host_us(lambda kernel=kernel: kernel(a, b, c), calls)
    out["extra_us"] = round(out["stream_k"]["median_us"] - out["plain"]["median_us"], 3)
    return out


def _reference(name: str, x: Any, y: Any) -> Any:
    s = x + y
    return s if name == "vector_add" else s.where(s > 0, s * 0.1)


def tile_parts(kernel: Any, inputs: tuple[Any, ...], out: Any, calls: int, gpu: bool = True) -> dict[str, Any]:
    """One kernel object's host time per call, both ways, with the launcher and driver alone."""
    args = (*inputs, out)
    result: dict[str, Any] = {
        "prealloc": host_us(lambda: kernel(*args), calls, gpu=gpu),
        "alloc": host_us(lambda: kernel(*inputs), calls, gpu=gpu),
    }
    values, dims, _ = kernel._binder.bind(args)
    launcher = kernel.launcher
    if hasattr(launcher, "launch_on"):
        dev = max(0, out.get_device())
        ordered = tuple(dims[name] for name in launcher.dim_names)
        result["launcher_only"] = host_us(lambda: launcher.launch_on(dev, values, ordered), calls, gpu=gpu)
    result["binder_only"] = host_us(lambda: kernel._binder.bind(args), calls, gpu=gpu)
    if hasattr(launcher, "_launch_repeat"):
        kernel(*args)
        floor = host_us(lambda: launcher._launch_repeat(100), calls // 100, batch=1, gpu=gpu)
        result["driver_floor"] = floor = {k: round(v / 100, 3) for k, v in floor.items()}
        result["over_floor_prealloc_us"] = _over(result["prealloc"], floor)
        result["over_floor_alloc_us"] = _over(result["alloc"], floor)
    return result


def fake_driver(calls: int) -> dict[str, Any]:
    """Our host time per call above a no-op driver, on CPU tensors (no GPU needed)."""
    import _fake_cuda as fake
    import torch

    from tests.kernels import elementwise
    from tilelang_x import knobs
    from tilelang_x.plugins.cuda.meta import KernelMeta, ParamSpec

    make = fake.compiled_launchers(fake.fake_library())
    params = (ParamSpec("a", "buffer", 0, "float32", "const float*"),
              ParamSpec("b", "buffer", 1, "float32", "const float*"),
              ParamSpec("c", "buffer", 2, "float32", "float*"),
              ParamSpec("n", "dim", 0, "int32", "int"))
    dynamic = KernelMeta("vector_add", params, (256, 1, 1), dims=("n",), grid_source="(({n} + 255) // 256, 1, 1)")
    static = KernelMeta("vector_add", params, (256, 1, 1), dims=("n",), grid_static=(4, 1, 1))
    n = 1024
    a, b = torch.randn(n), torch.randn(n)
    c = torch.empty_like(a)
    args, dims_list, dims_map = [a, b, c], [n], {"n": n}
    out: dict[str, Any] = {}
    dyn, st, unchecked = make(dynamic), make(static), make(static, False)
    out["launcher_cython"] = {
        "dynamic_grid_dims_list": host_us(lambda: dyn(args, dims_list), calls, gpu=False),
        "dynamic_grid_dims_mapping": host_us(lambda: dyn(args, dims_map), calls, gpu=False),
        "dynamic_grid_launch_on": host_us(lambda: dyn.launch_on(0, args, (n,)), calls, gpu=False),
        "static_grid": host_us(lambda: st(args, dims_list), calls, gpu=False),
        "static_grid_check_args_false": host_us(lambda: unchecked(args, dims_list), calls, gpu=False),
    }
    with knobs.scope(target_default="cuda:sm_90a"):
        kernels = {"vector_add": elementwise.vector_add(), "leaky_add_static": elementwise.leaky_add(32, 32)}
    for name, kernel in kernels.items():
        fake.on_cpu(kernel, make(kernel.launcher.meta, False))
        inputs, o = ((a, b), c) if name == "vector_add" else ((a.view(32, 32), b.view(32, 32)), c.view(32, 32))
        out[name] = tile_parts(kernel, inputs, o, calls, gpu=False)
    f32, dev = torch.float32, a.device
    out["torch_add_out"] = host_us(lambda: torch.add(a, b, out=c), calls, gpu=False)
    out["alloc"] = {
        "torch.empty(device=a.device)": host_us(lambda: torch.empty((n,), dtype=f32, device=a.device), calls,
                                                gpu=False),
        "torch.empty(cached device)": host_us(lambda: torch.empty((n,), dtype=f32, device=dev), calls, gpu=False),
        "a.new_empty": host_us(lambda: a.new_empty((n,), dtype=f32), calls, gpu=False),
        "torch.empty_like(a)": host_us(lambda: torch.empty_like(a), calls, gpu=False),
    }
    return out


def main() -> None:
    def extra(p: Any) -> None:
        p.add_argument("--calls", type=int, default=20000)
        p.add_argument("--fake-driver", action="store_true",
                       help="no GPU: time our host work above a no-op cuLaunchKernel on CPU tensors")

    args = parse_args(__doc__.splitlines()[0], extra)
    import torch

    calls = 2000 if args.quick else args.calls
    if args.fake_driver:
        result = {"bench": "launch_overhead_fake_driver", "info": device_info(), **fake_driver(calls)}
        emit(result, args.out)
        return
    result: dict[str, Any] = {"bench": "launch_overhead", "info": device_info(), "target_us": 3.0,
                              "tilelang_reference_us": 10.0}
    for kind in ("cython", "ctypes"):
        value, err = attempt(lambda kind=kind: handwritten(kind, calls))
        result[f"launcher_{kind}"] = value if err is None else {"error": err}
    from tilelang_x import knobs

    del knobs.runtime.launcher
    value, err = attempt(lambda: tile_kernels(calls))
    result["tile"] = value if err is None else {"error": err}
    if torch.cuda.get_device_capability()[0] == 9:
        value, err = attempt(lambda: stream_k_gemm(calls))
        result["stream_k"] = value if err is None else {"error": err}
    n = 1024
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    result["torch_add_out"] = host_us(lambda: torch.add(a, b, out=c), calls)
    result["torch_add_alloc"] = host_us(lambda: a + b, calls)
    emit(result, args.out)


if __name__ == "__main__":
    main()
