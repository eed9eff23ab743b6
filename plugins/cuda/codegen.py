"""CUDA C++ from the lowered IR: one ``extern "C" __global__`` kernel plus its ``KernelMeta``.

The source inlines ``include/tlx_cuda.h`` (no include paths, no templates). 16-bit floats are
stored as ``tlx_half``/``tlx_bf16`` and computed in fp32. All shared memory is dynamic: one
``extern __shared__`` array carved into the kernel's tiles (1024-byte aligned when swizzled).
"""

from __future__ import annotations

import functools
import math
import os
import re
from typing import Any

from ...core_ir import dtypes
from ...core_ir import expr as E
from ...core_ir.buffer import Buffer
from ...core_ir.dtypes import DType
from ...core_ir.errors import BackendNotImplementedError
from ...core_ir.packed import packed_parts
from ...core_ir.stmt import (
    CUDA_ENTRY,
    CUDA_SOURCE,
    IMPORTS,
    Alloc,
    Annotate,
    For,
    If,
    Jump,
    Kernel,
    PrimFunc,
    Print,
    Seq,
    Stmt,
    Store,
    While,
)
from ...core_ir.tile_order import panel_order
from ...core_ir.visit import views_of, walk
from .analysis import block_ranges, bounds, nonneg
from .cluster import launch_dims
from .cluster_sync import check as check_cluster_ops
from .cluster_sync import cluster_header, uses_cluster_header
from .grid_sync import COUNTER, grid_header, is_cooperative, uses_grid_header, waits_for_previous
from .half_pairs import print_pair
from .hopper.stream_k import uses_workspace
from .launch_bounds import launch_bounds
from .layout import SharedLayout
from .layout_inference import find_kernel
from .lir import (
    ROLLED,
    THREAD,
    AsyncCommit,
    AsyncWait,
    AtomicStore,
    Barrier,
    Block,
    Decl,
    DeviceAssert,
    DevicePrint,
    Evaluate,
    Intrin,
    PairStore,
    PtrTo,
    SmemAddr,
)
from .meta import SCALAR_CTYPES, KernelMeta, ParamSpec, check_smem_fits
from .named_barriers import check_ids
from .narrow_math import is_narrow_float, narrow_constant, needs_rounding
from .packed import fast_rcp_call, packed_call
from .rasterize import block_remap
from .rng import rng_call
from .smem_plan import PLAN, plan_shared
from .target import CAPABILITIES
from .warp import thread_index, warp_header, warp_op
from .warp_specialize import MANUAL, uses_ws_header, ws_header

CTYPES: dict[str, str] = {
    "float16": "tlx_half", "bfloat16": "tlx_bf16", "float32": "float", "float64": "double",
    "float8_e4m3": "tlx_e4m3", "float8_e5m2": "tlx_e5m2", "int8": "signed char", "int16": "short",
    "int32": "int", "int64": "long long", "uint8": "unsigned char", "uint16": "unsigned short",
    "uint32": "unsigned int", "uint64": "unsigned long long", "bool": "bool",
}
#: device helpers that access global memory in vectors: tlx_copy16 / tlx_cp_async8 (bytes),
#: tlx_st4 (elements of the tensor's dtype)
_VECTOR_ACCESS = re.compile(r"tlx_(copy|cp_async|st)(\d+)")
_VECTOR_ELEMS = re.compile(r"tlx_cpv<(\d+)>")
_KEYWORDS = {"int", "float", "double", "char", "short", "long", "unsigned", "signed", "bool", "void", "if", "else",
             "for", "while", "do", "return", "break", "continue", "switch", "case", "default", "const", "static",
             "struct", "union", "enum", "typedef", "auto", "register", "volatile", "extern", "inline", "new",
             "delete", "this", "class", "template", "namespace", "true", "false", "half", "min", "max", "tx",
             "blockIdx", "threadIdx", "blockDim", "gridDim", "warpSize", "tlx_smem", "tlx_smem_base", "asm"}

#: Narrow floats stored as tlx_cuda.h structs: (storage -> float, float -> storage) functions.
NARROW: dict[str, tuple[str, str]] = {
    "float16": ("tlx_h2f", "tlx_f2h"), "bfloat16": ("tlx_b2f", "tlx_f2b"),
    "float8_e4m3": ("tlx_e4m32f", "tlx_f2e4m3"), "float8_e5m2": ("tlx_e5m22f", "tlx_f2e5m2"),
}

FLOAT_FUNCS = {
    "exp": "expf", "exp2": "exp2f", "exp10": "exp10f", "log": "logf", "log2": "log2f", "log10": "log10f",
    "log1p": "log1pf", "expm1": "expm1f", "sqrt": "sqrtf", "rsqrt": "rsqrtf", "tanh": "tanhf", "abs": "fabsf",
    "sin": "sinf", "cos": "cosf", "tan": "tanf", "asin": "asinf", "acos": "acosf", "atan": "atanf",
    "sinh": "sinhf", "cosh": "coshf", "erf": "erff", "floor": "floorf", "ceil": "ceilf", "round": "roundf",
    "trunc": "truncf", "isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite", "pow": "powf",
    "fmod": "fmodf", "atan2": "atan2f", "nearbyint": "rintf", "__exp": "__expf", "__exp10": "__exp10f",
    "__log": "__logf", "__log2": "__log2f", "__log10": "__log10f", "__tan": "tanf", "__cos": "__cosf",
    "__sin": "__sinf",
}

#: T.ieee_* -> the CUDA intrinsic's stem for (float32, float64): __fadd_rz, __dadd_rz, ...
IEEE_FUNCS: dict[str, tuple[str, str]] = {
    "ieee_add": ("fadd", "dadd"), "ieee_sub": ("fsub", "dsub"), "ieee_mul": ("fmul", "dmul"),
    "ieee_fmaf": ("fmaf", "fma"), "ieee_frcp": ("frcp", "drcp"), "ieee_fsqrt": ("fsqrt", "dsqrt"),
    "ieee_frsqrt": ("frsqrt", "frsqrt"), "ieee_fdiv": ("fdiv", "ddiv"),
}


@functools.lru_cache(maxsize=1)
def header_text() -> str:
    with open(os.path.join(os.path.dirname(__file__), "include", "tlx_cuda.h")) as fh:
        return fh.read()


def ctype(dt: DType) -> str:
    return CTYPES[dt.name]


def _binds_looser_than_less(e: E.Expr) -> bool:
    """Whether C parses ``i < e`` as ``(i < x) op y`` when ``e`` is written without its outer
    parentheses (a conditional, a comparison, a bitwise or logical operator at its top)."""
    return isinstance(e, E.Select) or (isinstance(e, E.BinOp) and e.op in _LOOSER_THAN_LESS)


