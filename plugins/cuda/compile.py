"""CUDA C++ source to a cubin: NVRTC in-process when it is installed, else ``nvcc``; cached on disk.

``compile_cuda(source, arch, kernel_name=...)`` returns a ``CudaBinary``. The toolchain is found
at the first compile, never when the plugin loads:

- NVRTC through ``ctypes``: ``TILELANG_X_NVRTC``, the ``nvidia-cuda-nvrtc`` wheel
  (``nvidia/cu13/lib/libnvrtc.so.13``, ``nvidia/cuda_nvrtc/lib/libnvrtc.so.12``), then the toolkit
  (``$CUDA_HOME/lib64``, ``/usr/local/cuda/lib64``). It always produces a cubin (``sm_XX``), never
  PTX, so a newer NVRTC than the driver is fine.
- ``nvcc``: ``TILELANG_X_NVCC``, ``PATH``, ``$CUDA_HOME/bin``, ``/usr/local/cuda/bin``; built with
  ``-gencode=arch=compute_XX,code=sm_XX`` (``-arch=sm_90a`` alone adds a compute_90 pass that
  rejects wgmma).

Options (all optional): ``fast_math`` (bool), ``lineinfo`` (bool), ``include_dirs`` (list),
``defines`` (dict), ``maxrregcount`` (int), ``compiler`` (``"auto"``, ``"nvrtc"``, ``"nvcc"``),
``flags`` (extra raw flags for whichever compiler runs).

The cache key is the sha256 of the source, the arch, the options, the compiler and its version,
the tilelang-x version and the plugin's headers; entries live in the on-disk kernel cache
(``tilelang_x.cache``, namespace ``cuda``: ``<cache dir>/cuda/``).
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ...core_ir.errors import CompilationError

log = logging.getLogger("tilelang_x.cuda.compile")

INCLUDE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")

_INSTALL_HINT = (
    "install NVRTC with `pip install nvidia-cuda-nvrtc` (pin it to your driver's CUDA version, e.g. "
    "'nvidia-cuda-nvrtc==13.0.*'), or a CUDA toolkit, or set TILELANG_X_NVCC to nvcc's path"
)


@dataclass(frozen=True)
class CudaBinary:
    """A compiled kernel: the cubin bytes and how they were made."""

    cubin: bytes = field(repr=False)
    arch: str
    kernel_name: str
    log: str = ""
    compiler: str = ""
    seconds: float = 0.0
    cached: bool = False


# --- architectures --------------------------------------------------------------------------------

_ARCH_RE = re.compile(r"^(?:sm_?|compute_?)?(\d{2,3})([af]?)$")


def normalize_arch(arch: str) -> str:
    """``"sm_90a"`` for ``"sm_90a"``, ``"90a"``, ``"sm90a"`` or ``"compute_90a"``."""
    m = _ARCH_RE.match(str(arch).strip().lower())
    if m is None:
        raise CompilationError(
            f"unknown CUDA architecture {arch!r}", hint="write it like 'sm_80', 'sm_90a' or 'sm_100a'"
        )
    return f"sm_{m.group(1)}{m.group(2)}"


# --- finding the toolchain ------------------------------------------------------------------------


def _knobs() -> Any:
    from tilelang_x import knobs

    return knobs


def _cuda_homes() -> list[str]:
    homes = []
    home = _knobs().compile.cuda_home
    if home:
        homes.append(home)
    homes.append("/usr/local/cuda")
    return homes


def _site_dirs() -> list[str]:
    return [p for p in sys.path if p and os.path.isdir(os.path.join(p, "nvidia"))]


def _nvrtc_candidates() -> list[str]:
    out: list[str] = []
    override = _knobs().compile.nvrtc
    if override:
        return [override]
    for site in _site_dirs():
        out += sorted(glob.glob(os.path.join(site, "nvidia", "cu1[3-9]", "lib", "libnvrtc.so.1[3-9]")), reverse=True)
        out += glob.glob(os.path.join(site, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.1[2-9]"))
    for home in _cuda_homes():
        out += sorted(glob.glob(os.path.join(home, "lib64", "libnvrtc.so*")), key=len)
        out += sorted(glob.glob(os.path.join(home, "lib", "libnvrtc.so*")), key=len)
    out += ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]
    return [p for p in out if "builtins" not in p and "alt" not in os.path.basename(p)]


class Nvrtc:
    """NVRTC opened through ``ctypes``."""

    def __init__(self, path: str) -> None:
        folder = os.path.dirname(path)
        if folder:
            # NVRTC dlopens its builtins library by bare name; load it first so that the wheel works
            # without LD_LIBRARY_PATH.
            for b in sorted(glob.glob(os.path.join(folder, "libnvrtc-builtins.so*")), key=len):
                if ".alt." in b:
                    continue
                try:
                    ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
                    break
                except OSError:
                    pass
        self.path = path
        self.lib = ctypes.CDLL(path)
        lib = self.lib
        P = ctypes.c_void_p
        lib.nvrtcVersion.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
        lib.nvrtcCreateProgram.argtypes = [
            ctypes.POINTER(P), ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
            ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p),
        ]
        lib.nvrtcCompileProgram.argtypes = [P, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        lib.nvrtcGetProgramLogSize.argtypes = [P, ctypes.POINTER(ctypes.c_size_t)]
        lib.nvrtcGetProgramLog.argtypes = [P, ctypes.c_char_p]
        lib.nvrtcGetCUBINSize.argtypes = [P, ctypes.POINTER(ctypes.c_size_t)]
        lib.nvrtcGetCUBIN.argtypes = [P, ctypes.c_char_p]
        lib.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(P)]
        lib.nvrtcGetErrorString.argtypes = [ctypes.c_int]
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        major, minor = ctypes.c_int(), ctypes.c_int()
        lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        self.version = (major.value, minor.value)

    @property
    def name(self) -> str:
        return f"nvrtc {self.version[0]}.{self.version[1]}"

    def _err(self, code: int) -> str:
        s = self.lib.nvrtcGetErrorString(code)
        return s.decode() if s else f"NVRTC error {code}"

    def compile(self, source: str, name: str, flags: list[str]) -> tuple[bytes | None, str, str]:
        """``(cubin or None, log, error)`` for ``source`` compiled with ``flags``."""
        lib = self.lib
        prog = ctypes.c_void_p()
        code = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None)
        if code != 0:
            return None, "", self._err(code)
        try:
            opts = [f.encode() for f in flags]
            arr = (ctypes.c_char_p * len(opts))(*opts)
            code = lib.nvrtcCompileProgram(prog, len(opts), arr)
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            buf = ctypes.create_string_buffer(max(size.value, 1))
            lib.nvrtcGetProgramLog(prog, buf)
            log = buf.value.decode(errors="replace").strip()
            if code != 0:
                return None, log, self._err(code)
            lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
            if size.value == 0:
                return None, log, "NVRTC produced no cubin (was a virtual compute_XX architecture given?)"
            out = ctypes.create_string_buffer(size.value)
            code = lib.nvrtcGetCUBIN(prog, out)
            if code != 0:
                return None, log, self._err(code)
            return out.raw, log, ""
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


_NVRTC: Nvrtc | None = None
_NVRTC_SEARCHED: str | None = None  # the override the last search ran with
_LOCK = threading.Lock()


def find_nvrtc() -> Nvrtc | None:
    """NVRTC, or ``None`` when it is not installed (searched once per ``TILELANG_X_NVRTC`` value)."""
    global _NVRTC, _NVRTC_SEARCHED
    key = _knobs().compile.nvrtc or ""
    with _LOCK:
        if _NVRTC_SEARCHED == key:
            return _NVRTC
        found = None
        for cand in _nvrtc_candidates():
            if os.sep in cand and not os.path.exists(cand):
                continue
            try:
                found = Nvrtc(cand)
                break
            except (OSError, AttributeError):
                continue
        _NVRTC, _NVRTC_SEARCHED = found, key
        return found


def find_nvcc() -> str | None:
    """The path of ``nvcc``, or ``None``."""
    override = _knobs().compile.nvcc
    if override:
        return override if os.path.exists(override) else shutil.which(override)
    on_path = shutil.which("nvcc")
    if on_path:
        return on_path
    for home in _cuda_homes():
        cand = os.path.join(home, "bin", "nvcc")
        if os.path.exists(cand):
            return cand
    return None


_NVCC_VERSIONS: dict[tuple[str, float], str] = {}


def nvcc_version(nvcc: str) -> str:
    """``"nvcc 13.0.88"`` (cached per path and modification time)."""
    try:
        key = (nvcc, os.path.getmtime(nvcc))
    except OSError:
        key = (nvcc, 0.0)
    if key not in _NVCC_VERSIONS:
        try:
            out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError) as e:
            raise CompilationError(f"cannot run nvcc at {nvcc}: {e}", hint=_INSTALL_HINT) from e
        m = re.search(r"V(\d+\.\d+\.\d+)", out) or re.search(r"release (\d+\.\d+)", out)
        _NVCC_VERSIONS[key] = f"nvcc {m.group(1) if m else 'unknown'}"
    return _NVCC_VERSIONS[key]


_INCLUDE_DIRS: dict[tuple[str, str], list[str]] = {}


def cuda_include_dirs() -> list[str]:
    """Folders holding the toolkit's headers (``cuda_fp16.h``...), for NVRTC, which has none built in
    (searched once per ``TILELANG_X_CUDA_HOME`` / ``TILELANG_X_NVCC`` value)."""
    knobs = _knobs()
    key = (knobs.compile.cuda_home, knobs.compile.nvcc)
    found = _INCLUDE_DIRS.get(key)
    if found is None:
        found = _INCLUDE_DIRS[key] = _search_include_dirs()
    return list(found)


def _search_include_dirs() -> list[str]:
    dirs: list[str] = []
    nvcc = find_nvcc()
    homes = _cuda_homes()
    if nvcc:
        real = os.path.realpath(nvcc)
        homes.insert(0, os.path.dirname(os.path.dirname(real)))
    for home in homes:
        dirs.append(os.path.join(home, "include"))
    for site in _site_dirs():
        dirs += sorted(glob.glob(os.path.join(site, "nvidia", "cu1[2-9]", "include")), reverse=True)
        dirs += glob.glob(os.path.join(site, "nvidia", "cuda_runtime", "include"))
    seen: list[str] = []
    for d in dirs:
        if os.path.exists(os.path.join(d, "cuda_fp16.h")) and d not in seen:
            seen.append(d)
    return seen[:1]


def toolchain_status() -> tuple[bool, str]:
    """``(available, description)`` of the CUDA compiler that ``compile_cuda`` would use."""
    nvrtc = find_nvrtc() if _knobs().compile.use_nvrtc else None
    if nvrtc is not None:
        return True, f"{nvrtc.name} ({nvrtc.path})"
    nvcc = find_nvcc()
    if nvcc is not None:
        return True, f"nvcc ({nvcc})"
    return False, "no CUDA compiler: " + _INSTALL_HINT


# --- the cache ------------------------------------------------------------------------------------
# Entries live in the generic on-disk store (``tilelang_x.cache``), namespace ``cuda``: one file per
# key holding the cubin, its checksum and how it was made.

_HEADERS_HASH: str | None = None
_CUBIN = "kernel.cubin"


def _headers_hash() -> str:
    global _HEADERS_HASH
    if _HEADERS_HASH is None:
        h = hashlib.sha256()
        for path in sorted(glob.glob(os.path.join(INCLUDE_DIR, "**", "*"), recursive=True)):
            if os.path.isfile(path):
                h.update(os.path.relpath(path, INCLUDE_DIR).encode())
                with open(path, "rb") as f:
                    h.update(f.read())
        _HEADERS_HASH = h.hexdigest()
    return _HEADERS_HASH


def _store() -> Any:
    from tilelang_x import cache

    return cache.Store("cuda", suffix=".cubin")


def cache_key(source: str, arch: str, options: dict[str, Any], compiler: str) -> str:
    """The sha256 naming a cubin in the cache: the source, the arch, the options, the compiler and
    its version, the plugin's headers (and, through ``tilelang_x.cache.make_key``, the package
    version)."""
    from tilelang_x import cache

    return cache.make_key("cuda", source, arch, json.dumps(options, sort_keys=True, default=str), compiler,
                          _headers_hash())


def cache_dir() -> str:
    """``<knobs.cache.dir>/cuda``."""
    return _store().folder


def _cache_read(key: str) -> CudaBinary | None:
    store = _store()
    entry = store.get_entry(key)
    if entry is None:
        return None
    cubin = entry.files.get(_CUBIN, b"")
    meta = entry.meta
    if not cubin.startswith(b"\x7fELF") or not isinstance(meta.get("arch"), str) \
            or not isinstance(meta.get("kernel_name"), str):
        store.invalidate(key, "not a cubin entry")
        return None
    return CudaBinary(
        cubin=cubin, arch=meta["arch"], kernel_name=meta["kernel_name"], log=str(meta.get("log", "")),
        compiler=str(meta.get("compiler", "")), seconds=0.0, cached=True,
    )


def _cache_write(key: str, binary: CudaBinary) -> None:
    # never raises: a read-only or full cache folder is warned about once by the store
    _store().put(key, {_CUBIN: binary.cubin}, meta={
        "arch": binary.arch, "kernel_name": binary.kernel_name, "log": binary.log, "compiler": binary.compiler,
    })


# --- compiling ------------------------------------------------------------------------------------


def _keep_source(source: str, kernel_name: str, key: str, suffix: str = ".cu") -> str:
    """Write ``source`` where the user can read it after a failed compile; returns the path."""
    name = f"{kernel_name}_{key[:12]}{suffix}"
    knobs = _knobs()
    folder = _store().kept_dir() if not knobs.cache.disable else ""
    try:
        if folder:
            os.makedirs(folder, exist_ok=True)
        else:
            folder = tempfile.mkdtemp(prefix="tilelang_x_cuda_")
        path = os.path.join(folder, name)
        with open(path, "w") as f:
            f.write(source)
        return path
    except OSError:
        return "(could not be written)"


def _common_flags(options: dict[str, Any], nvrtc: bool) -> list[str]:
    flags: list[str] = []
    dirs = [INCLUDE_DIR, *options.get("include_dirs", ())]
    if nvrtc:
        dirs += cuda_include_dirs()
    flags += [f"-I{d}" for d in dirs]
    for k, v in dict(options.get("defines", {})).items():
        flags.append(f"-D{k}" if v is None else f"-D{k}={v}")
    if options.get("fast_math"):
        flags.append("--use_fast_math")
    if options.get("lineinfo"):
        flags.append("--generate-line-info" if nvrtc else "-lineinfo")
    if options.get("maxrregcount"):
        flags.append(f"--maxrregcount={int(options['maxrregcount'])}")
    extra = [str(f) for f in options.get("flags", ())]
    return flags + (nvrtc_flags(extra) if nvrtc else extra)


#: nvcc flags NVRTC rejects that only matter to nvcc: the host optimization level (NVRTC always
#: optimizes device code), host-compiler options (with their argument), and the relaxed-constexpr
#: extension (which our generated code does not need). TileLang kernels often pass
#: ``compile_flags=["-O3", "-DENABLE_BF16"]``.
_NVCC_ONLY = re.compile(r"-O[0-3s]?|--?expt-relaxed-constexpr|--?extended-lambda")
_NVCC_ONLY_WITH_ARG = ("-Xcompiler", "--compiler-options")


def nvrtc_flags(flags: list[str]) -> list[str]:
    """``flags`` without the nvcc-only ones NVRTC would reject (``_NVCC_ONLY``)."""
    out: list[str] = []
    skip = False
    for f in flags:
        if skip:
            skip = False
            continue
        if f in _NVCC_ONLY_WITH_ARG:
            skip = True
        elif _NVCC_ONLY.fullmatch(f) or f.startswith(tuple(a + "=" for a in _NVCC_ONLY_WITH_ARG)):
            pass
        else:
            out.append(f)
            continue
        log.debug("compile flag %r is for nvcc only: NVRTC compiles without it", f)
    return out


def _fail(tool: str, kernel_name: str, arch: str, log: str, error: str, path: str) -> CompilationError:
    text = f"{tool} failed to compile kernel '{kernel_name}' for {arch}"
    if error:
        text += f" ({error})"
    if log:
        text += ":\n" + log
    return CompilationError(text, hint=f"the generated CUDA source is kept at {path}")


def _compile_nvrtc(nvrtc: Nvrtc, source: str, arch: str, kernel_name: str, options: dict[str, Any],
                   key: str) -> CudaBinary:
    flags = [f"--gpu-architecture={arch}", "-std=c++17", *_common_flags(options, nvrtc=True)]
    t0 = time.perf_counter()
    cubin, log, error = nvrtc.compile(source, f"{kernel_name}.cu", flags)
    seconds = time.perf_counter() - t0
    if cubin is None:
        raise _fail(nvrtc.name, kernel_name, arch, log, error, _keep_source(source, kernel_name, key))
    return CudaBinary(cubin, arch, kernel_name, log, nvrtc.name, seconds)


def _compile_nvcc(nvcc: str, version: str, source: str, arch: str, kernel_name: str, options: dict[str, Any],
                  key: str) -> CudaBinary:
    num = arch[len("sm_"):]
    folder = tempfile.mkdtemp(prefix="tilelang_x_nvcc_")
    src = os.path.join(folder, f"{kernel_name}.cu")
    out = os.path.join(folder, f"{kernel_name}.cubin")
    with open(src, "w") as f:
        f.write(source)
    cmd = [nvcc, "-cubin", f"-gencode=arch=compute_{num},code=sm_{num}", "-O3", "-std=c++17",
           *_common_flags(options, nvrtc=False), "-o", out, src]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as e:
        raise CompilationError(f"cannot run nvcc at {nvcc}: {e}", hint=_INSTALL_HINT) from e
    seconds = time.perf_counter() - t0
    log = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0 or not os.path.exists(out):
        raise _fail(version, kernel_name, arch, log + "\ncommand: " + " ".join(cmd), f"exit {proc.returncode}", src)
    with open(out, "rb") as f:
        cubin = f.read()
    shutil.rmtree(folder, ignore_errors=True)
    return CudaBinary(cubin, arch, kernel_name, log, version, seconds)


def compile_cuda(source: str, arch: str, *, kernel_name: str, options: dict[str, Any] | None = None) -> CudaBinary:
    """Compile CUDA C++ ``source`` to a cubin for ``arch`` (``"sm_80"``, ``"sm_90a"``...).

    ``kernel_name`` is the ``extern "C"`` entry; ``options`` as in the module docstring. Raises
    ``CompilationError`` with the toolchain's log (and where the source was kept) on failure, or
    with what to install when no toolchain is found.
    """
    arch = normalize_arch(arch)
    options = dict(options or {})
    knobs = _knobs()
    choice = str(options.get("compiler", "auto"))
    if choice not in ("auto", "nvrtc", "nvcc"):
        raise CompilationError(f"unknown CUDA compiler {choice!r}", hint="use 'auto', 'nvrtc' or 'nvcc'")
    nvrtc = find_nvrtc() if choice == "nvrtc" or (choice == "auto" and knobs.compile.use_nvrtc) else None
    nvcc = None
    if nvrtc is None and choice != "nvrtc":
        nvcc = find_nvcc()
    if nvrtc is None and nvcc is None:
        wanted = {"nvrtc": "NVRTC", "nvcc": "nvcc"}.get(choice, "a CUDA compiler (NVRTC or nvcc)")
        raise CompilationError(f"cannot compile kernel '{kernel_name}': {wanted} is not installed", hint=_INSTALL_HINT)
    compiler = nvrtc.name if nvrtc is not None else nvcc_version(nvcc or "")
    key_options = {k: v for k, v in options.items() if k != "compiler"}
    key = cache_key(source, arch, {**key_options, "kernel_name": kernel_name}, compiler)
    use_cache = not knobs.cache.disable
    if use_cache:
        t0 = time.perf_counter()
        hit = _cache_read(key)
        if hit is not None and hit.kernel_name == kernel_name and hit.arch == arch:
            return CudaBinary(hit.cubin, arch, kernel_name, hit.log, hit.compiler, time.perf_counter() - t0, True)
    if nvrtc is not None:
        binary = _compile_nvrtc(nvrtc, source, arch, kernel_name, options, key)
    else:
        binary = _compile_nvcc(nvcc or "", compiler, source, arch, kernel_name, options, key)
    if use_cache:
        _cache_write(key, binary)
    return binary
