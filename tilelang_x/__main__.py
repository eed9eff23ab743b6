"""The command line: ``python -m tilelang_x info`` (also installed as ``tilelang-x``).

``info`` prints the version, every backend plugin (where it comes from, whether it loaded and
why not), the targets each provides and whether kernels can be built there, the devices found on
this machine, and what ``target="auto"`` resolves to. ``--json`` prints the same as JSON, for bug
reports.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import platform
import sys
from collections.abc import Sequence
from typing import Any

from . import __version__


def _version_of(dist: str) -> str:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "not installed"


def collect_info() -> dict[str, Any]:
    """Everything ``info`` shows, as plain data."""
    from . import knobs, registry

    data = {
        "tilelang_x": __version__,
        "python": platform.python_version(),
        "platform": f"{sys.platform}-{platform.machine()}",
        "torch": _version_of("torch"),
        "pluggy": _version_of("pluggy"),
        "default_target": knobs.target.default,
    }
    data.update(registry.describe())
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
    auto = data["auto"]
    lines += [
        "",
        f"default target: {data['default_target']} (TILELANG_X_TARGET)",
        f"auto -> {auto['target']} ({auto['reason']})",
    ]
    return "\n".join(lines)


def _cmd_info(args: argparse.Namespace) -> int:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # failures are listed in the report itself
        data = collect_info()
    print(json.dumps(data, indent=2) if args.json else format_info(data))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tilelang_x", description="tilelang-x: a pluggable compiler for tile-level AI kernels"
    )
    parser.add_argument("--version", action="version", version=f"tilelang-x {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    info = sub.add_parser("info", help="plugins, targets, detected devices and what target='auto' picks")
    info.add_argument("--json", action="store_true", help="print JSON (for bug reports)")
    info.set_defaults(run=_cmd_info)
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
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
