# shellcheck shell=bash
# Sourced by scripts/demo and scripts/test: create (or reuse) .venv and install tilelang-x into it.
# Idempotent: a stamp (a hash of the packaging files) skips the pip step when nothing changed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
# torch first, pinned: this CPU wheel is what a CPU machine should get; an unpinned requirement
# could pull a multi-GB CUDA build. On a GPU machine the same pin gives the CUDA build.
TORCH_PIN="torch==2.13.0"

log() { printf '==> %s\n' "$*" >&2; }

# The example third-party plugin: a distribution of its own, installed by scripts/test as a vendor's is.
CONTRIB_PLUGIN="$ROOT/contrib/tilelang_x_gemm_counter"
CONTRIB_DIST="tilelang-x-gemm-counter"

_packaging_hash() {
  "$PY" - "$ROOT" <<'PY'
import hashlib, pathlib, sys
root = pathlib.Path(sys.argv[1])
h = hashlib.sha256()
for name in ("pyproject.toml", "setup.py"):
    p = root / name
    if p.exists():
        h.update(p.read_bytes())
print(h.hexdigest())
PY
}

_installed_here() {
  # tilelang_x importable from outside the checkout, from this checkout, with its entry points
  (cd / && "$PY" - "$ROOT" <<'PY'
import importlib.metadata as md, os, sys
import tilelang_x
assert os.path.dirname(os.path.abspath(tilelang_x.__file__)) == os.path.join(sys.argv[1], "tilelang_x")
assert md.entry_points(group="tilelang_x.backends").names
PY
  ) >/dev/null 2>&1
}

# setup_venv [test]: the venv with torch and tilelang-x (editable); "test" adds the test extras.
setup_venv() {
  local extras="${1:-}"
  if [ ! -x "$PY" ] || ! "$PY" -c 'import sys' >/dev/null 2>&1; then
    log "creating $VENV"
    "${PYTHON:-python3}" -m venv "$VENV" || {
      log "could not create a virtual environment: install Python 3.10+ with its venv module"
      return 1
    }
  fi
  if ! "$PY" -c 'import torch' >/dev/null 2>&1; then
    log "installing $TORCH_PIN"
    "$PY" -m pip install --quiet "$TORCH_PIN"
  fi
  local want stamp spec
  want="$(_packaging_hash)"
  stamp="$VENV/.tilelang-x-installed${extras:+-$extras}"
  spec="."
  [ -n "$extras" ] && spec=".[$extras]"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] || ! _installed_here; then
    log "installing tilelang-x from $ROOT ($spec, editable)"
    (cd "$ROOT" && "$PY" -m pip install --quiet -e "$spec")
    echo "$want" > "$stamp"
    [ -n "$extras" ] && echo "$want" > "$VENV/.tilelang-x-installed"
  fi
  return 0
}

_tree_hash() {
  # a hash of the source files under $1 (build outputs left out)
  "$PY" - "$1" <<'PY'
import hashlib, pathlib, sys
root = pathlib.Path(sys.argv[1])
h = hashlib.sha256()
for p in sorted(root.rglob("*")):
    rel = p.relative_to(root)
    if p.is_file() and not {"build", "__pycache__"} & set(rel.parts) and not any(
            part.endswith(".egg-info") for part in rel.parts):
        h.update(str(rel).encode() + b"\0" + p.read_bytes())
print(h.hexdigest())
PY
}

# setup_contrib_plugin: pip-install contrib/tilelang_x_gemm_counter (its own distribution) into the
# venv, as `pip install ./contrib/tilelang_x_gemm_counter` would. Offline: it is built with the venv's
# setuptools (--no-build-isolation --no-deps --no-index), from a copy so that the checkout stays clean.
# Idempotent: skipped while the installed copy matches the source (a stamp holds the source's hash).
setup_contrib_plugin() {
  local want stamp tmp
  want="$(_tree_hash "$CONTRIB_PLUGIN")"
  stamp="$VENV/.tilelang-x-gemm-counter-installed"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
      && "$PY" -c "import importlib.metadata as m; m.distribution('$CONTRIB_DIST')" >/dev/null 2>&1; then
    return 0
  fi
  local flags=(--quiet --no-deps --disable-pip-version-check)
  if "$PY" -c 'import setuptools' >/dev/null 2>&1; then
    flags+=(--no-build-isolation --no-index)
  else
    log "setuptools is not in $VENV: pip builds $CONTRIB_DIST in an isolated environment (needs the index)"
  fi
  log "installing the example plugin $CONTRIB_DIST from contrib/ (pip, a distribution of its own)"
  tmp="$(mktemp -d)"
  cp -R "$CONTRIB_PLUGIN" "$tmp/src"
  rm -rf "$tmp/src/build" "$tmp"/src/src/*.egg-info
  if ! "$PY" -m pip install "${flags[@]}" "$tmp/src"; then
    rm -rf "$tmp"
    log "could not install $CONTRIB_DIST"
    return 1
  fi
  rm -rf "$tmp"
  echo "$want" > "$stamp"
  return 0
}
