"""The ``layout_inference`` stage: a layout for every fragment and shared tile, a thread mapping
for every parallel loop.

Order (a fixpoint, as in the design): strict rules first (``T.annotate_layout``, T.gemm operands
and accumulators), then propagation through parallel loops, element-wise tile ops and
reductions, then free choices (a coalesced default) for whatever is still open, propagating again
after each choice. Two rules that disagree raise ``LayoutError`` naming both uses and lines.

Results in ``ctx.data``: ``cuda.layouts`` (buffer -> Fragment | SharedLayout), ``cuda.loops``
(id of a parallel nest or element-wise op -> (loop Fragment, nest)), ``cuda.gemm`` (id of a
T.gemm -> GemmPlan).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from ...core_ir import dtypes
from ...core_ir import expr as E
from ...core_ir.buffer import Buffer
from ...core_ir.errors import BackendNotImplementedError, LayoutError, warn_at
from ...core_ir.gemm_precision import fp32_gemm_precision
from ...core_ir.stmt import Annotate, For, Kernel, PrimFunc, Stmt
from ...core_ir.tileops import Atomic, Copy, CumSum, Fill, FinalizeReducer, Gemm, GemmSp, Reduce
from ...core_ir.visit import views_of, walk, walk_stmts
from .layout import (
    Fragment,
    SharedLayout,
    choose_swizzle,
    default_fragment,
    drop_dims,
    from_annotation,
    local_map,
    loop_dims,
    mma_a_fragment,
    mma_c_fragment,
    reduce_dims,
    reshape_fragment,
    spread_over_threads,
)
from .layout_exchange import FOLLOW, NestConflict, broadcast_reads, exchange_through_shared
from .nests import atomic_nest, copy_nest, fill_nest, nest_info
from .perf_options import pass_configs
from .ptx_types import k_step
from .target import has_capability
from .warp_specialize import MANUAL, ws_threads

log = logging.getLogger("tilelang_x.cuda.layout")
_FP8_TENSOR_CORES = ("; float8 runs on tensor cores on sm_89 and later (mma.sync; on sm_90a wgmma when both tiles "
                     "are K-major in shared memory: B as [N, K] with transpose_B=True) with K a multiple of 32")


#: the 8-bit operand dtypes the tensor cores take (the mma and wgmma rules)
INT8_TYPES = (dtypes.int8, dtypes.uint8)
FP8_TYPES = (dtypes.float8_e4m3, dtypes.float8_e5m2)


@dataclass(frozen=True)
class GemmPlan:
    """How a T.gemm runs: ``kind`` ``mma`` (m16n8k16 over wm×wn warps; m16n8k8 with ``tf32``,
    m16n8k32 for 8-bit integers and floats),
    ``wgmma`` or ``fma``. ``tf32``: float32 operands rounded to TF32 (``core_ir/gemm_precision.py``).
    ``swap``: wgmma computes Cᵀ = Bᵀ·Aᵀ, Bᵀ gathered into registers (``hopper/wgmma_rule.py``);
    ``m``, ``n``, ``wm``, ``wn`` are then the wgmma's (C's N, M and the warpgroups along them)."""

    kind: str
    m: int
    n: int
    k: int
    wm: int = 1
    wn: int = 1
    tf32: bool = False
    swap: bool = False


def where(loc: Any) -> str:
    return f"line {loc.line}" if loc is not None else "unknown line"


def find_kernel(s: Stmt) -> Kernel | None:
    """The function's ``T.Kernel``; a second one raises (the CUDA backend emits one kernel)."""
    found = None
    for n in walk_stmts(s):
        if isinstance(n, Kernel):
            if found is not None:
                raise BackendNotImplementedError(
                    f"a second `with T.Kernel` block in one function: the CUDA backend compiles one T.Kernel per "
                    f"function (the first is at {where(found.loc)})", loc=n.loc or found.loc,
                    hint="split the function into one @T.prim_func (or @tilelang.jit function) per T.Kernel and "
                    "call the kernels one after the other")
            found = n
    return found


def uses_copy_nest(op: Copy) -> bool:
    """Element-wise lowering (through the loop machinery) unless it is a vector global→shared,
    shared→shared or same-dtype shared→global copy handled by ``lower/copy.py``."""
    s, d = op.src.buffer.scope, op.dst.buffer.scope
    if s == "shared" and d == "global":
        return op.src.buffer.dtype != op.dst.buffer.dtype
    return s == "fragment" or d == "fragment" or d == "global" or s in ("local", "var") or d in ("local", "var")


