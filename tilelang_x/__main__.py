"""The command line: ``python -m tilelang_x COMMAND`` (also installed as ``tilelang-x``).

``info`` (the default)
    The version, every backend plugin (where it comes from, whether it loaded and why not), the
    targets each provides and whether kernels can be built there, the device toolchains found
    (nvcc, NVRTC, clang-19...), the devices found on this machine, what ``target="auto"``
    resolves to, the on-disk cache and the ``TILELANG_X_*`` knobs that are set. ``--json`` prints
    the same as JSON, for bug reports.
``doctor``
    Compiles and runs two small kernels (a vector add and a GEMM) on every available target and
    prints PASS or FAIL (with the reason) per target; targets that are not available here are
    listed as SKIP with the reason. Exits 1 when an available target fails.
``cache info`` / ``cache clear``
    Where the on-disk kernel cache is and what it holds; delete its entries.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from . import __version__


def _version_of(dist: str) -> str:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "not installed"


def _first_line(cmd: list[str]) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = [ln.strip() for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    return lines[0] if lines else ""


def _tool(name: str, backend: str, path: str | None, version: str = "", note: str = "") -> dict[str, Any]:
    return {"name": name, "backend": backend, "found": path is not None, "path": path or "", "version": version,
            "note": note}


def _cuda_tools() -> list[dict[str, Any]]:
    try:
        from .plugins.cuda import compile as cc
    except Exception as exc:  # noqa: BLE001 - a broken plugin must not break `info`
        return [_tool("nvcc", "cuda", None, note=f"cannot look: {exc}"),
                _tool("NVRTC", "cuda", None, note=f"cannot look: {exc}")]
    out = []
    try:
        nvcc = cc.find_nvcc()
        version = cc.nvcc_version(nvcc) if nvcc else ""
        out.append(_tool("nvcc", "cuda", nvcc, version.removeprefix("nvcc ").strip(),
                         "" if nvcc else "not on PATH, $CUDA_HOME/bin or TILELANG_X_NVCC"))
    except Exception as exc:  # noqa: BLE001
        out.append(_tool("nvcc", "cuda", None, note=f"{type(exc).__name__}: {exc}"))
    try:
        nvrtc = cc.find_nvrtc()
        if nvrtc is not None:
            out.append(_tool("NVRTC", "cuda", nvrtc.path, f"{nvrtc.version[0]}.{nvrtc.version[1]}"))
        else:
            out.append(_tool("NVRTC", "cuda", None, note="pip install nvidia-cuda-nvrtc (or set TILELANG_X_NVRTC)"))
    except Exception as exc:  # noqa: BLE001
        out.append(_tool("NVRTC", "cuda", None, note=f"{type(exc).__name__}: {exc}"))
    return out


def _which_tool(name: str, backend: str, exe: str, version_args: list[str] | None) -> dict[str, Any]:
    path = shutil.which(exe)
    version = _first_line([path, *version_args]) if path and version_args else ""
    return _tool(name, backend, path, version)


def collect_toolchains() -> list[dict[str, Any]]:
    """The device toolchains tilelang-x can use, found or not (nvcc, NVRTC, clang-19 for HIP,
    xcrun for Metal, bisheng for Ascend)."""
    return [
        *_cuda_tools(),
        _which_tool("clang-19", "hip", "clang-19", ["--version"]),
        _which_tool("xcrun (metal)", "metal", "xcrun", None),
        _which_tool("bisheng", "ascend", "bisheng", ["--version"]),
    ]


def _knobs_set() -> dict[str, str]:
    from . import knobs

    out = {}
    for dotted, knob in knobs.all_knobs().items():
        # only knobs.py reads the environment: ask each knob its value
        namespace, _, name = dotted.partition(".")
        try:
            value = getattr(getattr(knobs, namespace), name)
        except ValueError as exc:  # e.g. an int knob set to text
            out[knob.env] = f"<invalid: {exc}>"
            continue
        if value != knob.default:
            out[knob.env] = str(value)
    return out


def collect_info() -> dict[str, Any]:
    """Everything ``info`` shows, as plain data."""
    from . import cache, knobs, registry

    data = {
        "tilelang_x": __version__,
        "python": platform.python_version(),
        "platform": f"{sys.platform}-{platform.machine()}",
        "torch": _version_of("torch"),
        "pluggy": _version_of("pluggy"),
        "default_target": knobs.target.default,
    }
    data.update(registry.describe())
    data["toolchains"] = collect_toolchains()
    data["cache"] = cache.info()
    data["knobs"] = _knobs_set()
    return data


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    if not rows:
        return [indent + "(none)"]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [cell.ljust(w) for cell, w in zip(row, widths)]
        out.append((indent + "  ".join(cells)).rstrip())
    return out


def format_info(data: dict[str, Any]) -> str:
    """``collect_info()`` as the text ``info`` prints."""
    lines = [
        f"tilelang-x {data['tilelang_x']}  (python {data['python']}, {data['platform']}, "
        f"torch {data['torch']}, pluggy {data['pluggy']})",
        "",
        "plugins (entry-point group tilelang_x.backends):",
    ]
    rows = []
    for p in data["plugins"]:
        origin = f"{p['dist']} {p['version']}" if p["dist"] else "?"
        state = p["status"] if p["status"] != "failed" else f"FAILED: {p['error']}"
        rows.append([p["name"], p["module"], origin, state])
    lines += _table(rows)
    lines += ["", "targets:"]
    status = {(s["plugin"], s["target"]): s for s in data["status"]}
    rows = []
    for t in data["targets"]:
        s = status.get((t["plugin"], t["backend"]))
        if s is None:
            avail = "available"
        elif s["available"]:
            avail = "available" + (f" ({s['reason']})" if s["reason"] else "")
        else:
            avail = f"unavailable: {s['reason']}"
        rows.append([t["backend"], ", ".join(t["archs"]) or "-", avail])
    lines += _table(rows)
    lines += ["", "devices detected:"]
    rows = [[d["name"], d["target"], f"x{d['count']}", f"priority {d['priority']}"] for d in data["devices"]]
    lines += _table(rows)
    if "toolchains" in data:
        lines += ["", "toolchains:"]
        rows = []
        for t in data["toolchains"]:
            if t["found"]:
                rows.append([t["name"], t["backend"], t["version"] or "?", t["path"]])
            else:
                rows.append([t["name"], t["backend"], "not found", t["note"]])
        lines += _table(rows)
    auto = data["auto"]
    lines += [
        "",
        f"default target: {data['default_target']} (TILELANG_X_TARGET)",
        f"auto -> {auto['target']} ({auto['reason']})",
    ]
    if "cache" in data:
        c = data["cache"]
        state = "disabled (TILELANG_X_DISABLE_CACHE)" if not c["enabled"] else (
            "" if c["writable"] else "NOT WRITABLE: kernels are not cached")
        line = f"cache: {c['dir']}  {c['entries']} entries, {_size(c['bytes'])}"
        lines.append(line + (f"  {state}" if state else ""))
    if data.get("knobs"):
        lines.append("knobs set: " + ", ".join(f"{k}={v}" for k, v in data["knobs"].items()))
    return "\n".join(lines)


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _cmd_info(args: argparse.Namespace) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # failures are listed in the report itself
        data = collect_info()
    print(json.dumps(data, indent=2) if args.json else format_info(data))
    return 0


# ---- doctor ----------------------------------------------------------------------------------
def _doctor_add(N: int = 1024, block: int = 256) -> Any:
    from . import language as T

    @T.prim_func
    def tlx_doctor_add(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32), C: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return tlx_doctor_add


def _doctor_gemm(M: int = 64, N: int = 64, K: int = 64, bM: int = 64, bN: int = 64, bK: int = 32) -> Any:
    from . import language as T

    @T.prim_func
    def tlx_doctor_gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                        C: T.Tensor((M, N), T.float32)):
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

    return tlx_doctor_gemm


def _check_add(target: Any) -> None:
    import torch

    from .jit import compile as tl_compile

    kernel = tl_compile(_doctor_add(), out_idx=[-1], target=target)
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(1024, generator=g), torch.randn(1024, generator=g)
    dev = kernel.device_type
    out = kernel(a.to(dev), b.to(dev))
    torch.testing.assert_close(out.cpu(), a + b, rtol=1e-5, atol=1e-5)


def _check_gemm(target: Any) -> None:
    import torch

    from .jit import compile as tl_compile

    kernel = tl_compile(_doctor_gemm(), out_idx=[-1], target=target)
    g = torch.Generator().manual_seed(1)
    a = torch.randn(64, 64, generator=g).half()
    b = torch.randn(64, 64, generator=g).half()
    dev = kernel.device_type
    out = kernel(a.to(dev), b.to(dev))
    torch.testing.assert_close(out.cpu(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


#: What ``doctor`` runs on each target: (name, check(target) raising on failure).
DOCTOR_CHECKS: list[tuple[str, Callable[[Any], None]]] = [("add", _check_add), ("gemm", _check_gemm)]


def _reason(exc: BaseException, limit: int = 600) -> str:
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def doctor_targets(only: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The targets ``doctor`` looks at: ``{"name", "target", "available", "reason"}`` per target
    kind a plugin provides (the detected device's architecture when there is one)."""
    from . import registry

    status = {}
    for _plugin, name, ok, reason in registry.statuses():
        status.setdefault(name.partition(":")[0], (ok, reason))
    devices = {d.target.backend: d.target for d in registry.detected_devices()}
    rows = []
    seen = set()
    for _plugin, info in registry.targets():
        name = info.backend
        if name in seen or (only and name not in only):
            continue
        seen.add(name)
        ok, reason = status.get(name, (True, ""))
        rows.append({"name": name, "target": devices.get(name), "available": ok, "reason": reason})
    for name in only:
        if name not in seen:
            rows.append({"name": name, "target": None, "available": True, "reason": ""})
    return rows