_LOOSER_THAN_LESS = frozenset({"&", "|", "^", "and", "or", "==", "!=", "<", "<=", ">", ">="})


def eval_ctype(dt: DType) -> str:
    """The C type an expression of dtype ``dt`` is computed in."""
    if dt.is_float and dt.bits < 32:
        return "float"
    if dt.name == "uint32" or dt.name == "uint":
        return "unsigned int"
    return CTYPES.get(dt.name, "int")


def generate(func: PrimFunc, ctx: Any) -> str:
    """CUDA source of the lowered ``func``; stores the ``KernelMeta`` in ``ctx.data["cuda.meta"]``."""
    check_ids(func.body)
    gen = _Gen(func, ctx)
    source = gen.run()
    assert gen.meta is not None
    check_smem_fits(gen.meta, CAPABILITIES.get(gen.meta.arch, {}).get("max_smem"))
    ctx.data["cuda.meta"] = gen.meta
    return source


class _Gen:
    def __init__(self, func: PrimFunc, ctx: Any) -> None:
        self.func = func
        self.ctx = ctx
        self.layouts: dict[Buffer, Any] = ctx.data.get("cuda.layouts", {})
        self.threads: int = ctx.data.get("cuda.threads", 128)
        self.names: dict[int, str] = {}
        self.taken: set[str] = set(_KEYWORDS)
        self.lines: list[str] = []
        self.smem: dict[Buffer, int] = {}
        self.ranges: dict[E.Var, tuple[int, int]] = {THREAD: (0, self.threads - 1)}
        self.dims: list[E.Var] = []
        #: integer scalar parameters the grid reads (varlen attention's ``max_seqlen_q``): launch
        #: dims after ``dims``, not kernel parameters of their own
        self.grid_scalars: list[E.Var] = []
        self.vars_scalar: set[int] = set()
        self.written: set[int] = set()
        self.align: dict[int, int] = {}  # id(global buffer) -> bytes its base address must be aligned to
        self.meta: KernelMeta | None = None
        self.prologue: list[str] = []  # C statements at the top of the kernel body
        self.prologue_vars: list[E.Var] = []
        self.in_parallel = 0  # depth of lowered T.Parallel loops around the statement being emitted
        self.views: dict[Buffer, list[Buffer]] = {}  # T.view / T.reshape buffers by the buffer owning their memory

    # ---- naming -------------------------------------------------------------------------------
    def name(self, obj: Any, base: str) -> str:
        key = id(obj)
        got = self.names.get(key)
        if got is not None:
            return got
        clean = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in base) or "v"
        if clean[0].isdigit():
            clean = "_" + clean
        cand, n = clean, 1
        while cand in self.taken:
            cand = f"{clean}_{n}"
            n += 1
        self.taken.add(cand)
        self.names[key] = cand
        return cand

    # ---- driver ----------------------------------------------------------------------------------
    def run(self) -> str:
        func = self.func
        kernel = find_kernel(func.body)
        if kernel is None:
            raise BackendNotImplementedError("no T.Kernel in the function", loc=func.loc)
        if CUDA_SOURCE in kernel.ann():
            return self._external(kernel)
        self.names[id(THREAD)] = "tx"
        self.block_rank = len(kernel.threads)
        self.views = views_of(kernel.body)
        self._scan_writes(kernel)
        self.cooperative = is_cooperative(kernel.body)
        params, specs = self._params()
        self._plan_smem(kernel)
        self.ranges.update(block_ranges(kernel))
        kname = self.name(object(), f"{func.name}_kernel")
        block = tuple(list(kernel.threads) + [1] * (3 - len(kernel.threads)))[:3]
        bounds = launch_bounds(kernel, self.ctx)
        arch = getattr(self.ctx.target, "arch", None)
        cluster = launch_dims(kernel, arch)  # sm_90a: a plain launch runs the grid in clusters
        attrs = f"__launch_bounds__({bounds})"
        if cluster:
            attrs += f" __cluster_dims__({', '.join(map(str, cluster))})"
        self.emit(0, f'extern "C" __global__ void {attrs} {kname}({", ".join(params)}) {{')
        if self.smem_total:
            self.emit(1, "extern __shared__ __align__(1024) unsigned char tlx_smem[];")
            self.emit(1, "const tlx_u32 tlx_smem_base = tlx_smem_addr(tlx_smem);")
        if self.ctx.data.get(MANUAL) and kernel.num_threads > self.threads:  # one warpgroup (warp_specialize.py)
            self.emit(1, f"const int tx = threadIdx.x & {self.threads - 1};")
        elif len(kernel.threads) == 1:
            self.emit(1, "const int tx = threadIdx.x;")
        else:
            self.emit(1, "const int tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);")
        self._block_vars(kernel)
        for line in self.prologue:
            self.emit(1, line)
        self.stmt(kernel.body, 1)
        self.emit(0, "}")
        grid_static, grid_src = self._grid(kernel)
        dims = tuple(v.name for v in (*self.dims, *self.grid_scalars))
        self.meta = KernelMeta(kname, tuple(specs), block, self.smem_total, dims,  # type: ignore[arg-type]
                               grid_static, grid_src, arch or "sm_80",
                               tuple((s.arg, s.dtype, s.box, s.swizzle) for s in self.ctx.data.get("cuda.tmaps", ())),
                               cluster, kernel.loc, getattr(self.ctx.data.get("cuda.persistent"), "total", None),
                               self._workspace_per_block(kernel), self.cooperative,
                               # a cooperative launch already waits for the previous kernel
                               not self.cooperative and waits_for_previous(kernel.body, arch or "sm_80"),
                               smem_tiles=self.smem_tiles)
        if uses_grid_header(kernel.body):
            self.ctx.data.setdefault("cuda.extra_headers", []).append(grid_header())
        if uses_cluster_header(kernel.body):
            check_cluster_ops(kernel, arch)
            self.ctx.data.setdefault("cuda.extra_headers", []).append(cluster_header(cluster is not None))
        if uses_ws_header(kernel.body):
            self.ctx.data.setdefault("cuda.extra_headers", []).append(ws_header())
        body = "\n".join(self.lines)
        extra = "".join(self.ctx.data.get("cuda.extra_headers", ()))  # Hopper: tlx_hopper.h, wgmma wrappers
        imported = "".join(f"{code.rstrip()}\n" for code in func.attr(IMPORTS, ()))  # T.import_source
        prelude = kernel.ann().get("prelude")  # T.Kernel(prelude=...): raw CUDA before the kernel
        if prelude:
            imported += f"{prelude.rstrip()}\n"
        return f"// generated by tilelang-x for {func.name}\n{header_text()}\n{extra}\n{imported}{body}\n"

    def _workspace_per_block(self, kernel: Kernel) -> int:
        """Bytes of stream-K workspace per block of the launch: its slot of partial sums."""
        slot = uses_workspace(kernel.body) if "cuda.stream_k" in self.ctx.data else None
        return slot[0] * slot[1] * 4 if slot else 0

    def _scan_writes(self, kernel: Kernel) -> None:
        maps = {id(s.var): s.arg for s in self.ctx.data.get("cuda.tmaps", ())}
        for n in walk(kernel.body):
            if isinstance(n, (Store, AtomicStore)):
                self.written.add(id(n.buffer.storage))
            elif isinstance(n, (PtrTo, SmemAddr)) and n.mode != "r":
                self.written.add(id(n.buffer.storage))
            elif isinstance(n, Intrin) and n.fn.startswith("tlx_tma_store_") and n.args and id(n.args[0]) in maps:
                self.written.add(id(self.func.params[maps[id(n.args[0])]]))  # the tensor a TMA store writes
            if isinstance(n, Intrin):
                self._note_vector_access(n)

    def _note_vector_access(self, n: Intrin) -> None:
        """Record the byte alignment a vector access needs of a global tensor's base address: the
        vectorization proved offsets aligned assuming 16-byte aligned bases, so the launch checks it."""
        m = _VECTOR_ACCESS.fullmatch(n.fn)
        if m is not None:  # tlx_copy<bytes>, tlx_cp_async<bytes>, tlx_st<elements>
            elems = int(m.group(2)) if m.group(1) == "st" else None
            nbytes = None if elems is not None else int(m.group(2))
        elif n.fn == "tlx_ldv":  # (src, pred, one output per element)
            elems, nbytes = len(n.args) - 2, None
        elif (m := _VECTOR_ELEMS.fullmatch(n.fn)) is not None:  # tlx_cpv<elements>
            elems, nbytes = int(m.group(1)), None
        else:
            return
        for a in n.args:
            if isinstance(a, PtrTo) and a.buffer.scope == "global":
                width = nbytes if nbytes is not None else elems * a.buffer.dtype.bytes  # type: ignore[operator]
                key = id(a.buffer.storage)
                self.align[key] = max(self.align.get(key, 1), width)

    def _external(self, kernel: Kernel) -> str:
        """``T.CUDASourceCodeKernel``: the user's module as it is, launched with the function's
        parameters in order (tensors as device pointers, scalars by value)."""
        specs = []
        for idx, p in enumerate(self.func.params):
            if isinstance(p, Buffer):
                if any(E.free_vars(e) for e in (*p.shape, *(p.strides or ()))):
                    raise BackendNotImplementedError(
                        f"T.CUDASourceCodeKernel: tensor `{p.name}` has dynamic sizes, which the external kernel "
                        "would need as extra arguments", loc=kernel.loc, hint="give its shape as Python ints")
                specs.append(ParamSpec(p.name, "buffer", idx, p.dtype.name, ctype(p.dtype) + "*", False, 1))
            elif p.dtype.name in SCALAR_CTYPES and p.dtype.name not in NARROW:
                specs.append(ParamSpec(p.name, "scalar", idx, p.dtype.name, SCALAR_CTYPES[p.dtype.name]))
            else:
                raise BackendNotImplementedError(f"T.CUDASourceCodeKernel: scalar parameter `{p.name}` of dtype "
                                                 f"{p.dtype} cannot be passed to CUDA code", loc=kernel.loc)
        arch = getattr(self.ctx.target, "arch", None)
        block = tuple(list(kernel.threads) + [1] * (3 - len(kernel.threads)))[:3]
        grid_static, grid_src = self._grid(kernel)
        dims = tuple(v.name for v in self.grid_scalars)  # scalar parameters the grid reads
        entry = kernel.ann()[CUDA_ENTRY]
        self.meta = KernelMeta(entry, tuple(specs), block, 0, dims, grid_static, grid_src,  # type: ignore[arg-type]
                               arch or "sm_80", (), launch_dims(kernel, arch), kernel.loc)
        prelude = kernel.ann().get("prelude")
        code = kernel.ann()[CUDA_SOURCE] if prelude is None else f"{prelude}\n{kernel.ann()[CUDA_SOURCE]}"
        return f"// external CUDA code (T.CUDASourceCodeKernel) for {self.func.name}\n{code}\n"

    def _params(self) -> tuple[list[str], list[ParamSpec]]:
        out, specs = [], []
        seen_dims: dict[int, E.Var] = {}
        aliased = {id(b) for n in walk(self.func.body) if isinstance(n, Annotate) and n.kind == "non_restrict"
                   for b in n.data}  # T.annotate_restrict_buffers
        for idx, p in enumerate(self.func.params):
            if isinstance(p, Buffer):
                nm = self.name(p, p.name)
                ro = id(p) not in self.written
                ct = ctype(p.dtype)
                out.append(f"{'const ' if ro else ''}{ct}*{'' if id(p) in aliased else ' __restrict__'} {nm}")
                align = max([self.align.get(id(p), 1)] + [v.dtype.bytes for v in self.views.get(p, ())])
                specs.append(ParamSpec(nm, "buffer", idx, p.dtype.name, ct + "*", ro, align))
                self.prologue += self._view_decls(p, nm, "const " if ro else "")
                for e in tuple(p.shape) + tuple(p.strides or ()):
                    for v in E.free_vars(e):
                        if id(v) not in seen_dims and v not in self.func.params:
                            seen_dims[id(v)] = v
            else:
                nm = self.name(p, p.name)
                self.vars_scalar.add(id(p))
                if p.dtype.name in NARROW:  # narrow floats are computed in fp32: convert once, up front
                    raw_var = E.Var(f"{nm}_arg")
                    self.prologue_vars.append(raw_var)  # keeps the id used as the name key alive
                    raw = self.name(raw_var, raw_var.name)
                    back, to = NARROW[p.dtype.name]
                    if p.dtype.bits == 8:  # passed as a float, rounded in the kernel
                        out.append(f"float {raw}")
                        specs.append(ParamSpec(raw, "scalar", idx, "float32", "float"))
                        self.prologue.append(f"const float {nm} = {back}({to}({raw}));")
                    else:
                        ct = ctype(p.dtype)
                        out.append(f"{ct} {raw}")
                        specs.append(ParamSpec(raw, "scalar", idx, p.dtype.name, ct))
                        self.prologue.append(f"const float {nm} = {back}({raw});")
                    continue
                if p.dtype.name not in SCALAR_CTYPES:
                    raise BackendNotImplementedError(f"scalar parameter `{p.name}` of dtype {p.dtype} is not "
                                                     "supported on CUDA", loc=self.func.loc)
                ct = SCALAR_CTYPES[p.dtype.name]
                ct = {"half": "tlx_half", "nv_bfloat16": "tlx_bf16"}.get(ct, ct)
                out.append(f"{ct} {nm}")
                specs.append(ParamSpec(nm, "scalar", idx, p.dtype.name, ct))
        for k, v in enumerate(seen_dims.values()):
            nm = self.name(v, v.name)
            ct = SCALAR_CTYPES.get(v.dtype.name, "int")
            out.append(f"{ct} {nm}")
            specs.append(ParamSpec(nm, "dim", k, v.dtype.name, ct))
            self.dims.append(v)
            self.ranges[v] = (0, 2**31 - 1)
        for s in self.ctx.data.get("cuda.tmaps", ()):  # Hopper TMA descriptors, built at launch
            nm = self.name(s.var, s.var.name)
            out.append(f"const __grid_constant__ tlx_tmap {nm}")
            specs.append(ParamSpec(nm, "tmap", s.arg, s.dtype, "tlx_tmap", True))
        ws = self.ctx.data.get("cuda.stream_k")
        if ws is not None:  # stream-K's workspace (hopper/stream_k.py): the runtime appends it to the arguments
            nm = self.name(ws, ws.name)
            out.append(f"float* __restrict__ {nm}")
            specs.append(ParamSpec(nm, "buffer", len(self.func.params), "float32", "float*", False, 16))
        if self.cooperative:  # T.sync_grid's counter (grid_sync.py): the runtime appends it to the arguments
            nm = self.name(COUNTER, COUNTER.name)
            out.append(f"unsigned int* __restrict__ {nm}")
            specs.append(ParamSpec(nm, "buffer", len(self.func.params), "uint32", "unsigned int*", False, 4))
        return out, specs

    def _plan_smem(self, kernel: Kernel) -> None:
        tiles = [n.buffer for n in walk(kernel.body) if isinstance(n, Alloc) and n.buffer.scope == "shared"]
        plan = self.ctx.data.get(PLAN)
        if plan is None or set(plan.offsets) != {id(b) for b in tiles}:  # not planned on this body
            plan = plan_shared(kernel, self.ctx, merge=False)
        self.smem = {b: plan.offsets[id(b)] for b in tiles}
        self.smem_total = plan.total
        self.smem_tiles = tuple(sorted(((b.name, plan.sizes[id(b)]) for b in tiles), key=lambda t: -t[1]))

    def _block_vars(self, kernel: Kernel) -> None:
        axes = ("x", "y", "z")
        remap = block_remap(kernel, self.ctx)
        if remap is not None:  # the panel order (core_ir.tile_order.panel_order) of the linear block index
            panel, column = remap
            gx, gy, bid = (E.Var(nm, dtypes.int32) for nm in ("tlx_gx", "tlx_gy", "tlx_bid"))
            self.ranges.update({gx: (1, 2**31 - 1), gy: (1, 2**31 - 1), bid: (0, 2**31 - 1)})
            linear = "blockIdx.x * gridDim.y + blockIdx.y" if column else "blockIdx.y * gridDim.x + blockIdx.x"
            self.emit(1, f"const int {self.name(gx, gx.name)} = gridDim.x;")
            self.emit(1, f"const int {self.name(gy, gy.name)} = gridDim.y;")
            self.emit(1, f"const int {self.name(bid, bid.name)} = {linear};")
            for v, e in zip(kernel.block_vars, panel_order(bid, gx, gy, panel, column, self._let)):
                self.emit(1, f"const int {self.name(v, v.name)} = {self.expr(e, True)};")
            return
        for v, ax in zip(kernel.block_vars, axes):
            self.emit(1, f"const int {self.name(v, v.name)} = blockIdx.{ax};")
        pers = self.ctx.data.get("cuda.persistent")
        if pers is not None:  # the tile stride: as many blocks as the device the kernel runs on has SMs
            self.emit(1, f"const int {self.name(pers.stride, pers.stride.name)} = gridDim.x;")
            self.ranges[pers.stride] = pers.stride_range

    def _let(self, name: str, value: E.Expr) -> E.Var:
        """``const int name = value;`` at the top of the kernel (a ``Decl``): the variable."""
        v = E.Var(name, dtypes.int32)
        self.stmt(Decl(v, value), 1)
        return v

    def _grid(self, kernel: Kernel) -> tuple[tuple[int, int, int] | None, str]:
        dims = list(kernel.grid) + [E.const(1)] * (3 - len(kernel.grid))
        consts = [E.as_int(d) for d in dims]
        if all(c is not None for c in consts):
            g = tuple(max(1, c) for c in consts)  # type: ignore[type-var]
            return g, repr(g)  # type: ignore[return-value]
        return None, "(" + ", ".join(self.py(d) for d in dims[:3]) + ")"

    def py(self, e: E.Expr) -> str:
        """Python text of a grid expression over the dynamic dims (``{name}`` placeholders)."""
        if isinstance(e, E.Const):
            return repr(int(e.value)) if e.dtype.is_int else repr(e.value)
        if isinstance(e, E.Var):
            if not any(e is d for d in self.dims) and not any(e is s for s in self.grid_scalars):
                if not (e.dtype.is_int and any(e is p for p in self.func.params)):
                    raise BackendNotImplementedError(
                        f"the grid depends on `{e.name}`, which is neither a dimension of a tensor argument nor "
                        "an integer parameter", loc=self.func.loc)
                self.grid_scalars.append(e)  # its value reaches the launcher with the dims (args.bind)
            return "{" + e.name + "}"
        if isinstance(e, E.BinOp):
            a, b = self.py(e.a), self.py(e.b)
            if e.op in ("min", "max"):
                return f"{e.op}({a}, {b})"
            op = {"/": "//"}.get(e.op, e.op)
            return f"({a} {op} {b})"
        if isinstance(e, E.Cast):
            return self.py(e.a)
        raise BackendNotImplementedError(f"cannot evaluate grid expression {e} on the host", loc=self.func.loc)

    # ---- statements ------------------------------------------------------------------------------
    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def stmt(self, s: Stmt, d: int) -> None:
        if isinstance(s, Seq):
            for c in s.stmts:
                self.stmt(c, d)
        elif isinstance(s, Block):
            self.in_parallel += s.label == "parallel"
            if isinstance(s.body, (Seq, For)) or any(isinstance(n, Alloc) for n in walk(s.body)):
                self.emit(d, "{" + (f"  // {s.label}" if s.label else ""))
                self.stmt(s.body, d + 1)
                self.emit(d, "}")
            else:
                self.stmt(s.body, d)
            self.in_parallel -= s.label == "parallel"
        elif isinstance(s, DevicePrint):
            self._print(s, d)
        elif isinstance(s, DeviceAssert):
            self.emit(d, f"if (!({self.expr(s.cond, True)})) {{")
            self.emit(d + 1, f'printf("{s.fmt} (block (%d, %d, %d), thread %d)\\n", (int)blockIdx.x, (int)blockIdx.y, '
                             '(int)blockIdx.z, (int)threadIdx.x);')
            self.emit(d + 1, "__trap();")
            self.emit(d, "}")
        elif isinstance(s, For):
            self._for(s, d)
        elif isinstance(s, If):
            self.emit(d, f"if ({self.expr(s.cond, bare=True)}) {{")
            self.stmt(s.then, d + 1)
            if s.otherwise is not None and not (isinstance(s.otherwise, Seq) and not s.otherwise.stmts):
                self.emit(d, "} else {")
                self.stmt(s.otherwise, d + 1)
            self.emit(d, "}")
        elif isinstance(s, While):
            self.emit(d, f"while ({self.expr(s.cond, bare=True)}) {{")
            self.stmt(s.body, d + 1)
            self.emit(d, "}")
        elif isinstance(s, Store):
            self.emit(d, f"{self.ref(s.buffer, s.indices)} = {self.to_storage(s.value, s.buffer.dtype)};")
        elif isinstance(s, PairStore):
            self.emit(d, print_pair(self, s))
        elif isinstance(s, Alloc):
            self._alloc(s, d)
        elif isinstance(s, Evaluate):
            self.emit(d, f"{self.expr(s.value, bare=True)};")
        elif isinstance(s, Barrier):
            self.emit(d, "__syncthreads();")
        elif isinstance(s, Jump):
            self.emit(d, f"{s.kind};")
        elif isinstance(s, AsyncCommit):
            self.emit(d, "tlx_cp_async_commit();")
        elif isinstance(s, AsyncWait):
            self.emit(d, f"TLX_CP_ASYNC_WAIT({s.n});")
        elif isinstance(s, AtomicStore):
            self._atomic(s, d)
        elif isinstance(s, Decl):
            nm = self.name(s.var, s.var.name)
            rng = s.bounds or bounds(s.value, self.ranges)
            if rng is not None:
                self.ranges[s.var] = rng
            self.emit(d, f"const {eval_ctype(s.var.dtype)} {nm} = {self.expr(s.value, True)};")
        elif isinstance(s, Kernel):
            self.stmt(s.body, d)
        elif isinstance(s, Print):  # the lowering turns every T.print into DevicePrints
            raise BackendNotImplementedError("CUDA codegen: T.print was not lowered", loc=s.loc)
        elif isinstance(s, Annotate):
            pass
        else:
            raise BackendNotImplementedError(f"CUDA codegen: unexpected statement {type(s).__name__}",
                                             loc=getattr(s, "loc", None))

    def _print(self, s: DevicePrint, d: int) -> None:
        """printf from block 0: one thread, or every thread that runs a parallel loop's iteration."""
        dt = s.value.dtype
        val = self.expr(s.value, True)
        if dt.is_float:
            conv, arg = "%g", f"(double)({val})"
        elif dt.is_bool:
            conv, arg = "%d", f"(int)({val})"
        elif dt.bits == 64:
            unsigned = dt.kind == "uint"
            conv, arg = ("%llu" if unsigned else "%lld"), f"({'unsigned ' if unsigned else ''}long long)({val})"
        else:
            unsigned = dt.kind == "uint"
            conv, arg = ("%u" if unsigned else "%d"), f"({'unsigned ' if unsigned else ''}int)({val})"
        args = "".join(f", {self.expr(a, True)}" for a in s.args)
        cond = "blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0" + ("" if self.in_parallel else " && tx == 0")
        self.emit(d, f'if ({cond}) printf("{s.fmt}{conv}\\n"{args}, {arg});')

    def _for(self, s: For, d: int) -> None:
        v = self.name(s.var, s.var.name)
        ext, start = E.as_int(s.extent), E.as_int(s.start) if s.start is not None else 0
        if ext is not None and start is not None:
            self.ranges[s.var] = (start, start + max(ext, 1) - 1)
        elif start is not None and start >= 0 and nonneg(s.extent, self.ranges):
            self.ranges[s.var] = (start, 2**31 - 1)
        lo = "0" if s.start is None else self.expr(s.start, True)
        end = s.extent if s.start is None else s.start + s.extent
        hi = self.expr(end, not _binds_looser_than_less(end))
        if s.kind == "unroll":
            self.emit(d, "#pragma unroll")
        elif s.ann().get(ROLLED):
            self.emit(d, "#pragma unroll 1")
        self.emit(d, f"for (int {v} = {lo}; {v} < {hi}; ++{v}) {{")
        self.stmt(s.body, d + 1)
        self.emit(d, "}")

    def _alloc(self, s: Alloc, d: int) -> None:
        b = s.buffer
        nm = self.name(b, b.name)
        ct = "tlx_u32" if b.dtype.name == "uint32" and b.scope == "local" else ctype(b.dtype)
        if b.scope == "shared":
            off = self.smem[b]
            tiles = [(nm, ct)] + [(self.name(v, v.name), ctype(v.dtype)) for v in self.views.get(b, ())]
            for name, c in tiles:  # a view is declared as one more tile at the same offset
                self.emit(d, f"{c}* {name} = ({c}*)(tlx_smem + {off});")
                self.emit(d, f"const tlx_u32 {name}_s = tlx_smem_base + {off};")
            return
        if b.scope == "var":
            init = "" if s.init is None else f" = {self.to_storage(s.init, b.dtype)}"
            self.emit(d, f"{ct} {nm}{init};")
            ptr = f"&{nm}"
        else:
            shape = b.static_shape()
            if shape is None:
                raise BackendNotImplementedError(f"local buffer `{b.name}` needs a constant shape", loc=b.loc)
            wider = max([b.dtype.bytes] + [v.dtype.bytes for v in self.views.get(b, ())])
            align = f"__align__({wider}) " if wider > b.dtype.bytes else ""  # a view reads wider words
            self.emit(d, f"{align}{ct} {nm}[{math.prod(shape)}];")
            ptr = nm
        for line in self._view_decls(b, ptr, ""):
            self.emit(d, line)

    def _view_decls(self, b: Buffer, ptr: str, const: str) -> list[str]:
        """Pointers for the views of ``b`` (a global or register buffer at address ``ptr``)."""
        out = []
        for v in self.views.get(b, ()):
            ct = const + ctype(v.dtype)
            out.append(f"{ct}* {self.name(v, v.name)} = ({ct}*)({ptr});")
        return out

    def _atomic(self, s: AtomicStore, d: int) -> None:
        dt = s.buffer.dtype
        ptr = f"&{self.ref(s.buffer, s.indices)}"
        val = self.expr(s.value, True)
        if s.prev is not None:
            what = f"T.atomic_{s.kind}(..., return_prev=True) on {dt}"
            self.emit(d, f"{self.ref(s.prev, (E.const(0),))} = {_update(s.kind, dt, ptr, val, what, s.loc)};")
        elif s.kind == "store":
            bits, to_bits, _ = _atomic_word(dt, f"T.atomic_store on {dt}", s.loc)
            self.emit(d, f"tlx_st_{_ORDER_FN[s.order or 'seq_cst']}_{bits}({ptr}, {to_bits.format(val)});")
        elif s.kind in ("or", "and", "xor"):
            self.emit(d, _bitwise_atomic(s.kind, dt, ptr, val, s.loc))
        elif s.kind == "add" and dt == dtypes.float16:  # no value back: a reduction
            self.emit(d, f"tlx_atomic_add_h({ptr}, {val});")
        else:
            self.emit(d, _update(s.kind, dt, ptr, val, f"T.atomic_{s.kind} on {dt}", s.loc) + ";")

    def _atomic_load(self, e: E.AtomicLoad) -> str:
        bits, _, from_bits = _atomic_word(e.dtype, f"T.atomic_load of {e.dtype}", e.loc)
        return from_bits.format(f"tlx_ld_{_ORDER_FN[e.order]}_{bits}(&{self.ref(e.buffer, e.indices)})")

    # ---- memory references --------------------------------------------------------------------
    def offset(self, b: Buffer, idx: tuple[E.Expr, ...]) -> str:
        if b.scope == "shared":
            lay = self.layouts.get(b)
            if not isinstance(lay, SharedLayout):
                shape = b.static_shape() or ()
                lay = SharedLayout(tuple(shape), b.dtype.bytes, "none")
            if len(idx) == 1 and len(lay.shape) > 1:
                return self.expr(idx[0], True)
            return self.expr(lay.offset(idx), True)
        if b.strides is not None and len(idx) == len(b.strides):  # (a 1-d one may have a stride too)
            terms = [E.binary("*", i, s) for i, s in zip(idx, b.strides)]
            flat = terms[0]
            for t in terms[1:]:
                flat = flat + t
            return self.expr(flat, True)
        if len(idx) == 1:
            return self.expr(idx[0], True)
        numel = b.static_shape()
        if b.scope == "global" and (numel is None or math.prod(numel) >= 2**31):
            return _widen(self, idx, b)
        flat: E.Expr = idx[0]
        for i, s in zip(idx[1:], b.shape[1:]):
            flat = flat * s + i
        return self.expr(flat, True)

    def ref(self, b: Buffer, idx: tuple[E.Expr, ...]) -> str:
        nm = self.name(b, b.name)
        if b.scope == "var" and b.base is None:  # a view of a var is a pointer to it
            return nm
        return f"{nm}[{self.offset(b, idx)}]"

    def to_storage(self, value: E.Expr, dt: DType) -> str:
        if dt.name in NARROW:
            if isinstance(value, E.Load) and value.buffer.dtype == dt and value.buffer.scope != "var":
                return self.ref(value.buffer, value.indices)  # a 16/8-bit move, no float round trip
            if isinstance(value, E.Cast) and value.dtype == dt and value.a.dtype.is_float:
                value = value.a  # the store rounds once
            text = self._unrounded(value) if value.dtype == dt else self.expr(value)
            return f"{NARROW[dt.name][1]}({_bare(text)})"
        text = self.expr(value, True)
        if value.dtype != dt:
            return f"({ctype(dt)})({text})"
        return text

    # ---- expressions -----------------------------------------------------------------------------
    def expr(self, e: E.Expr, bare: bool = False) -> str:
        text = self._expr(e)
        return _bare(text) if bare else text

    def _expr(self, e: E.Expr) -> str:
        """``e`` as its consumers see it: a narrow float result rounded to its dtype (``narrow_math``)."""
        text = self._unrounded(e)
        if needs_rounding(e, self.ranges):
            back, to = NARROW[e.dtype.name]
            return f"{back}({to}({text}))"
        return text

    def _unrounded(self, e: E.Expr) -> str:
        if isinstance(e, E.Var):
            if e is THREAD:
                return "tx"
            return self.name(e, e.name)
        if isinstance(e, E.Const):
            return _const(e)
        if isinstance(e, E.AtomicLoad):
            return self._atomic_load(e)
        if isinstance(e, E.Load):
            b = e.buffer
            text = self.ref(b, e.indices)
            if b.dtype.name in NARROW:
                return f"{NARROW[b.dtype.name][0]}({text})"
            return text
        if isinstance(e, E.BinOp):
            return self._binop(e)
        if isinstance(e, E.UnaryOp):
            sym = {"neg": "-", "not": "!", "~": "~"}[e.op]
            return f"({sym}{self._expr(e.a)})"
        if isinstance(e, E.Select):
            return f"({self._expr(e.cond)} ? {self._expr(e.t)} : {self._expr(e.f)})"
        if isinstance(e, E.Cast):
            return self._cast(e)
        if isinstance(e, E.Call):
            return self._call(e)
        if isinstance(e, E.ExternCall):
            return f"{e.name}({', '.join(self.expr(a, True) for a in e.args)})"
        if isinstance(e, Intrin):
            return f"{e.fn}({', '.join(self.expr(a, True) for a in e.args)})"
        if isinstance(e, SmemAddr):
            nm = self.name(e.buffer, e.buffer.name)
            return f"({nm}_s + ({self.offset(e.buffer, e.indices)}) * {e.buffer.dtype.bytes})"
        if isinstance(e, PtrTo):
            return f"(&{self.ref(e.buffer, e.indices)})"
        if isinstance(e, E.ThreadIndex):
            return thread_index(e, self.block_rank)
        if isinstance(e, E.WarpOp):
            return self._warp_op(e)
        if isinstance(e, E.ClusterRank):
            return "tlx_cluster_rank()"
        raise BackendNotImplementedError(f"CUDA codegen: unexpected expression {type(e).__name__}")

    def _warp_op(self, e: E.WarpOp) -> str:
        header = warp_header(e)
        if header is not None:
            extra = self.ctx.data.setdefault("cuda.extra_headers", [])
            if header not in extra:
                extra.append(header)
        return warp_op(e, [self.expr(a, True) for a in e.args], eval_ctype(e.dtype))

    def _binop(self, e: E.BinOp) -> str:
        a, b = self._expr(e.a), self._expr(e.b)
        dt = e.a.dtype
        if e.op in ("min", "max"):
            if dt.is_float:
                fn = {"min": "fminf", "max": "fmaxf"}[e.op] if dt.bits <= 32 else {"min": "fmin", "max": "fmax"}[e.op]
                return f"{fn}({a}, {b})"
            return f"{e.op}({a}, {b})"
        if e.op == "//":
            if dt.is_float:
                return f"floorf({a} / {b})"
            if nonneg(e.a, self.ranges) and nonneg(e.b, self.ranges):
                return _nonneg_divmod(a, b, e.b, dt, "/")
            return _pow2_floor(a, e.b, dt, "//") or f"tlx_floordiv{'64' if dt.bits == 64 else ''}({a}, {b})"
        if e.op == "%":
            if dt.is_float:
                return f"({a} - floorf({a} / {b}) * {b})"
            if nonneg(e.a, self.ranges) and nonneg(e.b, self.ranges):
                return _nonneg_divmod(a, b, e.b, dt, "%")
            return _pow2_floor(a, e.b, dt, "%") or f"tlx_floormod{'64' if dt.bits == 64 else ''}({a}, {b})"
        if e.op == "**":
            return f"powf({a}, {b})" if dt.bits <= 32 else f"pow({a}, {b})"
        sym = {"and": "&&", "or": "||"}.get(e.op, e.op)
        return f"({a} {sym} {b})"

    def _cast(self, e: E.Cast) -> str:
        src, dst = e.a.dtype, e.dtype
        inner = self._expr(e.a)
        if dst in (dtypes.float16, dtypes.bfloat16) and src.is_int and self._exact_in(e.a, dst):
            return f"((float)({inner}))"  # computed in float: the rounding to 16 bits changes nothing
        if dst == dtypes.float16:
            return f"tlx_h2f(tlx_f2h({inner}))" if src.is_float else f"tlx_h2f(tlx_f2h((float)({inner})))"
        if dst == dtypes.bfloat16:
            return f"tlx_b2f(tlx_f2b({inner}))" if src.is_float else f"tlx_b2f(tlx_f2b((float)({inner})))"
        if dst.name in NARROW:  # the float8 formats
            to, back = NARROW[dst.name][1], NARROW[dst.name][0]
            return f"{back}({to}({inner}))" if src.is_float else f"{back}({to}((float)({inner})))"
        if src.is_float and src.bits < 32 and dst == dtypes.float32:
            return inner
        return f"(({eval_ctype(dst)})({inner}))"

    def _exact_in(self, e: E.Expr, dst: DType) -> bool:
        """Whether every value the integer ``e`` can take is exact in the 16-bit float ``dst``
        (integers up to 2^11 in float16, 2^8 in bfloat16: their significand bits plus one)."""
        r = bounds(e, self.ranges)
        limit = 1 << (11 if dst == dtypes.float16 else 8)
        return r is not None and -limit <= r[0] and r[1] <= limit

    def _call(self, e: E.Call) -> str:
        args = [self.expr(a, True) for a in e.args]
        dt = e.args[0].dtype
        if e.name == "reinterpret":
            return _bit_cast(_bit_cast(args[0], dt, True), e.dtype, False)
        if e.name in E.INT_FUNCS:
            return _int_func(e.name, args[0], dt)
        if e.name == E.RNG_FUNC:
            return rng_call(args, self.ctx.data.setdefault("cuda.extra_headers", []))
        ieee = E.ieee_parts(e.name)
        if ieee is not None:
            name, mode = ieee
            return f"__{IEEE_FUNCS[name][dt.bits == 64]}_{mode}({', '.join(args)})"
        lane = packed_parts(e.name)
        if lane is not None:
            return packed_call(*lane, e.dtype, args, self.ctx.data.setdefault("cuda.extra_headers", []))
        if e.name == E.FAST_RCP:
            return fast_rcp_call(args[0], self.ctx.data.setdefault("cuda.extra_headers", []))
        if e.name == "abs" and dt.is_int:
            return f"abs({args[0]})" if dt.bits <= 32 else f"llabs({args[0]})"
        if e.name == "sigmoid":
            one = "1.0f" if dt.bits <= 32 else "1.0"
            ex = "expf" if dt.bits <= 32 else "exp"
            return f"({one} / ({one} + {ex}(-({args[0]}))))"
        if e.name == "exp2" and dt.bits <= 32:
            return f"tlx_exp2f({args[0]})"
        fn = FLOAT_FUNCS[E.FAST_MATH.get(e.name, e.name) if dt.bits == 64 else e.name]
        if dt.bits == 64 and fn.endswith("f") and fn not in ("isinf",):
            fn = fn[:-1]
        return f"{fn}({', '.join(args)})"


