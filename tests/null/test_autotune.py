"""The autotuner through the interpreter: tuning a GEMM, skipped candidates, the disk store,
bad configs, worker processes and the progress bar."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
import torch

import tilelang_x as tilelang
import tilelang_x.language as T
from tests.kernels.gemm import matmul, matmul_relu
from tilelang_x import autotuner, knobs
from tilelang_x.autotuner import (
    AutotuneCacheWarning,
    AutotuneConfigError,
    AutotuneError,
    AutoTuner,
    AutotuneResult,
    workers,
)
from tilelang_x.core_ir.errors import TileLangError
from tilelang_x.kernel import JITKernel
from tilelang_x.profiler import Profiler

N = 128
VALID = [{"block_M": m, "block_N": n, "block_K": k} for m in (32, 64) for n in (64, 128) for k in (32, 64)]
VALID.append({"block_M": 128, "block_N": 128, "block_K": 32})
COMPILE_FAILS = {"threads": 0}  # T.Kernel rejects it while the kernel is traced
MISMATCHES = {"trans_B": True}  # computes A @ B.T: runs, but differs from the reference
CONFIGS = [*VALID[:4], COMPILE_FAILS, *VALID[4:], MISMATCHES]


def ref_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


def tuned_matmul(**kwargs: object) -> autotuner.AutoTuneImpl:
    options = dict(configs=CONFIGS, warmup=1, rep=3, timeout=30, ref_prog=ref_matmul)
    options.update(kwargs)
    return tilelang.autotune(matmul, **options)


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    """The interpreter as the target, a private cache folder, compiling in-process."""
    folder = tmp_path / "cache"
    with knobs.scope(target_default="interp", cache_dir=str(folder), cache_disable=False, autotune_workers=1,
                     autotune_disable_cache=False, autotune_print=False):
        yield folder


@pytest.fixture
def bench_calls(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every ``Profiler.do_bench`` call (kernels and reference)."""
    calls: list[object] = []
    original = Profiler.do_bench

    def counting(self: Profiler, *args: object, **kwargs: object) -> object:
        calls.append(self.kernel)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Profiler, "do_bench", counting)
    return calls


# ---- tuning ---------------------------------------------------------------------------------------

def test_tunes_a_gemm_and_skips_bad_candidates(cache_dir: Path, bench_calls: list[object]) -> None:
    tuned = tuned_matmul()
    kernel = tuned(N, N, N)
    result = tuned.get_tuner_result()
    assert isinstance(result, AutotuneResult) and isinstance(kernel, JITKernel)
    assert result.kernel is kernel and not result.from_cache and result.tuned
    assert result.config in VALID and kernel.config == result.config
    assert kernel.get_tuner_result()["latency"] == result.latency
    assert result.ref_latency is not None and result.ref_latency > 0

    # every candidate is listed, with a time or the reason it was skipped
    assert [c.config for c in result.candidates] == CONFIGS
    by_status = {c.status for c in result.candidates}
    assert by_status == {"ok", "compile_error", "mismatch"}
    for cand in result.candidates:
        if cand.config in VALID:
            assert cand.ok and cand.latency > 0 and cand.compile_time is not None
        else:
            assert cand.latency is None and cand.reason
    broken = result.candidates[CONFIGS.index(COMPILE_FAILS)]
    assert broken.status == "compile_error" and "threads=0" in broken.reason and "gemm.py:" in broken.reason
    wrong = result.candidates[CONFIGS.index(MISMATCHES)]
    assert wrong.status == "mismatch" and "differs from the reference" in wrong.reason
    assert result.latency == min(c.latency for c in result.candidates if c.ok)
    assert result.best_index == CONFIGS.index(result.config)
    assert result.benchmarked == len(VALID)
    table = str(result)
    assert "compile_error" in table and "mismatch" in table and str(result.config) in table

    a = torch.randn(N, N, dtype=torch.float16)
    b = torch.randn(N, N, dtype=torch.float16)
    torch.testing.assert_close(kernel(a, b).float(), (a.float() @ b.float()), rtol=1e-2, atol=1e-1)

    # same static arguments: answered from memory, nothing tuned again
    before = len(bench_calls)
    assert tuned(N, N, N) is kernel
    assert len(bench_calls) == before


