"""The example third-party plugin ``contrib/tilelang_x_gemm_counter``, a distribution of its own.

It is installed with pip for real (offline: ``--no-build-isolation --no-deps`` of the local folder)
into a temporary folder, unless this environment already has it (``scripts/test`` installs it),
and then shown to be discovered through the ``tilelang_x.backends`` entry points, to override the
interpreter's ``T.gemm`` executor (its counter increases, results still match torch), and to leave
the default in place once it is gone. "Gone" is checked in a subprocess whose site folder is this
environment's minus the files that ``pip uninstall`` would delete (the dist's RECORD), so the test
never changes the environment it runs in.
"""

from __future__ import annotations

import importlib.metadata as md
import inspect
import json
import os
import shutil
import site
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tilelang_x import compiler, registry
from tilelang_x.core_ir.tileops import Gemm
from tilelang_x.core_ir.visit import walk

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_DIR = ROOT / "contrib" / "tilelang_x_gemm_counter"
DIST = "tilelang-x-gemm-counter"
MODULE = "tilelang_x_gemm_counter"


def _installed_here() -> md.Distribution | None:
    """The plugin's distribution if this environment has it installed."""
    try:
        return md.distribution(DIST)
    except md.PackageNotFoundError:
        return None


def _pip_install(source: Path, target: Path) -> None:
    try:
        import setuptools  # noqa: F401 - --no-build-isolation builds with this environment's setuptools
    except ImportError:
        pytest.skip("setuptools is not installed: pip cannot build the plugin offline")
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps", "--no-index",
           "--disable-pip-version-check", "--target", str(target), str(source)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"pip install of {source} failed:\n{proc.stdout}\n{proc.stderr}"