#: the tlx_ld_* / tlx_st_* function of each memory order (a consume load is an acquire load)
_ORDER_FN = {"relaxed": "relaxed", "consume": "acquire", "acquire": "acquire", "release": "release",
             "seq_cst": "seq_cst"}
#: dtype -> (bits, value to the unsigned word, unsigned word to value) of atomic loads and stores
_ATOMIC_WORDS = {
    "int32": (32, "(tlx_u32)({})", "((int)({}))"), "uint32": (32, "{}", "{}"),
    "float32": (32, "__float_as_uint({})", "__uint_as_float({})"),
    "int64": (64, "(tlx_u64)({})", "((long long)({}))"), "uint64": (64, "{}", "{}"),
    "float64": (64, "(tlx_u64)__double_as_longlong({})", "__longlong_as_double((long long)({}))"),
}


def _atomic_word(dt: DType, what: str, loc: Any) -> tuple[int, str, str]:
    form = _ATOMIC_WORDS.get(dt.name)
    if form is None:
        raise BackendNotImplementedError(f"{what} is not supported on CUDA (32- and 64-bit types only)", loc=loc,
                                         hint="keep flags and counters in an int32 / int64 buffer")
    return form


#: the atomic updates T.atomic_add/max/min per kind: dtype -> C expression of (ptr, value), whose
#: value is the element's previous one (return_prev=True; a statement discards it)
_UPDATES = {
    "add": {"float16": "tlx_atomic_fetch_add_h({}, {})", "bfloat16": "tlx_atomic_fetch_add_b({}, {})",
            "float32": "atomicAdd({}, {})", "float64": "atomicAdd({}, {})", "int32": "atomicAdd({}, {})",
            "uint32": "atomicAdd({}, {})", "uint64": "atomicAdd({}, {})",
            "int64": "(long long)atomicAdd((unsigned long long*){}, (unsigned long long)({}))"},
    **{kind: {"float32": f"tlx_atomic_fetch_{kind}_f({{}}, {{}})", "int32": f"atomic{kind.capitalize()}({{}}, {{}})",
              "uint32": f"atomic{kind.capitalize()}({{}}, {{}})", "uint64": f"atomic{kind.capitalize()}({{}}, {{}})",
              "int64": f"atomic{kind.capitalize()}((long long*){{}}, {{}})"} for kind in ("max", "min")},
}


