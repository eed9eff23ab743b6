"""The CUDA runtime on a GPU with hand-written kernels: loading, launching, streams, errors."""

from __future__ import annotations

import threading

import pytest
import torch

from tilelang_x.core_ir.errors import ArgumentError
from tilelang_x.plugins.cuda import driver, profiler, runtime
from tilelang_x.plugins.cuda.compile import compile_cuda
from tilelang_x.plugins.cuda.meta import KernelMeta, ParamSpec

VECTOR_ADD = r"""
extern "C" __global__ void __launch_bounds__(256) vector_add(const float* __restrict__ a,
    const float* __restrict__ b, float* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
"""

ADD_META = KernelMeta(
    kernel_name="vector_add",
    params=(ParamSpec("a", "buffer", 0, "float32", "const float*"),
            ParamSpec("b", "buffer", 1, "float32", "const float*"),
            ParamSpec("c", "buffer", 2, "float32", "float*"),
            ParamSpec("n", "dim", 0, "int32", "int")),
    block=(256, 1, 1), dims=("n",), grid_source="(({n} + 255) // 256, 1, 1)",
)

SCALARS = r"""
extern "C" __global__ void scalars(double* out, int n, float alpha, unsigned short h, unsigned short bf,
                                   double d, long long big, bool flag, signed char i8, unsigned long long u64) {
  float hf, bff;
  asm("cvt.f32.f16 %0, %1;" : "=f"(hf) : "h"(h));
  bff = __uint_as_float(((unsigned)bf) << 16);
  out[0] = n; out[1] = alpha; out[2] = hf; out[3] = bff; out[4] = d; out[5] = (double)big;
  out[6] = flag ? 1.0 : 0.0; out[7] = i8; out[8] = (double)u64;
}
"""

SCALARS_META = KernelMeta(
    kernel_name="scalars",
    params=(ParamSpec("out", "buffer", 0, "float64", "double*"),
            ParamSpec("n", "scalar", 1, "int32", "int"),
            ParamSpec("alpha", "scalar", 2, "float32", "float"),
            ParamSpec("h", "scalar", 3, "float16", "half"),
            ParamSpec("bf", "scalar", 4, "bfloat16", "nv_bfloat16"),
            ParamSpec("d", "scalar", 5, "float64", "double"),
            ParamSpec("big", "scalar", 6, "int64", "long long"),
            ParamSpec("flag", "scalar", 7, "bool", "bool"),
            ParamSpec("i8", "scalar", 8, "int8", "signed char"),
            ParamSpec("u64", "scalar", 9, "uint64", "unsigned long long")),
    block=(1, 1, 1), grid_static=(1, 1, 1),
)

SMEM_REVERSE = r"""
extern "C" __global__ void smem_reverse(const float* __restrict__ x, float* __restrict__ y, int per_thread) {
  extern __shared__ float buf[];
  int n = per_thread * blockDim.x;
  const float* xb = x + blockIdx.x * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = xb[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) y[blockIdx.x * n + i] = buf[n - 1 - i];
}
"""


def smem_meta(smem_bytes: int, blocks: int = 4) -> KernelMeta:
    return KernelMeta(
        kernel_name="smem_reverse",
        params=(ParamSpec("x", "buffer", 0, "float32", "const float*"),
                ParamSpec("y", "buffer", 1, "float32", "float*"),
                ParamSpec("per_thread", "scalar", 2, "int32", "int")),
        block=(256, 1, 1), smem_bytes=smem_bytes, grid_static=(blocks, 1, 1),
    )


def _load(source: str, meta: KernelMeta, arch: str):
    return runtime.load(compile_cuda(source, arch, kernel_name=meta.kernel_name), meta)


def _rand(n: int, device: str = "cuda") -> torch.Tensor:
    return torch.randn(n, device=device)