def run_doctor(only: Sequence[str] = (), checks: Sequence[tuple[str, Callable[[Any], None]]] | None = None,
               echo: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run ``checks`` (default ``DOCTOR_CHECKS``) on every available target (or those in
    ``only``); returns one result per target: ``{"target", "result": PASS|FAIL|SKIP, "reason",
    "seconds"}``. ``echo`` is called with each result as it is known."""
    import torch  # noqa: F401 - imported before the first check so its time is not charged to it

    from . import registry

    checks = DOCTOR_CHECKS if checks is None else checks
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", registry.InterpreterFallbackWarning)
        rows = doctor_targets(only)
    for row in rows:
        name = row["name"]
        result: dict[str, Any] = {"target": name, "result": "PASS", "reason": "", "seconds": {}}
        if not row["available"]:
            result.update(result="SKIP", reason=row["reason"] or "not available here")
        else:
            try:
                target = registry.resolve_target(row["target"] or name)
                result["target"] = str(target)
            except Exception as exc:  # noqa: BLE001 - report, go on with the next target
                target = None
                result.update(result="FAIL", reason=_reason(exc))
            for check_name, check in checks if target is not None else ():
                start = time.perf_counter()
                try:
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        check(target)
                except Exception as exc:  # noqa: BLE001 - a failed check is the answer
                    result.update(result="FAIL", reason=f"{check_name}: {_reason(exc)}")
                    break
                finally:
                    result["seconds"][check_name] = round(time.perf_counter() - start, 3)
                notes = [str(w.message) for w in caught if issubclass(w.category, registry.PluginWarning)]
                if notes:
                    result.setdefault("notes", []).extend(notes)
        results.append(result)
        if echo is not None:
            echo(result)
    return results


def _print_doctor_row(result: dict[str, Any]) -> None:
    timing = ", ".join(f"{k} {v:.2f} s" for k, v in result["seconds"].items())
    line = f"  {result['target']:<16} {result['result']}"
    if result["result"] == "PASS":
        line += f"  ({timing})" if timing else ""
    else:
        line += f"  {result['reason']}"
    print(line, flush=True)
    for note in result.get("notes", ()):
        print(f"  {'':<16} note: {note}", flush=True)


def _cmd_doctor(args: argparse.Namespace) -> int:
    only = [t.strip() for spec in args.target or () for t in spec.split(",") if t.strip()]
    if args.json:
        results = run_doctor(only)
        print(json.dumps(results, indent=2))
    else:
        print(f"tilelang-x {__version__} doctor: compiling and running "
              f"{', '.join(n for n, _ in DOCTOR_CHECKS)} on each available target", flush=True)
        results = run_doctor(only, echo=_print_doctor_row)
        failed = [r["target"] for r in results if r["result"] == "FAIL"]
        passed = [r["target"] for r in results if r["result"] == "PASS"]
        print(f"{len(passed)} passed, {len(failed)} failed"
              + (f" ({', '.join(failed)})" if failed else "")
              + f", {len(results) - len(passed) - len(failed)} skipped", flush=True)
    if not results:
        print("no target to check", file=sys.stderr)
        return 1
    return 1 if any(r["result"] == "FAIL" for r in results) else 0


# ---- cache -----------------------------------------------------------------------------------
def _cmd_cache(args: argparse.Namespace) -> int:
    from . import cache

    action = args.action or "info"
    if action == "info":
        data = cache.info()
        if args.json:
            print(json.dumps(data, indent=2))
            return 0
        state = "enabled" if data["enabled"] else "disabled (TILELANG_X_DISABLE_CACHE / knobs.cache.disable)"
        print(f"kernel cache: {data['dir']}")
        print(f"  set with {data['knob']}; {state}")
        if not data["writable"]:
            print("  NOT WRITABLE: kernels compile but are not cached; point TILELANG_X_CACHE_DIR elsewhere")
        print(f"  {data['entries']} entries, {_size(data['bytes'])}")
        for ns, item in data["namespaces"].items():
            kept = f", {item['kept_files']} kept sources of failed compiles" if item["kept_files"] else ""
            print(f"    {ns:<10} {item['entries']} entries, {_size(item['bytes'])}{kept}")
        return 0
    removed = cache.clear(namespace=args.namespace)
    if args.json:
        print(json.dumps({"dir": cache.cache_dir(), **removed}, indent=2))
    else:
        print(f"removed {removed['entries']} entries ({_size(removed['bytes'])}) and "
              f"{removed['files'] - removed['entries']} other files from {cache.cache_dir()}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tilelang_x", description="tilelang-x: a pluggable compiler for tile-level AI kernels"
    )
    parser.add_argument("--version", action="version", version=f"tilelang-x {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    info = sub.add_parser("info", help="plugins, targets, toolchains, detected devices and what target='auto' picks")
    info.add_argument("--json", action="store_true", help="print JSON (for bug reports)")
    info.set_defaults(run=_cmd_info)
    doctor = sub.add_parser("doctor", help="compile and run small kernels on every available target: PASS/FAIL")
    doctor.add_argument("--target", action="append", metavar="NAME",
                        help="check only this target (repeat, or separate with commas)")
    doctor.add_argument("--json", action="store_true", help="print JSON")
    doctor.set_defaults(run=_cmd_doctor)
    cache = sub.add_parser("cache", help="the on-disk kernel cache: `cache info`, `cache clear`")
    cache.add_argument("action", nargs="?", choices=("info", "clear"), help="info (default) or clear")
    cache.add_argument("--namespace", metavar="NAME", help="clear only this part of the cache (e.g. cuda)")
    cache.add_argument("--json", action="store_true", help="print JSON")
    cache.set_defaults(run=_cmd_cache)
    return parser


def _subcommands(parser: argparse.ArgumentParser) -> list[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = set(_subcommands(parser))
    if not any(a in commands or a in ("-h", "--help", "--version") for a in argv):
        argv.insert(0, "info")  # no subcommand: behave as `info`
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except BrokenPipeError:  # `python -m tilelang_x info | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
