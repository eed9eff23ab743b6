"""State shared by the lowering of one kernel: layouts, thread count, variable ranges, the
register arrays that replace fragments, and extra shared workspaces."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.errors import LayoutError
from ....core_ir.stmt import Kernel, PrimFunc
from ..analysis import block_ranges
from ..layout import Fragment
from ..layout_inference import find_kernel
from ..lir import THREAD
from ..warp_specialize import MANUAL


@dataclass
class LowerCtx:
    threads: int
    layouts: dict[Buffer, Any]
    loops: dict[int, Any]
    gemm: dict[int, Any]
    ranges: dict[E.Var, tuple[int, int]] = field(default_factory=dict)
    locals: dict[Buffer, Buffer] = field(default_factory=dict)
    workspaces: list[Buffer] = field(default_factory=list)
    counter: int = 0
    #: id of a T.gemm -> the register array holding all its k-steps' A fragments (lower/hoist.py)
    hoisted: dict[int, Buffer] = field(default_factory=dict)
    #: perf_options switches (set by lower_stage)
    fold_clear: bool = False
    prefetch_fragments: bool = False
    hoist_fragments: bool = False
    vector_epilogue: bool = False
    vector_loads: bool = False
    #: float32 region atomics as red.global.add.v2/v4 (sm_90+, with the vector epilogue)
    vector_red: bool = False
    reciprocal_division: bool = False
    half_pairs: bool = False
    #: the staged (stmatrix + 16-byte store) epilogue (lower/staged_epilogue.py); sm_90a only
    staged_epilogue: bool = False
    #: shared memory bytes left for workspaces (the target's limit minus the kernel's tiles)
    smem_spare: int = 0
    #: the kernel walks tiles (hopper/persistent.py) and its TMA stores stay in flight from one
    #: tile to the next, drained after the last one (``tlx.defer_store_drain``)
    defer_store_drain: bool = False
    #: TMA stores of staged epilogues (lower/tma_store.py): the kernel's parameters (empty when
    #: off), the ids of those written only by fragment copies, the stores' tensor maps by (arg, box,
    #: swizzle), added to the loads' ones in ``cuda.tmaps``
    tma_params: tuple[Any, ...] = ()
    tma_store_dsts: frozenset[int] = frozenset()
    #: TMA reductions of float32 accumulators (lower/tma_reduce.py): on, and the ids of the
    #: parameters the kernel touches only by tile atomic adds of fragments
    tma_reduce: bool = False
    tma_reduce_dsts: frozenset[int] = frozenset()
    tmaps: dict[tuple, Any] = field(default_factory=dict)
    #: workspaces aligned to more than 16 bytes (codegen reads it as ``cuda.smem_align``)
    aligns: dict[Buffer, int] = field(default_factory=dict)
    #: ids of workspaces whose every part only its owning warp touches, ordered by the warp's own
    #: ``__syncwarp``s and waits (the staged epilogue's slots): sync insertion leaves them alone
    warp_private: set[int] = field(default_factory=set)
    #: workspaces ``shared_workspace`` hands out again, by (name, dtype)
    reusable: dict[tuple[str, dtypes.DType], list[Buffer]] = field(default_factory=dict)
    #: a kernel with T.ws regions or explicit barriers (warp_specialize.py): its warpgroups (0
    #: otherwise; its tile ops run on one); the shared arrays of its T.alloc_barrier buffers
    manual: int = 0
    barriers: dict[Buffer, Buffer] = field(default_factory=dict)
    #: the kernel's own T.tma_copy loads are TMA loads (sm_90a, TMA on: lower/tma_copy.py); the
    #: target has mbarrier transaction counts and the async proxy (sm_90 and later)
    user_tma: bool = False
    async_proxy: bool = False
    #: the kernel issues TMA stores of its own: it waits for them to read their tiles before it ends
    user_tma_stores: bool = False
    #: the target has setmaxnreg (sm_90a): the kernel's T.set_max_nreg calls are kept (registers.py)
    setmaxnreg: bool = False

    @staticmethod
    def from_stage(func: PrimFunc, ctx: Any) -> LowerCtx:
        kernel = find_kernel(func.body)
        assert isinstance(kernel, Kernel)
        lc = LowerCtx(ctx.data["cuda.threads"], ctx.data["cuda.layouts"], ctx.data["cuda.loops"],
                      ctx.data["cuda.gemm"])
        lc.ranges[THREAD] = (0, lc.threads - 1)
        lc.manual = ctx.data.get(MANUAL, 0)
        lc.ranges.update(block_ranges(kernel))
        pers = ctx.data.get("cuda.persistent")
        if pers is not None:  # the blocks' count at launch (hopper/persistent.py)
            lc.ranges[pers.stride] = pers.stride_range
        return lc

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"{base}_{self.counter}"

    def frag(self, buf: Buffer) -> Fragment:
        lay = self.layouts.get(buf)
        if not isinstance(lay, Fragment):
            raise LayoutError(f"no layout was inferred for fragment `{buf.name}`", loc=buf.loc)
        return lay

    def local_of(self, buf: Buffer) -> Buffer:
        """The per-thread register array standing for fragment ``buf`` (a reshape of a fragment
        reads its base's registers: the layouts give both the same slots)."""
        if buf.base is not None and buf.base.scope == "fragment" and buf.dtype == buf.base.dtype:
            return self.local_of(buf.base)
        out = self.locals.get(buf)
        if out is None:
            lay = self.frag(buf)
            out = Buffer(buf.name, (lay.num_local,), buf.dtype, "local", buf.loc)
            self.locals[buf] = out
        return out

    def workspace_bytes(self) -> int:
        return sum(b.shape[0].value * b.dtype.bytes + self.aligns.get(b, 16)  # type: ignore[attr-defined]
                   for b in self.workspaces)

    def shared_workspace(self, name: str, size: int, dtype: dtypes.DType) -> Buffer:
        """A workspace for uses that each start with a barrier of the block before their first
        write (cross-warp reductions): they can share one, so the first one made of ``name`` and
        ``dtype`` that holds ``size`` elements is reused (FullCol attention's two row reductions in
        one 2 KB buffer, not two)."""
        for b in () if self.manual else self.reusable.get((name, dtype), ()):  # regions run side by side
            if E.as_int(b.shape[0]) >= size:
                return b
        buf = self.workspace(name, size, dtype)
        self.reusable.setdefault((name, dtype), []).append(buf)
        return buf

    def workspace(self, name: str, size: int, dtype: dtypes.DType, align: int = 16,
                  warp_private: bool = False) -> Buffer:
        buf = Buffer(self.fresh(name), (size,), dtype, "shared")
        self.workspaces.append(buf)
        if warp_private:
            self.warp_private.add(id(buf))
        if align > 16:
            self.aligns[buf] = align
        return buf