def test_vector_add(device_arch, launcher_kind):
    launch = _load(VECTOR_ADD, ADD_META, device_arch)
    assert (type(launch).__name__ == "Launcher") == (launcher_kind == "cython")
    for n in (1, 255, 256, 1000, 1 << 20):
        a, b = _rand(n), _rand(n)
        c = torch.full_like(a, float("nan"))
        launch([a, b, c], [n])
        torch.testing.assert_close(c, a + b, rtol=0, atol=0)


def test_dims_as_mapping(device_arch, launcher_kind):
    launch = _load(VECTOR_ADD, ADD_META, device_arch)
    a, b = _rand(777), _rand(777)
    c = torch.empty_like(a)
    launch([a, b, c], {"n": 777})
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)


def test_every_scalar_type(device_arch, launcher_kind):
    launch = _load(SCALARS, SCALARS_META, device_arch)
    out = torch.full((9,), float("nan"), dtype=torch.float64, device="cuda")
    launch([out, -7, 1.25, -0.5, 3.0, 2.5e-300, -(2**40), True, -3, 2**63 + 5], ())
    got = out.tolist()
    assert got[:8] == [-7.0, 1.25, -0.5, 3.0, 2.5e-300, float(-(2**40)), 1.0, -3.0]
    assert got[8] == float(2**63 + 5)


def test_runs_on_the_current_stream(device_arch, launcher_kind):
    launch = _load(VECTOR_ADD, ADD_META, device_arch)
    n = 1 << 22
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        a = torch.ones(n, device="cuda")
        b = a * 2
        c = torch.empty_like(a)
        for _ in range(3):
            launch([a, b, c], [n])
            launch([c, b, a], [n])
    s.synchronize()
    assert torch.all(a == 1 + 6 * 2).item()


def test_cuda_graph_capture(device_arch, launcher_kind):
    # Capture fails for work on any other stream than the capturing one, so this proves the stream.
    launch = _load(VECTOR_ADD, ADD_META, device_arch)
    n = 4096
    a, b, c = _rand(n), _rand(n), torch.zeros(n, device="cuda")
    launch([a, b, c], [n])
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        launch([a, b, c], [n])
    c.zero_()
    a.copy_(_rand(n))
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)


def test_launch_from_another_thread(device_arch, launcher_kind):
    launch = _load(VECTOR_ADD, ADD_META, device_arch)
    a, b = _rand(1000), _rand(1000)
    c = torch.zeros_like(a)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            launch([a, b, c], [1000])
            torch.cuda.synchronize()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert not errors, errors
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_the_tensors_device_picks_the_module(device_arch, launcher_kind):
    launch = _load(VECTOR_ADD, ADD_META, device_arch)
    for dev in (1, 0, 1):
        a, b = _rand(500, f"cuda:{dev}"), _rand(500, f"cuda:{dev}")
        c = torch.zeros_like(a)
        launch([a, b, c], [500])
        torch.cuda.synchronize(dev)
        torch.testing.assert_close(c, a + b, rtol=0, atol=0)
    a0, b1 = _rand(10, "cuda:0"), _rand(10, "cuda:1")
    with pytest.raises(ArgumentError, match="different GPUs"):
        launch([a0, b1, torch.empty_like(a0)], [10])


def test_cpu_tensor_is_rejected(device_arch, launcher_kind):
    launch = _load(VECTOR_ADD, ADD_META, device_arch)
    a = _rand(10)
    with pytest.raises(ArgumentError, match="is on cpu"):
        launch([a, a.cpu(), torch.empty_like(a)], [10])


def test_non_contiguous_is_rejected(device_arch, launcher_kind):
    launch = _load(VECTOR_ADD, ADD_META, device_arch)
    a = torch.randn(20, device="cuda")[::2]
    with pytest.raises(ArgumentError, match="not contiguous"):
        launch([a, a.contiguous(), torch.empty(10, device="cuda")], [10])


