"""IR dumps after named stages: ``TILELANG_X_DUMP`` / ``knobs.compile.dump`` / ``options["dump"]``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import tilelang_x
import tilelang_x.language as T
from tilelang_x import compiler, knobs
from tilelang_x.core_ir.errors import TileLangError


def scale_func(n: int = 64) -> object:
    @T.prim_func
    def scale2(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=n) as _:
            for i in T.Parallel(n):
                Y[i] = X[i] * 2.0

    return scale2


@pytest.fixture(autouse=True)
def _fresh(fresh_registry: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TILELANG_X_DUMP", raising=False)
    monkeypatch.delenv("TILELANG_X_DUMP_DIR", raising=False)


def _run(kernel: object) -> None:
    x = torch.arange(64, dtype=torch.float32)
    torch.testing.assert_close(kernel(x), x * 2)  # type: ignore[operator]


def test_stage_names_for_the_interpreter() -> None:
    names = compiler.dump_stage_names("interp")
    assert names[0] == "input" and names[-1] == "codegen"
    assert {"specialize", "simplify", "verify"} <= set(names)


def test_dump_all_through_options(tmp_path: Path) -> None:
    folder = tmp_path / "dumps"
    func = scale_func()
    kernel = compiler.compile_prim_func(func, target="interp", out_idx=[-1],
                                        options={"dump": "all", "dump_dir": str(folder)})
    _run(kernel)
    names = sorted(os.listdir(folder))
    stages = compiler.dump_stage_names("interp")
    assert names == [f"scale2.{i:02d}.{stage}.txt" for i, stage in enumerate(stages)]
    assert (folder / names[0]).read_text() == kernel.func.script() + "\n"  # the IR as the frontend built it
    for name in names:
        assert "def scale2(" in (folder / name).read_text()
    # dumping does not change what the kernel computes or its source
    assert (folder / names[-1]).read_text().rstrip("\n") == kernel.get_kernel_source().rstrip("\n")


def test_dump_some_stages_as_a_list(tmp_path: Path) -> None:
    kernel = compiler.compile_prim_func(scale_func(), target="interp", out_idx=[-1],
                                        options={"dump": ["simplify", "codegen"], "dump_dir": str(tmp_path)})
    _run(kernel)
    names = sorted(os.listdir(tmp_path))
    assert len(names) == 2
    assert names[0].endswith(".simplify.txt") and names[1].endswith(".codegen.txt")


def test_dump_through_knobs_set_from_python(tmp_path: Path) -> None:
    with knobs.scope(compile_dump="input, verify", compile_dump_dir=str(tmp_path / "k")):
        kernel = tilelang_x.compile(scale_func(), out_idx=[-1], target="interp")
    _run(kernel)
    names = sorted(os.listdir(tmp_path / "k"))
    assert [n.split(".")[-2] for n in names] == ["input", "verify"]


def test_dump_through_the_environment(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        from test_dump import scale_func
        import tilelang_x
        tilelang_x.compile(scale_func(), out_idx=[-1], target="interp")
    """)
    env = {**os.environ, "TILELANG_X_DUMP": "all", "TILELANG_X_DUMP_DIR": str(tmp_path / "env")}
    proc = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)], env=env, cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    names = os.listdir(tmp_path / "env")
    assert any(n.endswith(".input.txt") for n in names) and any(n.endswith(".codegen.txt") for n in names)


def test_dump_true_means_all(tmp_path: Path) -> None:
    compiler.compile_prim_func(scale_func(), target="interp", out_idx=[-1],
                               options={"dump": True, "dump_dir": str(tmp_path)})
    assert len(os.listdir(tmp_path)) == len(compiler.dump_stage_names("interp"))


def test_dumping_bypasses_the_in_memory_cache(tmp_path: Path) -> None:
    first = compiler.compile_prim_func(scale_func(), target="interp", out_idx=[-1])
    again = compiler.compile_prim_func(scale_func(), target="interp", out_idx=[-1],
                                       options={"dump": "input", "dump_dir": str(tmp_path)})
    assert again is not first and os.listdir(tmp_path)