class _State:
    def __init__(self, threads: int, views: dict[Buffer, list[Buffer]] | None = None, tf32: bool = True,
                 fp8_mma: bool = False) -> None:
        self.threads = threads
        self.tf32 = tf32  # float32 T.gemm operands rounded to TF32 (pass config tlx.fp32_gemm)
        self.fp8_mma = fp8_mma  # mma.sync takes float8 operands (sm_89+)
        self.views = views or {}  # T.view buffers by the tile owning their memory
        self.layouts: dict[Buffer, Any] = {}
        self.origin: dict[Buffer, str] = {}
        self.loops: dict[int, tuple[Fragment, For]] = {}
        self.gemm: dict[int, GemmPlan] = {}
        # shared tiles annotated with a make_swizzled_layout: a request for a bank-conflict-free
        # placement, which the wgmma rule's swizzled panels satisfy too (``yield_request``)
        self.requested: set[Buffer] = set()

    # ---- setting layouts ------------------------------------------------------------------
    def set(self, buf: Buffer, lay: Any, origin: str, loc: Any) -> bool:
        old = self.layouts.get(buf)
        if old is None:
            self.layouts[buf] = lay
            self.origin[buf] = origin
            if isinstance(lay, Fragment):
                self.share_with_views(buf, lay, origin, loc)
            return True
        if isinstance(old, Fragment) and isinstance(lay, Fragment):
            ok = local_map(old, list(range(len(old.dims))), lay) is not None and \
                local_map(lay, list(range(len(lay.dims))), old) is not None
            if ok:
                return False
        elif old == lay:
            return False
        old_text = old.describe() if isinstance(old, Fragment) else old
        new_text = lay.describe() if isinstance(lay, Fragment) else lay
        raise LayoutError(
            f"layout conflict for `{buf.name}`: {self.origin[buf]} gives it {old_text}, but {origin} needs {new_text}",
            loc=loc,
            hint="use the same warp policy (e.g. policy=T.GemmWarpPolicy.FullRow) for gemms that share "
            "rows, or copy into a separate fragment",
        )

    def share_with_views(self, buf: Buffer, lay: Fragment, origin: str, loc: Any) -> None:
        """A fragment and its reshapes (``T.reshape`` / ``T.view`` of the same dtype) share their
        registers: the layout just found for one of them fixes the others' (``reshape_fragment``)."""
        base = buf.storage
        for other in (base, *self.views.get(base, ())):
            if other is buf:
                continue
            shape = other.static_shape()
            got = None if shape is None else reshape_fragment(lay, tuple(shape))
            if got is None:
                raise LayoutError(
                    f"`{other.name}` is a reshape of fragment `{base.name}`, but the layout {origin} gives "
                    f"`{buf.name}` ({lay.describe()}) cannot be read as shape {list(other.shape)}", loc=other.loc,
                    hint=f"T.copy `{base.name}` into a T.alloc_shared tile and reshape that")
            self.set(other, got, f"{origin}, through the reshape `{buf.name}`", loc)

    def yield_request(self, buf: Buffer) -> bool:
        """Whether ``buf`` has no layout or one only a ``make_swizzled_layout`` request gave it; the
        request's layout is then dropped, so that a rule needing another swizzle may set its own."""
        if buf in self.requested:
            self.requested.discard(buf)
            del self.layouts[buf], self.origin[buf]
        return buf not in self.layouts

    def viewed(self, buf: Buffer) -> bool:
        """Whether ``buf``'s memory is also accessed through another shape or dtype (``T.view``):
        then its elements must stay row-major (no swizzle)."""
        return buf.base is not None or buf in self.views

    # ---- strict rules ----------------------------------------------------------------------
    def gemm_rule(self, op: Gemm) -> None:
        m, n, k = (E.as_int(x) for x in op.mnk())
        a, b, c = op.A.buffer, op.B.buffer, op.C.buffer
        origin = f"T.gemm at {where(op.loc)}"
        if m is None or n is None or k is None:
            raise LayoutError("T.gemm needs constant tile sizes on CUDA", loc=op.loc)
        if c.scope != "fragment":
            raise LayoutError(f"T.gemm accumulator `{c.name}` must be a fragment on CUDA (got {c.scope})", loc=op.loc)
        tf32 = self.tf32 and a.dtype == b.dtype == c.dtype == dtypes.float32
        byte_ops = (a.dtype in INT8_TYPES and b.dtype in INT8_TYPES and c.dtype == dtypes.int32 or  # m16n8k32
                    self.fp8_mma and a.dtype in FP8_TYPES and b.dtype in FP8_TYPES and c.dtype == dtypes.float32)
        mma_types = tf32 or byte_ops or a.dtype == b.dtype and a.dtype in (dtypes.float16, dtypes.bfloat16) and \
            c.dtype == dtypes.float32
        if self.threads % 32:
            raise LayoutError(f"T.gemm on CUDA runs on whole warps: a block of {self.threads} threads is not a "
                              "multiple of 32", loc=op.loc,
                              hint=f"give T.Kernel threads={max(32, self.threads // 32 * 32)} or "
                                   f"{(self.threads // 32 + 1) * 32}")
        warps = self.threads // 32
        plan = None
        rows_ok = _unaligned_rows(a, b) is None
        a_ok = a.scope == "shared" or a.scope == "fragment" and not (op.trans_A or tf32 or byte_ops)
        if mma_types and rows_ok and b.scope == "shared" and a_ok and k % k_step(a.dtype.name) == 0:
            wmn = choose_warps(m, n, warps, op.policy)
            if wmn is not None:
                plan = GemmPlan("mma", m, n, k, *wmn, tf32=tf32)
        if plan is None:
            plan = GemmPlan("fma", m, n, k, tf32=tf32)
            if a.scope == "fragment" or b.scope == "fragment":
                raise LayoutError(
                    f"T.gemm with a fragment operand cannot run on CUDA's tensor cores here: "
                    f"{_fragment_gemm_obstacle(op, mma_types and not (tf32 or byte_ops), k, warps)}",
                    loc=op.loc, hint="keep the operand in T.alloc_shared, where every gemm form reads it")
            log.debug("%s: %s x %s -> %s (M=%d N=%d K=%d) has no tensor-core form here: a per-element FMA loop%s",
                      origin, a.dtype, b.dtype, c.dtype, m, n, k, _FP8_TENSOR_CORES if a.dtype.bits == 8 else "")
            slip = _likely_slip(op, m, n, k, warps)
            if slip is not None:  # most likely a mistake, and an expensive one: say so where the gemm is written
                warn_at(op.loc, f"T.gemm: {slip[0]}, so it runs as a per-element FMA loop, tens of times slower "
                                "than on the tensor cores", hint=slip[1])
            self.gemm[id(op)] = plan
            # the FMA loop runs over any accumulator layout; unless one is given, it takes the mma
            # form's where the tile splits into the warps' m16n8 atoms, so that the loops and
            # reductions reading it are laid out alike whichever form the dtypes and the arch give
            wmn = choose_warps(m, n, warps, op.policy)
            if wmn is not None and c not in self.layouts:
                self.set(c, mma_c_fragment(m, n, *wmn, origin), f"{origin} (accumulator)", op.loc)
            return
        self.gemm[id(op)] = plan
        self.set(c, mma_c_fragment(m, n, plan.wm, plan.wn, origin), f"{origin} (accumulator)", op.loc)
        if a.scope == "fragment":
            self.set(a, mma_a_fragment(m, k, plan.wm, plan.wn, origin), f"{origin} (A operand)", op.loc)
        for buf in (a, b):
            if buf.scope == "shared":
                self.operand_tile(buf, origin, op.loc)

    def operand_tile(self, buf: Buffer, origin: str, loc: Any) -> None:
        """A shared tile that ldmatrix reads: swizzled (bank-conflict free) unless it already has a
        layout or is viewed."""
        shape = buf.static_shape()
        if shape is None:
            raise LayoutError(f"shared tile `{buf.name}` needs a constant shape", loc=loc)
        swizzle = "none" if self.viewed(buf) else choose_swizzle(shape, buf.dtype.bytes)
        if buf not in self.layouts:
            self.layouts[buf] = SharedLayout(shape, buf.dtype.bytes, swizzle)
            self.origin[buf] = origin

    # ---- propagation -----------------------------------------------------------------------
    def nest_rule(self, key: int, nest: For, free: bool) -> bool:
        """Propagate through one parallel nest; with ``free``, choose its layout if still open."""
        vars_, exts, body = nest_info(nest)
        shape = [E.as_int(e) for e in exts]
        accesses = fragment_accesses(body, vars_)
        changed = False
        if key not in self.loops:
            lay = None
            for buf, dim_map, _ in accesses:
                have = self.layouts.get(buf)
                full = sorted(ld for ld in dim_map if ld is not None) == list(range(len(vars_)))
                if isinstance(have, Fragment) and full:
                    lay = permute_to_loop(have, dim_map)
                    break
            if lay is None and not free:
                return False
            if lay is None:
                if any(s is None for s in shape):
                    self.loops[key] = (None, nest)  # type: ignore[assignment]
                    return True
                lay = default_fragment(tuple(shape), self.threads, vector_width(body, shape, self.threads),  # type: ignore[arg-type]
                                       f"T.Parallel at {where(nest.loc)}")
                _warn_if_few_threads(lay, shape, self.threads, nest)  # type: ignore[arg-type]
            self.loops[key] = (lay, nest)
            changed = True
        lay = self.loops[key][0]
        if lay is None:
            return changed
        for buf, dim_map, loc in accesses:
            want = loop_to_buffer(lay, dim_map, f"T.Parallel at {where(nest.loc)}")
            have = self.layouts.get(buf)
            if have is None:  # through ``set``: the fragment's reshapes get theirs too
                changed |= self.set(buf, want, f"the loop at {where(nest.loc)}", loc)
            elif local_map(lay, dim_map, have) is None and self.origin[buf] == f"the loop at {where(nest.loc)}":
                raise NestConflict(
                    f"the loop at {where(nest.loc)} indexes fragment `{buf.name}` in two ways that need different "
                    f"thread layouts (as at {where(loc)}): a fragment has one layout", key, buf, loc=loc,
                    hint=f"index `{buf.name}` the same way throughout the loop (e.g. not both [i, j] and [j, i]), "
                    f"or T.copy it into a T.alloc_shared tile and read the other pattern from there")
            elif local_map(lay, dim_map, have) is None:
                raise NestConflict(
                    f"layout conflict for `{buf.name}` at {where(loc)}: {self.origin[buf]} gives it "
                    f"{have.describe()}, but the loop at {where(nest.loc)} maps its threads as {lay.describe()}"
                    + _order_note(buf, dim_map),
                    key, buf, loc=loc,
                    hint="use the same warp policy for the gemms involved, or copy into a separate fragment"
                    if "T.gemm" in self.origin[buf] else
                    f"index `{buf.name}` the same way in every loop that uses it, or T.copy it into a separate "
                    "fragment for this loop")
        return changed

    def reduce_rule(self, op: Reduce | CumSum, free: bool) -> bool:
        src, dst = op.src.buffer, op.dst.buffer
        if src.scope != "fragment":
            return False
        have = self.layouts.get(src)
        if have is None:
            if not free:
                return False
            shape = src.static_shape()
            if shape is None:
                raise LayoutError(f"fragment `{src.name}` needs a constant shape", loc=op.loc)
            have = default_fragment(shape, self.threads, 1, f"default for `{src.name}`")
            self.set(src, have, f"the default layout (first used at {where(op.loc)})", op.loc)
        if dst.scope != "fragment":
            return False
        if isinstance(op, CumSum):
            want = have
        else:
            dst_shape = dst.static_shape()
            dim_map = None if dst_shape is None else reduce_dims(have.shape, op.dim, dst_shape)
            if dim_map is None:
                raise LayoutError(f"T.reduce into `{dst.name}`: the destination must have the source's dims "
                                  f"without dim {op.dim}, with optional extra unit dims", loc=op.loc)
            want = loop_to_buffer(have, dim_map, f"T.reduce at {where(op.loc)}")
        if dst in self.layouts:
            return self.set(dst, want, f"T.reduce_{getattr(op, 'kind', 'cumsum')} at {where(op.loc)}", op.loc)
        self.set(dst, want, f"T.reduce_{getattr(op, 'kind', 'cumsum')} at {where(op.loc)}", op.loc)
        return True


