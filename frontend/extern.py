"""``T.import_source``, ``T.call_extern``, ``T.evaluate``: device code the kernel brings along,
calls of it, and calls made for their effect; ``T.CUDASourceCodeKernel``: a kernel that is external
CUDA code altogether. The interpreter cannot run such code: kernels that use it run on CUDA only."""

from __future__ import annotations

import os
import re
from typing import Any

from ..core_ir import dtypes
from ..core_ir import expr as E
from ..core_ir.errors import TileLangError, TileLangSyntaxError, TileLangTypeError
from ..core_ir.source import caller_loc
from ..core_ir.stmt import CUDA_ENTRY, CUDA_SOURCE, ExprStmt, Stmt
from ..core_ir.visit import walk
from . import builder as bld
from .allreduce import EMITTED

__all__ = ["CUDASourceCodeKernel", "call_extern", "check_externs", "evaluate", "import_source"]

#: TileLang's dtypes of a call with no value
VOID = ("void", "handle", "")
#: a C++ function name, possibly qualified (``ns::fn``)
_NAME = re.compile(r"[A-Za-z_]\w*(::[A-Za-z_]\w*)*")


def import_source(code: str) -> None:
    """Device code put once before the kernel (in the order of the calls; repeats dropped)."""
    b = bld.require_kernel("T.import_source")
    if not isinstance(code, str):
        raise TileLangTypeError(f"T.import_source needs the code as a string, got {type(code).__name__}",
                                loc=caller_loc(), hint="pass the source text, e.g. read from a .cuh file")
    if code not in b.imports:
        b.imports.append(code)


def call_extern(dtype: Any, name: str, *args: Any) -> E.ExternCall:
    """A call of the device function ``name`` with ``args``, of dtype ``dtype``."""
    b = bld.require_kernel("T.call_extern")
    loc = caller_loc()
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise TileLangSyntaxError(f"T.call_extern needs a function name, got {name!r}", loc=loc,
                                  hint='the dtype comes first: T.call_extern("float32", "my_fn", x)')
    void = isinstance(dtype, str) and dtype in VOID
    call = E.ExternCall(name, tuple(E.convert(a) for a in args), dtypes.int32 if void else dtypes.as_dtype(dtype),
                        void, loc)
    b.externs.append(call)
    return call


def evaluate(value: Any) -> None:
    """``value`` computed for its effect, its result dropped."""
    b = bld.require_kernel("T.evaluate")
    if value is EMITTED:  # T.tvm_thread_allreduce made its statement already
        return
    b.emit(ExprStmt(E.convert(value), loc=caller_loc()))


def check_externs(externs: list[E.ExternCall], body: Stmt) -> None:
    """Every ``T.call_extern`` of a trace is in ``body``, a void one only as a ``T.evaluate``:
    a call whose result Python dropped would otherwise vanish without a word."""
    if not externs:
        return
    used: set[int] = set()
    statements: set[int] = set()
    for n in walk(body):
        if isinstance(n, E.ExternCall):
            used.add(id(n))
        elif isinstance(n, ExprStmt):
            statements.add(id(n.value))
    for call in externs:
        if id(call) not in used:
            raise TileLangSyntaxError(f"the result of T.call_extern({call.name!r}, ...) is never used", loc=call.loc,
                                      hint="call it for its effect with T.evaluate(T.call_extern(...))")
        if call.void and id(call) not in statements:
            raise TileLangSyntaxError(f"T.call_extern of {call.name!r} has no value (dtype void)", loc=call.loc,
                                      hint="use it as a statement, T.evaluate(T.call_extern(...)), or give "
                                           "it the dtype of its result")


#: what makes a string CUDA code rather than a file name
_SOURCE_MARKS = ("\n", "__global__", 'extern "C"', "#include")


def _cuda_source(source_code_or_path: Any, loc: Any) -> str:
    """The code of ``source_code_or_path``: a file's contents when it names one, else the string."""
    if not isinstance(source_code_or_path, (str, os.PathLike)):
        raise TileLangTypeError(f"T.CUDASourceCodeKernel: source_code_or_path={source_code_or_path!r} is neither "
                                "CUDA code nor a file path", loc=loc)
    text = os.fspath(source_code_or_path)
    path = os.path.expanduser(text)
    if not any(mark in text for mark in _SOURCE_MARKS) and os.path.isfile(path):
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    if not text.strip() or not any(mark in text for mark in _SOURCE_MARKS):
        raise TileLangError(f"T.CUDASourceCodeKernel: {text!r} is not a CUDA file that exists, nor CUDA code",
                            loc=loc, hint="pass the kernel's source text, or the path of a .cu file")
    return text


def _check_entry(source: str, entry: str, loc: Any) -> None:
    """``entry`` is an ``extern "C" __global__`` function of ``source`` (the runtime finds it by name)."""
    if not isinstance(entry, str) or not _NAME.fullmatch(entry):
        raise TileLangSyntaxError(f"T.CUDASourceCodeKernel: entry_name={entry!r} is not a function name", loc=loc)
    decl = re.search(r"([^;{}]*)__global__[^;{}(]*\b" + re.escape(entry) + r"\s*\(", source)
    if decl is None:
        raise TileLangError(f"T.CUDASourceCodeKernel: the source has no __global__ function `{entry}`", loc=loc,
                            hint="pass entry_name= the kernel's name (the default is main_kernel)")
    in_block = re.search(r'extern\s+"C"\s*\{', source[:decl.start()]) is not None
    if 'extern "C"' not in decl.group(0) and not in_block:
        raise TileLangError(f"T.CUDASourceCodeKernel: `{entry}` is not declared extern \"C\"", loc=loc,
                            hint=f'write `extern "C" __global__ void {entry}(...)`: the runtime looks the kernel '
                                 "up by its unmangled name")


def CUDASourceCodeKernel(*blocks: Any, threads: Any = None, source_code_or_path: Any = None,  # noqa: N802
                         entry_name: str = "main_kernel", cluster_dims: Any = None, prelude: str | None = None) -> None:
    """A kernel that is CUDA code: ``entry_name`` of ``source_code_or_path`` launched on ``blocks``
    x ``threads`` with the function's parameters, in order, as its arguments."""
    from .frames import KernelFrame

    loc = caller_loc()
    b = bld.require("T.CUDASourceCodeKernel")
    if b.kernel_open:
        raise TileLangSyntaxError("T.CUDASourceCodeKernel is a kernel of its own: it cannot be inside T.Kernel",
                                  loc=loc, hint="call it in the function body, outside `with T.Kernel`")
    source = _cuda_source(source_code_or_path, loc)
    frame = KernelFrame(*blocks, threads=threads, cluster_dims=cluster_dims, prelude=prelude)  # checks prelude
    frame.loc = loc
    _check_entry(source if prelude is None else prelude + "\n" + source, entry_name, loc)
    frame.annotations = (*frame.annotations, (CUDA_SOURCE, source), (CUDA_ENTRY, entry_name))
    with frame:
        pass