def test_unknown_stage_name_lists_the_stages(tmp_path: Path) -> None:
    func = scale_func()
    with pytest.raises(TileLangError) as info:
        compiler.compile_prim_func(func, target="interp", out_idx=[-1],
                                   options={"dump": "simplfy,codegen", "dump_dir": str(tmp_path / "d")})
    text = str(info.value)
    assert "unknown stage name for dumping: simplfy" in text
    for stage in compiler.dump_stage_names("interp"):
        assert stage in text.split("hint:")[1]
    assert "'all'" in text
    assert f"{func.loc.file}:{func.loc.line}" in text  # names the kernel
    assert not (tmp_path / "d").exists()  # nothing was written


def test_unknown_stage_name_from_the_knob_through_jit(tmp_path: Path) -> None:
    @tilelang_x.jit(out_idx=[-1], target="interp")
    def factory(n: int = 64):
        return scale_func(n)

    with knobs.scope(compile_dump="nosuch"), pytest.raises(TileLangError) as info:
        factory()
    assert "unknown stage names" not in str(info.value)
    assert "unknown stage name for dumping: nosuch" in str(info.value)
    assert "stages for target interp: input, " in str(info.value)


def test_bad_dump_value(tmp_path: Path) -> None:
    with pytest.raises(TileLangError, match="dump must be"):
        compiler.compile_prim_func(scale_func(), target="interp", options={"dump": 3})


def test_dump_folder_that_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(TileLangError) as info:
        compiler.compile_prim_func(scale_func(), target="interp",
                                   options={"dump": "all", "dump_dir": str(blocker / "sub")})
    assert "cannot write IR dumps" in str(info.value) and "TILELANG_X_DUMP_DIR" in str(info.value)


def test_cuda_codegen_dump_is_a_cu_file(tmp_path: Path) -> None:
    # codegen runs without a GPU; tlx_load may fail afterwards, the dumps are written first
    try:
        compiler.compile_prim_func(scale_func(), target="cuda:sm_80", out_idx=[-1],
                                   options={"dump": "codegen", "dump_dir": str(tmp_path)})
    except TileLangError:
        pass
    names = os.listdir(tmp_path)
    if not names:
        pytest.skip("the CUDA backend could not generate code for this kernel here")
    (name,) = names
    assert name.endswith(".codegen.cu")
    assert "extern \"C\"" in (tmp_path / name).read_text()


def test_dump_through_the_jit_decorator(tmp_path: Path) -> None:
    @tilelang_x.jit(out_idx=[-1], target="interp", dump="input,codegen", dump_dir=tmp_path)
    def factory(n: int):
        return scale_func(n)

    _run(factory(64))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["scale2.00.input.txt", f"scale2.{len(compiler.dump_stage_names('interp')) - 1:02d}.codegen.txt"]


def test_pass_configs_knob_is_merged_under_the_kernels_own(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    real = compiler.build

    def spy(func, tgt, opts, *a, **k):  # type: ignore[no-untyped-def]
        seen.append(dict(opts.get("pass_configs") or {}))
        return real(func, tgt, opts, *a, **k)

    monkeypatch.setattr(compiler, "build", spy)
    monkeypatch.setenv("TILELANG_X_PASS_CONFIGS", '{"tlx.pingpong": true, "tlx.multicast": true}')
    compiler.compile_prim_func(scale_func(), target="interp", out_idx=[-1],
                               options={"pass_configs": {"tlx.multicast": False}})
    assert seen == [{"tlx.pingpong": True, "tlx.multicast": False}]
    monkeypatch.setenv("TILELANG_X_PASS_CONFIGS", "[1]")
    with pytest.raises(TileLangError, match="JSON object"):
        compiler.compile_prim_func(scale_func(8), target="interp", out_idx=[-1])