def _update(kind: str, dt: DType, ptr: str, val: str, what: str, loc: Any) -> str:
    """The atomic ``kind`` of ``val`` into ``*ptr`` (``what``: the operation, for the error)."""
    form = _UPDATES[kind].get(dt.name)
    if form is None:
        raise BackendNotImplementedError(f"{what} is not supported on CUDA", loc=loc,
                                         hint=f"keep the element in a buffer of one of {', '.join(_UPDATES[kind])}")
    return form.format(ptr, val)


def _bitwise_atomic(kind: str, dt: DType, ptr: str, val: str, loc: Any) -> str:
    """``atomicOr/And/Xor``: 32/64-bit words directly (signed ones reinterpreted, which changes no
    bit), 8/16-bit integers on the word that holds them (tlx_cuda.h)."""
    fn = f"atomic{kind.capitalize()}"
    if dt.name in ("int32", "uint32"):
        return f"{fn}((unsigned int*){ptr}, (unsigned int)({val}));"
    if dt.name in ("int64", "uint64"):
        return f"{fn}((unsigned long long*){ptr}, (unsigned long long)({val}));"
    if dt.is_int and dt.bits in (8, 16):
        return f"tlx_atomic_{kind}_narrow({ptr}, (unsigned int)({val}), {hex((1 << dt.bits) - 1)}u);"
    raise BackendNotImplementedError(f"T.atomic_{kind} on {dt} is not supported on CUDA", loc=loc)