@pytest.mark.parametrize("kb", [47, 100, 200])
def test_dynamic_shared_memory_over_48kb(device_arch, launcher_kind, kb):
    per_thread = kb * 1024 // 4 // 256
    smem = per_thread * 256 * 4
    launch = _load(SMEM_REVERSE, smem_meta(smem), device_arch)
    n = per_thread * 256
    x = _rand(4 * n)
    y = torch.full_like(x, float("nan"))
    launch([x, y, per_thread], ())
    torch.testing.assert_close(y.view(4, n), x.view(4, n).flip(1), rtol=0, atol=0)


def test_too_much_shared_memory_is_a_clear_error(device_arch, launcher_kind):
    limit = driver.device_attribute(0, driver.ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    launch = _load(SMEM_REVERSE, smem_meta(limit + 1024), device_arch)
    x = _rand(1024)
    with pytest.raises(driver.CudaError, match=r"needs .* KB shared memory, the GPU allows .* KB") as info:
        launch([x, torch.empty_like(x), 1], ())
    assert "num_stages" in str(info.value)


def test_too_many_threads_is_a_clear_error(device_arch, launcher_kind):
    meta = KernelMeta(kernel_name="vector_add", params=ADD_META.params, block=(2048, 1, 1), dims=("n",),
                      grid_source=ADD_META.grid_source)
    launch = _load(VECTOR_ADD.replace("__launch_bounds__(256) ", ""), meta, device_arch)
    a = _rand(10)
    with pytest.raises(driver.CudaError, match="2048 threads per block"):
        launch([a, a, torch.empty_like(a)], [10])


def test_bad_grid_names_the_cuda_error(device_arch, launcher_kind):
    meta = KernelMeta(kernel_name="vector_add", params=ADD_META.params, block=(256, 1, 1), dims=("n",),
                      grid_static=(1, 70000, 1))
    launch = _load(VECTOR_ADD, meta, device_arch)
    a = _rand(10)
    with pytest.raises(driver.CudaError, match="CUDA_ERROR_INVALID_VALUE") as info:
        launch([a, a, torch.empty_like(a)], [10])
    assert "grid (1, 70000, 1)" in str(info.value)
    # the context survives: the next good launch works
    good = _load(VECTOR_ADD, ADD_META, device_arch)
    c = torch.empty_like(a)
    good([a, a, c], [10])
    torch.testing.assert_close(c, a * 2)


def test_cubin_for_another_gpu_is_a_clear_error(device_arch):
    other = "sm_80" if not device_arch.startswith("sm_8") else "sm_90"
    launch = _load(VECTOR_ADD, ADD_META, other)
    a = _rand(10)
    with pytest.raises(driver.CudaError, match=f"compiled for {other}"):
        launch([a, a, torch.empty_like(a)], [10])


def test_kernel_attributes(device_arch):
    binary = compile_cuda(VECTOR_ADD, device_arch, kernel_name="vector_add")
    kernel = runtime.LoadedKernel(binary, ADD_META)
    attrs = kernel.attributes(0)
    assert 0 < attrs["num_regs"] <= 255 and attrs["max_threads"] >= 256 and attrs["static_smem"] == 0


def test_compiled_launcher_is_built_where_cython_is():
    try:
        import Cython  # noqa: F401
    except ImportError:
        pytest.skip("Cython is not installed")
    assert runtime.compiled_launcher() is not None, (
        "Cython is installed but the compiled launcher was not built: pip install --no-build-isolation -e ."
    )


def test_profiler_timer(device_arch):
    launch = _load(VECTOR_ADD, ADD_META, device_arch)
    n = 1 << 24
    a, b, c = _rand(n), _rand(n), torch.empty(n, device="cuda")
    times = profiler.timer(lambda: launch([a, b, c], [n]), warmup=3, rep=20)
    assert len(times) == 20 and all(t > 0 for t in times)
    # 3 x 64 MiB through HBM: far above 10 us, far below 100 ms
    assert 0.01 < sorted(times)[10] < 100
    assert profiler.flush_buffer(0).numel() * 4 >= 2 * profiler.l2_cache_bytes(0)
    assert profiler.l2_cache_bytes(0) >= 1 << 20