def permute_to_loop(frag: Fragment, dim_map: list[int | None]) -> Fragment:
    dims: list[Any] = [None] * len([ld for ld in dim_map if ld is not None])
    for k, ld in enumerate(dim_map):
        if ld is not None:
            dims[ld] = frag.dims[k]
    return Fragment(tuple(dims), frag.rep, frag.threads, frag.origin)


def loop_to_buffer(loop: Fragment, dim_map: list[int | None], origin: str) -> Fragment:
    """The layout of a fragment whose dims are indexed by the loop dims ``dim_map`` (``None``: a
    unit dim, which holds no digits)."""
    used = [ld for ld in dim_map if ld is not None]
    if sorted(used) == list(range(len(loop.dims))):
        frag = Fragment(tuple(loop.dims[d] for d in used), loop.rep, loop.threads, origin)
    else:
        frag = drop_dims(loop, used, origin)
    dims = iter(frag.dims)
    return Fragment(tuple(() if ld is None else next(dims) for ld in dim_map), frag.rep, frag.threads, origin)


def fragment_accesses(body: Stmt, vars_: list[E.Var]) -> list[tuple[Buffer, list[int | None], Any]]:
    """Fragments read or written in a loop body, with the loop dim indexing each of their dims
    (``None``: a unit dim indexed by 0). Accesses with other index expressions are skipped here
    (lowering rejects them if needed)."""
    out = []
    seen = set()
    for n in walk(body):
        buf = getattr(n, "buffer", None)
        idx = getattr(n, "indices", None)
        if not isinstance(buf, Buffer) or buf.scope != "fragment" or idx is None:
            continue
        dim_map = loop_dims(buf.shape, idx, vars_)
        used = [ld for ld in dim_map or () if ld is not None]
        if dim_map is None or len(set(used)) != len(used):
            continue
        key = (id(buf), tuple(dim_map))
        if key not in seen:
            seen.add(key)
            out.append((buf, dim_map, getattr(n, "loc", None)))
    return out