_UNSIGNED = {8: "unsigned char", 16: "unsigned short", 32: "unsigned int", 64: "unsigned long long"}


#: float32 / float64 <-> their bits: (value -> bits, bits -> value) intrinsics
_FLOAT_BITS = {"float32": ("__float_as_uint", "__uint_as_float"),
               "float64": ("__double_as_longlong", "__longlong_as_double")}


def _bit_cast(text: str, dt: DType, to_bits: bool) -> str:
    """A value of ``dt`` (as computed: narrow floats in float) as its bit pattern, or with
    ``to_bits`` false, a bit pattern as the value of ``dt``."""
    if dt.name in NARROW:
        if to_bits:
            return f"{NARROW[dt.name][1]}({text}).x"
        return f"{NARROW[dt.name][0]}({ctype(dt)}{{({_UNSIGNED[dt.bits]})({text})}})"
    if dt.name in _FLOAT_BITS:
        return f"{_FLOAT_BITS[dt.name][0 if to_bits else 1]}({text})"
    return f"({_UNSIGNED[dt.bits]})({text})" if to_bits else f"(({eval_ctype(dt)})({text}))"


def _int_func(name: str, x: str, dt: DType) -> str:
    """``__popc`` / ``__clz`` (``ll`` for 64 bits) of ``x``'s bits zero-extended from ``dt``'s width;
    ``clz`` of a narrow integer drops the leading zeros the extension adds."""
    wide = dt.bits == 64
    bits = f"({'unsigned long long' if wide else 'unsigned int'})({_UNSIGNED[dt.bits]})({x})"
    if name == "popcount":
        return f"__popc{'ll' if wide else ''}({bits})"
    text = f"__clz{'ll' if wide else ''}(({'long long' if wide else 'int'})({bits}))"
    return text if dt.bits >= 32 else f"({text} - {32 - dt.bits})"