def test_second_run_takes_the_answer_from_disk(cache_dir: Path, bench_calls: list[object]) -> None:
    first = tuned_matmul()
    first(N, N, N)
    r1 = first.get_tuner_result()
    assert bench_calls and (cache_dir / "autotune" / f"{r1.key}.json").is_file()

    bench_calls.clear()
    second = tuned_matmul()  # a new object: nothing in memory
    kernel = second(N, N, N)
    r2 = second.get_tuner_result()
    assert r2.from_cache and r2.benchmarked == 0 and not bench_calls
    assert r2.config == r1.config and kernel.config == r1.config and r2.latency == r1.latency
    assert r2.key == r1.key and r2.cache_path.endswith(f"{r1.key}.json")
    assert [(c.status, c.latency) for c in r2.candidates] == [(c.status, c.latency) for c in r1.candidates]
    assert "from cache" in str(r2)

    # another problem size is another tuning (TileLang issue #1250)
    third = tuned_matmul()
    third(64, N, N)
    assert not third.get_tuner_result().from_cache and bench_calls


def test_store_can_be_disabled(cache_dir: Path) -> None:
    with knobs.scope(autotune_disable_cache=True):
        tuned_matmul(configs=VALID[:2])(N, N, N)
        again = tuned_matmul(configs=VALID[:2])
        again(N, N, N)
    assert not again.get_tuner_result().from_cache
    assert not (cache_dir / "autotune").exists()


def test_corrupt_record_is_tuned_again(cache_dir: Path, bench_calls: list[object]) -> None:
    tuned_matmul(configs=VALID[:3])(N, N, N)
    (path,) = (cache_dir / "autotune").glob("*.json")
    good = json.loads(path.read_text())
    for bad in ("{not json", json.dumps({**good, "best_index": 99}), json.dumps([1, 2])):
        path.write_text(bad)
        bench_calls.clear()
        tuned = tuned_matmul(configs=VALID[:3])
        tuned(N, N, N)
        assert not tuned.get_tuner_result().from_cache and bench_calls
        assert json.loads(path.read_text())["best_index"] == tuned.get_tuner_result().best_index
    again = tuned_matmul(configs=VALID[:3])
    again(N, N, N)
    assert again.get_tuner_result().from_cache


def test_unwritable_cache_dir_warns_and_still_tunes(tmp_path: Path) -> None:
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("")
    with knobs.scope(target_default="interp", cache_dir=str(blocker), autotune_workers=1):
        tuned = tuned_matmul(configs=VALID[:2])
        with pytest.warns(AutotuneCacheWarning, match="cannot write the autotune cache"):
            kernel = tuned(N, N, N)
    assert isinstance(kernel, JITKernel) and tuned.get_tuner_result().config in VALID[:2]


def test_decorator_and_explicit_parameters(cache_dir: Path, bench_calls: list[object]) -> None:
    @tilelang.autotune(configs={"block_M": [32, 64], "block_N": [64, 128]}, warmup=1, rep=3, ref_prog=ref_matmul)
    @tilelang.jit(out_idx=[-1])
    def mm(M, N, K, block_M=128, block_N=128, block_K=32):
        @T.prim_func
        def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
                A_s = T.alloc_shared((block_M, block_K), T.float16)
                B_s = T.alloc_shared((block_K, block_N), T.float16)
                C_f = T.alloc_fragment((block_M, block_N), T.float32)
                T.clear(C_f)
                for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                    T.copy(A[by * block_M, ko * block_K], A_s)
                    T.copy(B[ko * block_K, bx * block_N], B_s)
                    T.gemm(A_s, B_s, C_f)
                T.copy(C_f, C[by * block_M, bx * block_N])

        return main

    kernel = mm(N, N, N)
    result = mm.get_tuner_result()
    assert len(result.candidates) == 4 and all(c.ok for c in result.candidates)
    assert kernel.config in [{"block_M": m, "block_N": n} for m in (32, 64) for n in (64, 128)]

    # a tunable parameter passed explicitly: compiled as asked, not tuned
    bench_calls.clear()
    fixed = mm(N, N, N, block_M=64)
    assert isinstance(fixed, JITKernel) and not mm.get_tuner_result().tuned and not bench_calls
    assert fixed.func.script() == mm.jit_func.get_ir(N, N, N, block_M=64).script()
    positional = mm(N, N, N, 32, 64)
    assert not mm.get_tuner_result().tuned and positional.func.script() == mm.jit_func.get_ir(N, N, N, 32, 64).script()


