"""Autotuning: compile a kernel for several configurations and keep the fastest, as TileLang's
``@tilelang.autotune`` does::

    @tilelang.autotune(configs=[{"block_M": 64, "block_N": 64}, ...], warmup=3, rep=10, ref_prog=ref)
    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, block_N=128): ...

    kernel = matmul(1024, 1024, 1024)     # tunes once per set of static arguments, returns the winner
    matmul.get_tuner_result()             # every candidate with its time or why it was skipped

``configs`` is a list of dicts, a dict of lists (their cartesian product), or a callable given the
static arguments that returns either. Keys are keyword parameters of the jitted function; passing
one of them at call time skips tuning. In the eager style ``best = tuned(a, b)`` tunes with ``a``
and ``b`` as the inputs and runs the winner.

How one tuning runs:

1. The on-disk store (``<cache dir>/autotune/<key>.json``) is asked first. The key hashes the
   kernel (qualified name, source, closure), the static arguments and tensor shapes/dtypes, the
   target, the detected devices, the python/torch/tilelang-x/plugin versions, the device toolchain
   (its knobs, name and version), the profile settings (reference program included) and the
   configs. A hit compiles only the remembered winner and benchmarks nothing
   (``result.from_cache``). An unreadable record is ignored and rewritten; an unwritable folder
   is warned about (``AutotuneCacheWarning``) and tuning goes on.
2. Compile phase. Compiled kernels cannot cross a process boundary (a launcher holds native
   handles), so worker processes ("spawn" pool, kept for later tunings) import the kernel by
   module and qualified name, trace it and run the compile stages up to ``tlx_compile`` -- no
   ``tlx_load``, so no device context in the workers. They report failures and compile times,
   and leave the binaries in the backends' on-disk caches (the CUDA plugin's cubin cache); the
   parent then compiles the survivors in-process, where the toolchain step is a cache hit, so
   the slow part (nvcc/NVRTC) runs in parallel. ``TILELANG_X_AUTOTUNE_WORKERS`` sets the number
   (default min(CPUs, 8)). The interpreter (millisecond compiles, unless workers are asked for
   explicitly), a disabled disk cache, one worker, kernels that cannot be imported by name
   (defined inside a function) and a main script that does not start the tuning under
   ``if __name__ == "__main__":`` (spawned workers re-import it) compile in-process; so does a
   candidate whose worker could not run.
3. Bench phase, in-process, one candidate at a time: inputs from the kernel's profiler (or the
   tensors passed in the eager style, ``supply_prog``, ``set_autotune_inputs``), the reference
   check (``profiler.assert_allclose``), then ``profiler.do_bench(warmup=, rep=)``, the target's
   timer.

``timeout`` bounds each candidate's compile and, separately, its check and benchmark. In-process
it is enforced with ``SIGALRM`` where that is possible (main thread, Unix, no other alarm), and
after the fact otherwise; a worker enforces it in its own process, and a worker stuck in native
code is killed a grace period later.

The package, one job a module: ``configs`` (normalising and checking them), ``key`` and ``store``
(the key of a tuning and the JSON records under it), ``workers`` (the process pool and the
worker-side compile), ``tuner`` (``AutoTuner``: compile, check, time), ``decorator``
(``autotune``, ``AutoTuneImpl``), ``result`` (``AutotuneResult``, ``Candidate``), and the small
helpers ``inputs``, ``limits``, ``progress``, ``errors``.
"""

from __future__ import annotations

from .configs import normalize_configs
from .decorator import AutoTuneImpl, autotune
from .errors import AutotuneCacheWarning, AutotuneConfigError, AutotuneError
from .inputs import set_autotune_inputs
from .result import AutotuneResult, Candidate
from .tuner import AutoTuner
from .workers import shutdown_workers

__all__ = [
    "AutoTuner", "AutoTuneImpl", "AutotuneResult", "Candidate", "AutotuneConfigError", "AutotuneError",
    "AutotuneCacheWarning", "autotune", "set_autotune_inputs", "normalize_configs", "shutdown_workers",
]