@pytest.fixture(scope="module")
def pip_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder the plugin was pip-installed into (built from a copy of contrib/, so that the build
    leaves nothing in the checkout)."""
    tmp = tmp_path_factory.mktemp("gemm_counter")
    source = tmp / "src"
    shutil.copytree(PLUGIN_DIR, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp / "site"
    _pip_install(source, target)
    return target


@pytest.fixture
def plugin(pip_site: Path, monkeypatch: pytest.MonkeyPatch, fresh_registry: None) -> Iterator[object]:
    """The plugin, discoverable by the registry: as installed here, or from ``pip_site``."""
    borrowed = _installed_here() is None
    if borrowed:
        monkeypatch.syspath_prepend(str(pip_site))
        registry.reset()
    registry.plugin_manager()
    import tilelang_x_gemm_counter as counter

    counter.reset()
    yield counter
    if borrowed:  # forget the modules imported from the temporary folder
        for name in [m for m in sys.modules if m == MODULE or m.startswith(MODULE + ".")]:
            del sys.modules[name]


def gemm_func(M: int = 96, N: int = 64, K: int = 80, bM: int = 32, bN: int = 32, bK: int = 16) -> object:
    import tilelang_x.language as T

    @T.prim_func
    def counted(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            A_s = T.alloc_shared((bM, bK), T.float16)
            B_s = T.alloc_shared((bK, bN), T.float16)
            C_f = T.alloc_fragment((bM, bN), T.float32)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
                T.copy(A[by * bM, k * bK], A_s)
                T.copy(B[k * bK, bx * bN], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * bM, bx * bN])

    return counted


# ---- a separate distribution -----------------------------------------------------------------
def test_it_is_a_distribution_of_its_own() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    own = tomllib.loads((PLUGIN_DIR / "pyproject.toml").read_text())
    main = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert own["project"]["name"] == DIST != main["project"]["name"]
    assert own["project"]["entry-points"]["tilelang_x.backends"] == {"gemm_counter": f"{MODULE}.plugin"}
    # tilelang-x's own package list does not reach into it, and it is not a package of tilelang_x.contrib
    packages = main["tool"]["setuptools"]["packages"]
    assert not [p for p in packages if "gemm_counter" in p]
    assert not (PLUGIN_DIR / "__init__.py").exists()
    assert (PLUGIN_DIR / "src" / MODULE / "plugin.py").is_file()


def test_importing_tilelang_x_contrib_does_not_import_the_plugin() -> None:
    code = (
        "import sys, tilelang_x.contrib, tilelang_x\n"
        "assert not [m for m in sys.modules if 'gemm_counter' in m], sorted(sys.modules)\n"
        "print(tilelang_x.contrib.__name__)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "tilelang_x.contrib"


def test_pip_installed_it(pip_site: Path) -> None:
    (info,) = pip_site.glob("tilelang_x_gemm_counter-*.dist-info")
    assert "[tilelang_x.backends]" in (info / "entry_points.txt").read_text()
    assert (pip_site / MODULE / "plugin.py").is_file()


# ---- discovered, overrides, correct ----------------------------------------------------------
def test_discovered_through_entry_points(plugin: object) -> None:
    records = {r.name: r for r in registry.plugins()}
    record = records["gemm_counter"]
    assert record.ok, record.error
    assert record.dist == DIST and record.version == "0.1.0" and not record.builtin
    assert record.module == f"{MODULE}.plugin"
    names = list(records)
    assert names.index("gemm_counter") > names.index("interp")  # registered after the built-ins


def test_override_counts_and_results_match_torch(plugin: object) -> None:
    counter = plugin
    func = gemm_func()
    kernel = compiler.compile_prim_func(func, target="interp", out_idx=[-1])
    assert counter.stats() == {"lowered": 1, "executed": 0}  # type: ignore[attr-defined]
    g = torch.Generator().manual_seed(0)
    a = torch.randn(96, 80, generator=g).half()
    b = torch.randn(80, 64, generator=g).half()
    out = kernel(a, b)
    torch.testing.assert_close(out, a.float() @ b.float(), rtol=1e-3, atol=1e-3)
    blocks, k_steps = 2 * 3, 5
    assert counter.calls() == blocks * k_steps  # type: ignore[attr-defined]
    kernel(a, b)
    assert counter.calls() == 2 * blocks * k_steps  # type: ignore[attr-defined]


def test_override_answers_only_gemm_on_the_interpreter(plugin: object) -> None:
    from tilelang_x.plugins.interp.lower import LowerContext
    from tilelang_x.target import Target

    func = gemm_func()
    ops = [n for n in walk(func.body) if hasattr(n, "regions")]
    gemm = next(op for op in ops if isinstance(op, Gemm))
    other = next(op for op in ops if not isinstance(op, Gemm))
    interp = Target("interp")
    ctx = LowerContext(target=interp, func=func)
    relay = registry.hook()
    assert relay.tlx_lower_op(target=interp, op=gemm, ctx=ctx).__qualname__.startswith("wrap.")
    assert relay.tlx_lower_op(target=interp, op=other, ctx=ctx).__module__.startswith("tilelang_x.plugins.interp")
    from tilelang_x_gemm_counter import plugin as hooks

    assert hooks.tlx_lower_op(target=Target("cuda", "sm_80"), op=gemm, ctx=None) is None


# ---- gone again ------------------------------------------------------------------------------
PROBE = textwrap.dedent("""
    import json, site, sys, warnings
    for folder in json.loads(sys.argv[1]):
        site.addsitedir(folder)
    warnings.simplefilter("ignore")
    sys.path.insert(0, sys.argv[2])
    import numpy as np
    from tilelang_x import compiler, registry
    from tilelang_x.core_ir.tileops import Gemm
    from tilelang_x.core_ir.visit import walk
    from tilelang_x.plugins.interp.lower import LowerContext
    from tilelang_x.target import Target
    from gemm_kernel import gemm_func

    func = gemm_func()
    gemm = next(op for op in walk(func.body) if isinstance(op, Gemm))
    executor = registry.hook().tlx_lower_op(target=Target("interp"), op=gemm,
                                            ctx=LowerContext(target=Target("interp"), func=func))
    kernel = compiler.compile_prim_func(func, target="interp", out_idx=[-1])
    rng = np.random.default_rng(0)
    a = rng.standard_normal((96, 80)).astype(np.float16)
    b = rng.standard_normal((80, 64)).astype(np.float16)
    err = float(np.abs(kernel(a, b) - a.astype(np.float32) @ b.astype(np.float32)).max())
    try:
        import tilelang_x_gemm_counter as counter
        calls = counter.calls()
    except ImportError:
        calls = None
    print(json.dumps({"plugins": [r.name for r in registry.plugins()], "executor": executor.__module__,
                      "calls": calls, "err": err, "torch": "torch" in sys.modules}))