def test_eager_style_tunes_with_the_given_tensors(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_random_inputs(self: Profiler, with_output: bool = False) -> list[object]:
        raise AssertionError("the eager tuner should use the caller's tensors")

    monkeypatch.setattr(Profiler, "get_inputs", no_random_inputs)
    a = torch.randn(N, N, dtype=torch.float16)
    b = torch.randn(N, N, dtype=torch.float16)
    configs = [{"block_M": 32}, {"block_M": 64, "block_N": 64}, {"block_M": 128, "block_K": 64}]
    tuned = tilelang.autotune(matmul_relu, configs=configs, warmup=1, rep=3,
                              ref_prog=lambda x, y: torch.relu(x @ y))
    out = tuned(a, b)
    torch.testing.assert_close(out.float(), torch.relu(a.float() @ b.float()), rtol=1e-2, atol=1e-1)
    result = tuned.get_tuner_result()
    assert result.config in configs and all(c.ok for c in result.candidates)
    assert tuned.compile(a, b) is result.kernel


# without the guard of element accesses, shift=1's store past the end is a run error
@tilelang.jit(out_idx=[-1], pass_configs={"tl.disable_safe_memory_legalize": True})
def scale(N, block=32, shift=0, reps=1, spin=0):
    for _ in range(spin):  # a slow trace
        pass

    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=32) as bx:
            for i in T.Parallel(block):
                B[bx * block + i + shift] = A[bx * block + i] * 2
            for _ in T.serial(reps):
                B[bx * block] = B[bx * block] + 0

    return main


def test_run_errors_and_timeouts_are_skipped(cache_dir: Path) -> None:
    configs = [{"shift": 1}, {"block": 64}, {"reps": 200_000}, {"block": 32}]
    tuned = tilelang.autotune(scale, configs=configs, warmup=1, rep=3, timeout=0.5, ref_prog=lambda a: a * 2)
    with knobs.scope(interp_race_check=False):  # else shift=1 fails first as a race (block 1 reads B[32])
        kernel = tuned(256)
    result = tuned.get_tuner_result()
    status = [c.status for c in result.candidates]
    assert status == ["run_error", "ok", "timeout", "ok"]
    assert "out-of-bounds write to `B`" in result.candidates[0].reason
    assert "0.5 s timeout" in result.candidates[2].reason
    assert kernel.config in ({"block": 64}, {"block": 32})


def test_all_candidates_failing_lists_each_reason(cache_dir: Path) -> None:
    tuned = tuned_matmul(configs=[COMPILE_FAILS, MISMATCHES])
    with pytest.raises(AutotuneError) as err:
        tuned(N, N, N)
    text = str(err.value)
    assert "no config worked" in text and "#0 {'threads': 0}: compile_error" in text
    assert "#1 {'trans_B': True}: mismatch" in text
    assert err.value.loc is not None and err.value.loc.file == __file__


def test_autotuner_class_with_a_plain_factory(cache_dir: Path) -> None:
    def factory(M, N, K, block_M=64, block_N=64):
        return matmul.fn(M, N, K, block_M=block_M, block_N=block_N)

    result = (
        AutoTuner.from_kernel(factory, configs=[{"block_M": 32}, {"block_M": 64, "block_N": 128}])
        .set_compile_args(out_idx=[-1], target="interp")
        .set_profile_args(warmup=1, rep=3, ref_prog=ref_matmul)
        .set_kernel_parameters((N, N, N))
        .run()
    )
    assert result.config in ({"block_M": 32}, {"block_M": 64, "block_N": 128})
    assert isinstance(result.kernel, JITKernel) and result.kernel.out_idx == (2,)


def test_set_autotune_inputs(cache_dir: Path) -> None:
    a = torch.ones(N, N, dtype=torch.float16)
    b = torch.ones(N, N, dtype=torch.float16)
    seen = []

    def ref(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        seen.append((x, y))
        return x @ y

    with autotuner.set_autotune_inputs(a, b):
        tuned_matmul(configs=VALID[:2], ref_prog=ref)(N, N, N)
    assert seen and all(x is a and y is b for x, y in seen)


# ---- bad input ------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("configs", "message"),
    [
        (5, "must be a list of dicts, a dict of lists or a callable"),
        ([], "is empty"),
        ({}, "is an empty dict"),
        ([{"block_M": 64}, 3], "config #1 for `matmul` is int 3, not a dict"),
        ({"block_M": 64}, "key 'block_M' maps to 64, not a non-empty list"),
        ({"block_M": []}, "key 'block_M' maps to [], not a non-empty list"),
        ([{"block_M": 64}, {"block_X": 1}], "config #1 {'block_X': 1}: `block_X` is not a parameter of `matmul`"),
    ],
)
def test_bad_configs_name_the_culprit(configs: object, message: str) -> None:
    with pytest.raises(AutotuneConfigError) as err:
        tilelang.autotune(matmul, configs=configs)
    assert message in str(err.value)
    assert isinstance(err.value, TileLangError) and err.value.loc.file == __file__