def _pow2_floor(a: str, rhs: E.Expr, dt: DType, op: str) -> str | None:
    """Floor division or modulo of an integer by a positive power of two, whatever the sign of
    ``a``: an arithmetic shift or a mask, as two's complement makes them (-3 // 4 = -3 >> 2 = -1,
    -3 % 4 = -3 & 3 = 1); ``None`` for other divisors."""
    c = E.as_int(rhs)
    if not dt.is_int or c is None or c <= 0 or c & (c - 1):
        return None
    if op == "//":
        return a if c == 1 else f"({a} >> {c.bit_length() - 1})"
    return "0" if c == 1 else f"({a} & {c - 1}{'ll' if dt.bits == 64 else ''})"


def _nonneg_divmod(a: str, b: str, rhs: E.Expr, dt: DType, op: str) -> str:
    """``a / b`` or ``a % b`` of non-negative 32-bit ints: a shift or mask for a power of two
    (``_pow2_floor``), else unsigned arithmetic (signed division by a constant costs sign fix-ups
    in SASS)."""
    if dt.bits == 64 or not dt.is_int:
        return f"({a} {op} {b})"
    pow2 = _pow2_floor(a, rhs, dt, "//" if op == "/" else "%")
    if pow2 is not None:
        return pow2
    if dt.kind == "uint":
        return f"({a} {op} {b})"
    return f"((int)((unsigned)({a}) {op} (unsigned)({b})))"