""")


def _site_dirs() -> list[Path]:
    return [Path(p) for p in dict.fromkeys(site.getsitepackages()) if os.path.isdir(p)]


def _site_without_dist(tmp: Path) -> list[str]:
    """This environment's site folders as symlink mirrors, less every top-level file or folder the
    plugin's RECORD names (what ``pip uninstall`` would delete)."""
    dist = _installed_here()
    hidden: set[str] = set()
    if dist is not None:
        for f in dist.files or ():
            parts = Path(str(f)).parts
            if parts and parts[0] != "..":
                hidden.add(parts[0])
    mirrors = []
    for i, folder in enumerate(_site_dirs()):
        mirror = tmp / f"site{i}"
        mirror.mkdir()
        for name in os.listdir(folder):
            if name not in hidden:
                (mirror / name).symlink_to(folder / name)
        mirrors.append(str(mirror))
    return mirrors


def _probe(sites: list[str], cwd: Path) -> dict[str, object]:
    """Run ``PROBE`` in a fresh interpreter whose only site folders are ``sites``."""
    kernels = cwd / "probe"
    kernels.mkdir(exist_ok=True)
    (kernels / "gemm_kernel.py").write_text("from __future__ import annotations\n\n\n" + inspect.getsource(gemm_func))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONNOUSERSITE"] = "1"
    proc = subprocess.run([sys.executable, "-S", "-c", PROBE, json.dumps(sites), str(kernels)],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(os.name != "posix", reason="uses symlinks")
def test_without_the_dist_the_default_comes_back(pip_site: Path, tmp_path: Path) -> None:
    without = _site_without_dist(tmp_path)
    if _installed_here() is None:
        with_it = [*without, str(pip_site)]
    else:
        with_it = [str(p) for p in _site_dirs()]

    installed = _probe(with_it, tmp_path)
    assert "gemm_counter" in installed["plugins"]  # type: ignore[operator]
    assert installed["executor"] == MODULE and installed["calls"] == 6 * 5
    assert installed["err"] < 1e-3  # type: ignore[operator]

    gone = _probe(without, tmp_path)
    assert "gemm_counter" not in gone["plugins"]  # type: ignore[operator]
    assert "interp" in gone["plugins"]  # type: ignore[operator]
    assert gone["executor"] == "tilelang_x.plugins.interp.lower.gemm"
    assert gone["calls"] is None  # not importable: uninstalled
    assert gone["err"] < 1e-3  # type: ignore[operator]


def test_a_broken_plugin_does_not_stop_it(plugin: object, install_dist) -> None:
    counter = plugin
    install_dist("tlx-broken", {"broken": "broken_tlx_plugin"},
                 {"broken_tlx_plugin": "raise ImportError('vendor SDK missing')\n"})
    with pytest.warns(registry.PluginWarning, match="vendor SDK missing"):
        kernel = compiler.compile_prim_func(gemm_func(), target="interp", out_idx=[-1])
    a, b = torch.ones(96, 80).half(), torch.ones(80, 64).half()
    torch.testing.assert_close(kernel(a, b), torch.full((96, 64), 80.0))
    assert counter.calls() == 30  # type: ignore[attr-defined]
    records = {r.name: r for r in registry.plugins()}
    assert records["gemm_counter"].ok and records["broken"].status == "failed"