def vector_width(body: Stmt, shape: list[int], threads: int) -> int:
    widest = 1
    for n in walk(body):
        buf = getattr(n, "buffer", None)
        if isinstance(buf, Buffer) and buf.scope in ("global", "shared"):
            widest = max(widest, buf.dtype.bytes)
    vec = max(1, 16 // widest)
    total = 1
    for s in shape:
        total *= s
    while vec > 1 and (shape[-1] % vec or total // vec < threads):
        vec //= 2
    return vec


def choose_warps(m: int, n: int, warps: int, policy: str) -> tuple[int, int] | None:
    cands = []
    for wm in range(1, warps + 1):
        if warps % wm:
            continue
        wn = warps // wm
        if m % (16 * wm) == 0 and n % (8 * wn) == 0:
            cands.append((wm, wn))
    if not cands:
        return None
    if policy == "FullRow":
        return max(cands, key=lambda c: c[0])
    if policy == "FullCol":
        return max(cands, key=lambda c: c[1])
    return min(cands, key=lambda c: (abs(m / c[0] - n / c[1]), -c[0]))


def element_nest(op: Stmt) -> For | None:
    if isinstance(op, Copy) and uses_copy_nest(op) and op.dst.buffer.scope not in ("local", "var"):
        return copy_nest(op)
    if isinstance(op, Fill) and op.dst.buffer.scope in ("fragment", "shared", "global"):
        return fill_nest(op)
    if isinstance(op, Atomic):
        return atomic_nest(op)
    if isinstance(op, FinalizeReducer) and op.dst is not None:  # the result copied to its destination
        return copy_nest(Copy(op.src, op.dst, loc=op.loc))
    return None


def _warn_if_few_threads(lay: Fragment, shape: list[int], threads: int, nest: For) -> None:
    """A ``PerformanceWarning`` when a T.Parallel nest with work for every thread spreads over an
    eighth of them or fewer (300 elements on 128 threads: 2, the vector of 2 and the factor 2 left),
    the other threads repeating the work: the layouts split extents exactly, with no padded tail."""
    replicas = math.prod(d.extent for d in lay.rep)
    if replicas >= 8 and math.prod(shape) >= threads:  # an eighth of the threads or fewer: 8x the time
        warn_at(nest.loc, f"T.Parallel over {'x'.join(map(str, shape))} elements runs on {threads // replicas} of the "
                          f"block's {threads} threads, the others repeating its work: its extents do not split over "
                          "more of them",
                hint="make the extents a multiple of the thread count (pad the tile, guard the tail), or give "
                     "T.Kernel a thread count that divides them")


def _unaligned_rows(*operands: Buffer) -> Buffer | None:
    """The first shared operand whose rows are not a constant multiple of 16 bytes (what ldmatrix
    and the mma forms read), or ``None``."""
    for x in operands:
        row = E.as_int(x.shape[-1]) if x.scope == "shared" else 0
        if row is None or row * x.dtype.bytes % 16:
            return x
    return None


def _likely_slip(op: Gemm, m: int, n: int, k: int, warps: int) -> tuple[str, str] | None:
    """``(what, what to change)`` when a T.gemm of shared operands misses the tensor cores for a
    reason that is most likely a slip: operands of two types; 16-bit floats accumulated in another
    type than float32; or a tile the mma atoms fit whose K, rows or warps do not. ``None`` for the
    forms with no tensor-core path meant (float32 at IEEE precision, tiles under 16 x 8...)."""
    a, b, c = op.A.buffer, op.B.buffer, op.C.buffer
    if a.dtype != b.dtype:
        if any(a.dtype in kin and b.dtype in kin for kin in (FP8_TYPES, INT8_TYPES)):
            return None
        return (f"`{a.name}` is {a.dtype} and `{b.name}` is {b.dtype}, and the tensor cores take two operands of "
                f"one type", f"give both operands one type (T.copy converts: copy `{b.name}` into a tile of "
                f"{a.dtype}, or the other way round)")
    if a.dtype not in (dtypes.float16, dtypes.bfloat16):
        return None
    if c.dtype != dtypes.float32:
        return (f"`{c.name}` accumulates in {c.dtype}, and the tensor-core forms here accumulate in float32",
                f"allocate `{c.name}` as a float32 fragment and convert when copying it out")
    if m % 16 or n % 8:
        return None
    step = k_step(a.dtype.name)
    if k % step:
        return f"K={k} is not a multiple of {step}", f"make the K tile a multiple of {step}"
    x = _unaligned_rows(a, b)
    if x is not None:
        return (f"the rows of shared `{x.name}` are not a multiple of 16 bytes (last dimension {x.shape[-1]})",
                f"make `{x.name}`'s last dimension a multiple of {16 // x.dtype.bytes}")
    return (f"the {m}x{n} tile does not split into 16x8 mma tiles over the block's {warps} warps",
            "give T.Kernel threads=128 or 256, or a tile whose M and N split over its warps")


def _fragment_gemm_obstacle(op: Gemm, fp16_types: bool, k: int, warps: int) -> str:
    """Why a T.gemm with a fragment operand has no tensor-core form: the first condition it misses."""
    a, b, c = op.A.buffer, op.B.buffer, op.C.buffer
    if b.scope == "fragment":
        return f"B (`{b.name}`) must be in shared memory; only A may be a fragment"
    if op.trans_A:
        return f"a fragment A (`{a.name}`) cannot be transposed (transpose_A=True)"
    if not fp16_types:
        return (f"a fragment A needs float16 or bfloat16 A and B of one dtype with a float32 accumulator "
                f"(got {a.dtype} x {b.dtype} -> {c.dtype})")
    if k % k_step(a.dtype.name):
        return f"K must be a multiple of {k_step(a.dtype.name)} (got K={k})"
    return (f"M={op.C.extents[0]} and N={op.C.extents[-1]} must split into 16x8 warp tiles over the block's "
            f"{warps} warps, and shared rows of B must be a multiple of 16 bytes")


def _order_note(buf: Buffer, dim_map: list[int | None]) -> str:
    """What makes two equal-looking layouts conflict: the access takes the buffer's dimensions from
    the loop's in another order (``f[j, i]`` in ``for i, j in T.Parallel(...)``)."""
    used = [d for d in dim_map if d is not None]
    if used == sorted(used):
        return ""
    return f", and this access indexes `{buf.name}` with the loop's variables in another order (a transpose)"


def infer_stage(func: PrimFunc, ctx: Any) -> PrimFunc:
    count = 0
    # one round of broadcast copies, after the first inference that succeeds; none with T.ws regions,
    # whose threads cannot all meet at a barrier
    broadcast_pending = ctx.data.get(MANUAL, 0) == 0
    first: NestConflict | None = None  # names the user's fragment, not an exchange's copy of it
    while True:
        try:
            st = _infer(func, ctx)
        except NestConflict as conflict:
            first = first or conflict
            changed = exchange_through_shared(func, conflict, count)
            if changed is None:
                raise first from None
            func, count = changed, count + 1
            continue
        if not broadcast_pending:
            break
        broadcast_pending = False
        changed = broadcast_reads(func, {b for b, lay in st.layouts.items()
                                         if isinstance(lay, Fragment) and spread_over_threads(lay)})
        if changed is None:
            break
        func = changed
    ctx.data["cuda.layouts"] = st.layouts
    ctx.data["cuda.loops"] = st.loops
    ctx.data["cuda.gemm"] = st.gemm
    ctx.data["cuda.threads"] = st.threads
    return func


def _infer(func: PrimFunc, ctx: Any) -> _State:
    """Layouts for ``func``'s kernel (a ``NestConflict`` when two loops need a fragment laid out
    differently: ``layout_exchange.py`` may resolve it)."""
    kernel = find_kernel(func.body)
    if kernel is None:
        raise LayoutError("no T.Kernel in the function", loc=func.loc)
    views = views_of(kernel.body)
    check_fragment_views(views)
    st = _State(ws_threads(kernel, ctx), views, fp32_gemm_precision(pass_configs(ctx)) == "tf32",
                has_capability(ctx.target, "fp8_mma"))
    gemm_rule = ctx.data.get("cuda.gemm_rule")  # the Hopper path's wgmma rule (wgmma_rule.py)
    for buf, lay in ctx.data.get("cuda.preset_layouts", {}).items():  # TMA destinations
        st.set(buf, lay, "its TMA copy", buf.loc)
    nests: list[tuple[int, For]] = []
    reduces: list[Stmt] = []
    inner: set[int] = set()
    followers: set[int] = set()  # element nests that take their fragment's layout, never choose one
    allocs: list[Buffer] = []
    for n in walk(kernel.body):
        if isinstance(n, Annotate) and n.kind == "layout":
            for buf, lay in n.data:
                _annotated(st, buf, lay, n.loc)
        elif isinstance(n, Gemm):
            if gemm_rule is None or not gemm_rule(st, n):
                st.gemm_rule(n)
        elif isinstance(n, GemmSp):
            from .lower.gemm_sp import gemm_sp_rule

            gemm_sp_rule(st, n, ctx)
        elif isinstance(n, (Reduce, CumSum)):
            reduces.append(n)
        elif isinstance(n, For) and n.kind == "parallel" and id(n) not in inner:
            nests.append((id(n), n))
            s = n.body
            while True:
                if isinstance(s, For) and s.kind == "parallel":
                    inner.add(id(s))
                    s = s.body
                elif hasattr(s, "stmts") and len(s.stmts) == 1 and isinstance(s.stmts[0], For):
                    s = s.stmts[0]
                else:
                    break
        elif isinstance(n, (Copy, Fill, Atomic, FinalizeReducer)):
            nest = element_nest(n)
            if nest is not None:
                nests.append((id(n), nest))
                if isinstance(n, Copy) and dict(n.annotations).get(FOLLOW):
                    followers.add(id(n))
        buf = getattr(n, "buffer", None)
        if type(n).__name__ == "Alloc" and isinstance(buf, Buffer):
            allocs.append(buf)
    # propagate; then free choices one at a time (in program order), propagating after each
    while True:
        changed = True
        while changed:
            changed = False
            for key, nest in nests:
                changed |= st.nest_rule(key, nest, free=False)
            for op in reduces:
                changed |= st.reduce_rule(op, free=False)  # type: ignore[arg-type]
        progressed = False
        for key, nest in nests:
            if key not in st.loops and key not in followers and st.nest_rule(key, nest, free=True):
                progressed = True
                break
        if not progressed:
            for op in reduces:
                if st.reduce_rule(op, free=True):  # type: ignore[arg-type]
                    progressed = True
                    break
        if not progressed:
            break
    for buf in allocs:
        if buf.scope == "fragment" and buf not in st.layouts:
            shape = buf.static_shape()
            if shape is None:
                raise LayoutError(f"fragment `{buf.name}` needs a constant shape", loc=buf.loc)
            st.set(buf, default_fragment(shape, st.threads, 1, "default"), "the default", buf.loc)
        if buf.scope == "shared" and buf not in st.layouts:
            shape = buf.static_shape()
            if shape is None:
                raise LayoutError(f"shared tile `{buf.name}` needs a constant shape", loc=buf.loc)
            st.layouts[buf] = SharedLayout(shape, buf.dtype.bytes, "none")
    for key, nest in nests:
        if key in followers:
            st.nest_rule(key, nest, free=False)
    check_viewed_tiles(st)
    return st


def check_fragment_views(views: dict[Buffer, list[Buffer]]) -> None:
    """A fragment's elements are spread over the threads by the layout chosen here: a reshape
    (same dtype) reads the same registers in another shape (``reshape_fragment``), but another
    dtype over them has no meaning the kernel could rely on."""
    for base, vs in views.items():
        if base.scope != "fragment":
            continue
        for v in vs:
            if v.dtype != base.dtype:
                raise BackendNotImplementedError(
                    f"`{v.name}` views fragment `{base.name}` ({base.dtype}) as {v.dtype}: on CUDA a fragment's "
                    "elements are spread over the threads by a layout the backend chooses, so the CUDA backend "
                    "reshapes fragments but does not reinterpret their dtype", loc=v.loc,
                    hint=f"T.copy `{base.name}` into a T.alloc_shared tile and view that, or view a T.alloc_local "
                    "array inside the T.Parallel loop")


def check_viewed_tiles(st: _State) -> None:
    """A shared tile read through a view must keep the row-major placement the view assumes."""
    for base, vs in st.views.items():
        if base.scope == "fragment":  # reshapes of a fragment follow its layout (share_with_views)
            continue
        for buf in (base, *vs):
            lay = st.layouts.get(buf)
            if lay is None or (isinstance(lay, SharedLayout) and lay.swizzle == "none"):
                continue
            raise LayoutError(
                f"`{base.name}` is viewed as `{vs[0].name}` (at {where(vs[0].loc)}), which needs its elements "
                f"row-major, but {st.origin.get(buf, 'a rule')} gives `{buf.name}` the layout {lay}", loc=vs[0].loc,
                hint=f"drop the layout annotation of `{buf.name}`, or T.copy the tile into a separate T.alloc_shared "
                "buffer and view that one")


_SHARED_LAYOUTS_TEXT = ("row-major (tilelang.layout.make_linear_layout) and the 16-byte-chunk XOR swizzles of "
                        "tilelang.layout.make_swizzled_layout for rows of 32, 64 or 128 bytes")


def _annotated(st: _State, buf: Buffer, lay: Any, loc: Any) -> None:
    if isinstance(lay, (Fragment, SharedLayout)):  # the backend's own layouts
        st.set(buf, lay, f"T.annotate_layout at {where(loc)}", loc)
        return
    from ...core_ir import layout as core_layout

    what = f"T.annotate_layout for `{buf.name}`"
    if not isinstance(lay, core_layout.Layout):
        raise LayoutError(
            f"{what}: {type(lay).__name__} {lay!r} is not a layout", loc=loc,
            hint=f"pass a layout object, e.g. tilelang.layout.make_swizzled_layout({buf.name}), or drop the "
            "annotation and let the backend choose")
    if buf.scope == "global" and not isinstance(lay, core_layout.Fragment):
        # TileLang's FlashAttention backward places its float32 dQ for the atomics this way (in the
        # main kernel and the one reading it back); a layout never changes results, and global
        # tensors stay row-major here
        log.debug("%s at %s: global tensors stay row-major on CUDA; the layout is not used", what, where(loc))
        return
    if isinstance(lay, core_layout.Fragment) and buf.scope == "local":
        return  # every thread holds the whole of a local buffer: a thread map has nothing to place
    if isinstance(lay, core_layout.Fragment) and buf.scope == "fragment":
        shape = buf.static_shape()
        found = None if shape is None else from_annotation(lay, shape, st.threads, f"T.annotate_layout at {where(loc)}")
        if found is None:
            raise LayoutError(
                f"{what}: the CUDA backend takes a Fragment annotation whose thread and register index each add "
                f"up digits of the element's indices (like `(i // 2) * 32 + j % 32`), without replication, over "
                f"at most the block's {st.threads} threads; {lay!r} is not one", loc=loc,
                hint="drop the annotation; the backend infers fragment layouts from the tile ops that use them")
        st.set(buf, found, f"T.annotate_layout at {where(loc)}", loc)
        return
    if isinstance(lay, core_layout.Fragment) or buf.scope != "shared":
        raise LayoutError(
            f"{what}: the CUDA backend does not take {type(lay).__name__} annotations for {buf.scope} buffers yet "
            "(only layouts of shared tiles)", loc=loc,
            hint="drop the annotation; the backend infers fragment layouts from the tile ops that use them")
    shape = buf.static_shape()
    if shape is None:
        raise LayoutError(f"{what}: the shared tile needs a constant shape", loc=loc)
    found = shared_layout_of(lay, shape, buf.dtype.bytes)
    if found is None:
        raise LayoutError(f"{what}: this layout ({lay!r}) is not one the CUDA backend supports for a "
                          f"{list(shape)} {buf.dtype} tile", loc=loc,
                          hint=f"use {_SHARED_LAYOUTS_TEXT}, or drop the annotation")
    st.set(buf, found, f"T.annotate_layout at {where(loc)}", loc)
    if swizzle_request(lay, shape, buf.dtype.bytes):
        st.requested.add(buf)


def shared_layout_of(lay: Any, shape: tuple[int, ...], elem_bytes: int) -> SharedLayout | None:
    """The backend's ``SharedLayout`` for a ``shape`` tile annotated with the ``core_ir.layout``
    ``Layout`` ``lay``: one that places every element where ``lay`` does (compared by
    enumeration); else, when ``lay`` is one of ``make_swizzled_layout``'s swizzles (a request for a
    bank-conflict-free tile, whose placement never changes results), the backend's own swizzle;
    else ``None``."""
    from ...core_ir import layout as core_layout

    want = _offsets(lay, shape)
    if want is None:
        return None
    for swizzle in ("none", "sw128", "sw64", "sw32"):
        if swizzle != "none" and (len(shape) < 2 or 16 % elem_bytes or shape[-1] * elem_bytes % 32):
            continue
        cand = SharedLayout(shape, elem_bytes, swizzle)
        got = _offsets(core_layout.Layout(shape, cand.offset(lay.vars), vars=lay.vars), shape, flat=True)
        if got is not None and (got == want).all():
            return cand
    return SharedLayout(shape, elem_bytes, choose_swizzle(shape, elem_bytes)) \
        if swizzle_request(lay, shape, elem_bytes, want) else None


def swizzle_request(lay: Any, shape: tuple[int, ...], elem_bytes: int, want: Any = None) -> bool:
    """Whether ``lay`` places a ``shape`` tile as one of ``make_swizzled_layout``'s swizzles
    (``want``: its offsets, when already enumerated)."""
    from ...core_ir import layout as core_layout

    want = _offsets(lay, shape) if want is None else want
    if want is None:
        return False
    for swizzle_bytes in (128, 64, 32):
        try:
            ref = core_layout.make_swizzled_layout(shape, elem_bytes * 8, swizzle_bytes)
        except LayoutError:
            continue
        got = _offsets(ref, shape)
        if got is not None and (got == want).all():
            return True
    return False


def _offsets(lay: Any, shape: tuple[int, ...], flat: bool = False) -> Any:
    """Where ``lay`` puts each element of ``shape`` (row-major order) as a numpy array of
    linear offsets (``flat``: ``lay`` already gives one), or ``None`` when it cannot tell or
    ``lay`` is not a bijection onto ``prod(shape)`` slots."""
    import math

    import numpy as np

    from ...core_ir import layout as core_layout
    from ...core_ir.simplify import evaluate

    size = math.prod(shape)
    if tuple(E.as_int(d) for d in lay.input_shape) != tuple(shape) or size > core_layout.ENUMERATION_CAP:
        return None
    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in shape], indexing="ij")
    env = {v: g.reshape(-1) for v, g in zip(lay.vars, grids)}
    try:
        if flat:
            expr = lay.forward[0]
        else:
            if math.prod(E.as_int(d) for d in lay.output_shape) != size:  # type: ignore[misc]
                return None
            expr = lay.get_linearized_forward_index()
        out = np.broadcast_to(np.asarray(evaluate(expr, env), np.int64), (size,))
    except (LayoutError, TypeError, KeyError, ValueError):
        return None
    return out if np.unique(out).size == size else None