def test_unknown_key_lists_the_parameters() -> None:
    with pytest.raises(AutotuneConfigError, match=r"takes: M, N, K, block_M, block_N, block_K, in_dtype"):
        tilelang.autotune(matmul, configs=[{"blockM": 64}])


def test_callable_configs(cache_dir: Path) -> None:
    def good(M, N, K):
        return {"block_M": [32, M // 2]}

    tuned = tuned_matmul(configs=good)
    tuned(N, N, N)
    assert [c.config for c in tuned.get_tuner_result().candidates] == [{"block_M": 32}, {"block_M": 64}]

    tuned = tuned_matmul(configs=lambda M, N, K: [{"nope": 1}])
    with pytest.raises(AutotuneConfigError, match="`nope` is not a parameter of `matmul`") as err:
        tuned(N, N, N)
    assert err.value.loc.file == __file__


def test_rejects_non_functions() -> None:
    with pytest.raises(AutotuneConfigError, match="not a T.prim_func"):
        tilelang.autotune(matmul.get_ir(N, N, N), configs=VALID)
    with pytest.raises(AutotuneConfigError, match="decorates a function"):
        tilelang.autotune(42, configs=VALID)


# ---- workers and progress -----------------------------------------------------------------------

def test_worker_processes(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "_can_spawn", lambda: True)  # pytest's main script is guarded anyway
    configs = [{"block": 32}, {"block": 0}, {"spin": 10**10}, {"block": 64}]
    try:
        with knobs.scope(autotune_workers=2):
            tuned = tilelang.autotune(scale, configs=configs, warmup=1, rep=3, timeout=1, ref_prog=lambda a: a * 2)
            tuned(256)
        assert workers._pool is not None
        result = tuned.get_tuner_result()
        assert all(c.in_worker for c in result.candidates)  # compiled (or refused) by the workers
        assert [c.status for c in result.candidates] == ["ok", "compile_error", "timeout", "ok"]
        assert "ceildiv by zero" in result.candidates[1].reason
        assert "compile took longer than the 1 s timeout" in result.candidates[2].reason
    finally:
        autotuner.shutdown_workers()
    assert workers._pool is None


def test_workers_only_from_a_guarded_main(tmp_path: Path) -> None:
    import subprocess

    script = tmp_path / "tune.py"
    script.write_text(
        "from tilelang_x.autotuner.workers import _can_spawn\n"
        "print('top', _can_spawn())\n"
        "def f():\n"
        "    return _can_spawn()\n"
        "if __name__ == '__main__':\n"
        "    print('guarded', f())\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["top", "False", "guarded", "True"]


class _FakeTqdm:
    made: list[_FakeTqdm] = []

    def __init__(self, total: int, desc: str, leave: bool, file: object) -> None:
        self.total, self.desc, self.updates, self.closed = total, desc, 0, False
        _FakeTqdm.made.append(self)

    def update(self, n: int = 1) -> None:
        self.updates += n

    def set_postfix_str(self, text: str) -> None:
        pass

    def close(self) -> None:
        self.closed = True


class _Terminal:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("tty", [True, False])
def test_progress_bar_only_on_a_terminal(cache_dir: Path, monkeypatch: pytest.MonkeyPatch, tty: bool) -> None:
    fake = types.ModuleType("tqdm.auto")
    fake.tqdm = _FakeTqdm
    monkeypatch.setitem(sys.modules, "tqdm", types.ModuleType("tqdm"))
    monkeypatch.setitem(sys.modules, "tqdm.auto", fake)
    monkeypatch.setattr(sys, "stderr", _Terminal(tty))
    _FakeTqdm.made.clear()
    tuned_matmul(configs=VALID[:3])(N, N, N)
    if tty:
        (bar,) = _FakeTqdm.made
        assert bar.total == 3 and bar.updates == 3 and bar.closed and "matmul" in bar.desc
    else:
        assert not _FakeTqdm.made