def _widen(gen: _Gen, idx: tuple[E.Expr, ...], b: Buffer) -> str:
    text = f"(long long)({gen.expr(idx[0], True)})"
    for i, s in zip(idx[1:], b.shape[1:]):
        text = f"({text} * {gen.expr(s)} + {gen.expr(i)})"
    return text


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _bare(text: str) -> str:
    """``text`` without the parentheses around all of it."""
    if text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        return text[1:-1]
    return text


def _const(e: E.Const) -> str:
    dt = e.dtype
    if dt.is_bool:
        return "true" if e.value else "false"
    if dt.is_int:
        v = int(e.value)
        if dt.bits == 64 or not -(2**31) <= v < 2**31:
            return f"{v}LL" if dt.kind == "int" else f"{v}ULL"
        return f"{v}u" if dt.kind == "uint" and v >= 0 else str(v)
    v = narrow_constant(e) if is_narrow_float(dt) else float(e.value)
    suffix = "" if dt.bits == 64 else "f"
    if math.isinf(v):
        inf = "__int_as_float(0x7f800000)" if suffix else "__longlong_as_double(0x7ff0000000000000LL)"
        return inf if v > 0 else f"(-{inf})"
    if math.isnan(v):
        return "__int_as_float(0x7fffffff)" if suffix else "__longlong_as_double(0x7ff8000000000000LL)"
    text = repr(v)
    if "e" not in text and "." not in text:
        text += ".0"
    return f"{text}{suffix}"
