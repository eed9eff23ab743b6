"""Tile operators: the ops that move or compute whole tiles.

Each op is declared once here with its operands and its shape rule (``check``); the interpreter
gives the reference semantics and each backend lowers it. Plugins may define further ops by
subclassing ``TileOp``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import expr as E
from .buffer import Buffer, Region
from .dtypes import DType
from .errors import ShapeMismatchError
from .source import SourceLoc
from .stmt import Stmt

REDUCE_KINDS = ("sum", "max", "min", "abssum", "absmax", "bitand", "bitor", "bitxor")
#: the reductions of integer tiles only
BIT_REDUCE_KINDS = ("bitand", "bitor", "bitxor")
#: ``store`` replaces the element; the bitwise kinds are for integer dtypes only
ATOMIC_KINDS = ("add", "max", "min", "or", "and", "xor", "store")
BIT_ATOMIC_KINDS = ("or", "and", "xor")
GEMM_POLICIES = ("Square", "FullRow", "FullCol")

_NODE = dict(frozen=True, eq=False, slots=True, repr=False)


def squeeze(extents: tuple[E.Expr, ...]) -> tuple[E.Expr, ...]:
    """Extents with the dimensions of extent 1 removed."""
    return tuple(e for e in extents if E.as_int(e) != 1)


def same_extent(a: E.Expr, b: E.Expr) -> bool:
    """Whether two extents are provably equal; symbolic ones must match structurally."""
    ia, ib = E.as_int(a), E.as_int(b)
    if ia is not None and ib is not None:
        return ia == ib
    return a.same_as(b)


def _fmt(extents: tuple[E.Expr, ...]) -> str:
    return "[" + ", ".join(str(e) for e in extents) + "]"


def identity(kind: str, dt: DType) -> E.Expr:
    """The value that ``kind`` (``REDUCE_KINDS``) combines with any ``x`` to ``x``, in ``dt``."""
    if kind in ("sum", "abssum", "absmax", "bitor", "bitxor"):
        return E.cast(E.const(0), dt)
    if kind == "bitand":  # every bit set
        return E.const(-1 if dt.kind == "int" else 2 ** dt.bits - 1, dt)
    big = float("inf") if dt.is_float else (2 ** (dt.bits - 1) - 1 if dt.kind == "int" else 2 ** dt.bits - 1)
    if kind == "max":
        return E.const(-big if dt.is_float else (-(2 ** (dt.bits - 1)) if dt.kind == "int" else 0), dt)
    return E.const(big, dt)


def _gemm_dims(a: tuple[E.Expr, ...], b: tuple[E.Expr, ...], c: tuple[E.Expr, ...], trans_A: bool, trans_B: bool,
               a_name: str) -> tuple[E.Expr, E.Expr, E.Expr, list[str]]:
    """(M, K of A, K of B, what is wrong with M and N against C) of 2-d gemm operand extents."""
    m, ka = (a[1], a[0]) if trans_A else (a[0], a[1])
    kb, n = (b[1], b[0]) if trans_B else (b[0], b[1])
    problems = [] if same_extent(m, c[0]) else [f"M of {a_name} is {m} but C has {c[0]} rows"]
    if not same_extent(n, c[1]):
        problems.append(f"N of B is {n} but C has {c[1]} columns")
    return m, ka, kb, problems


class TileOp(Stmt):
    """Base of tile operators; ``check`` raises ``ShapeMismatchError`` naming the operands."""

    __slots__ = ()
    name = "tileop"

    def regions(self) -> tuple[Region, ...]:
        return tuple(v for v in (getattr(self, f) for f in self.__dataclass_fields__) if isinstance(v, Region))

    def check(self) -> None:
        """Validate operand shapes; called by the frontend when the op is built."""


@dataclass(**_NODE)
class Copy(TileOp):
    """``T.copy(src, dst)``: element-wise copy between any two scopes, with dtype conversion."""

    src: Region
    dst: Region
    annotations: tuple[tuple[str, Any], ...] = ()
    loc: SourceLoc | None = field(default=None, compare=False)
    name = "copy"

    def check(self) -> None:
        s, d = squeeze(self.src.extents), squeeze(self.dst.extents)
        if len(s) != len(d) or not all(same_extent(a, b) for a, b in zip(s, d)):
            raise ShapeMismatchError(
                f"T.copy shape mismatch: source `{self.src.buffer.name}` region {_fmt(self.src.extents)} "
                f"vs destination `{self.dst.buffer.name}` region {_fmt(self.dst.extents)}",
                loc=self.loc,
                hint="make both regions the same size (dimensions of extent 1 are ignored)",
            )


@dataclass(**_NODE)
class TmaCopy(Copy):
    """``T.tma_copy(src, dst, barrier=bar[index])``: a copy of a global tile into a shared tile
    that the threads running it issue once, completing on the mbarrier ``bar[index]``: the issue
    adds the tile's bytes to the barrier's expected transactions and the landed bytes complete
    them (``arrive``: the issue also arrives once, TileLang's ``emit_arrive``). It does not arrive
    otherwise: the kernel's ``T.barrier_arrive`` does. Without a barrier, a TMA store of a shared
    tile into a global tensor, committed as a bulk group of its own (``BulkGroup``).

    ``mask`` (``cluster_mask=``, a load in a kernel launched in clusters): the ranks of the blocks
    of the cluster that share the tile, bit ``r`` for rank ``r``. Every block runs the copy and
    expects the tile's bytes on its own barrier; the lowest rank of the mask loads the tile once
    into all of them (TMA multicast), completing each one's barrier, and a block outside the mask
    loads its own. So the blocks of the mask must name the same tile, and then the copy means what
    it means without the mask (0: no mask)."""

    barrier: Buffer | None = None
    index: E.Expr = E.const(0)
    arrive: bool = False
    mask: int = 0
    name = "tma_copy"

    @property
    def is_store(self) -> bool:
        return self.barrier is None

    @property
    def nbytes(self) -> E.Expr:
        """Bytes the copy moves (the destination tile's)."""
        n: E.Expr = E.const(self.dst.buffer.dtype.bytes)
        for e in self.dst.extents:
            n = n * e
        return n


@dataclass(**_NODE)
class AsyncCopy(Copy):
    """``T.async_copy(src, dst)``: a copy of a global tile into a shared tile by the threads
    running it, issued as ``cp.async`` and committed as a group of its own: the tile is there once
    a ``T.ptx_wait_group`` has waited for that group (``CpAsyncGroup``)."""

    name = "async_copy"


@dataclass(**_NODE)
class Fill(TileOp):
    """``T.fill(dst, value)`` / ``T.clear(dst)``."""

    dst: Region
    value: E.Expr
    loc: SourceLoc | None = field(default=None, compare=False)
    name = "fill"


@dataclass(**_NODE)
class Gemm(TileOp):
    """``T.gemm(A, B, C)``: ``C += op(A) @ op(B)`` (``C = ...`` when ``clear_accum``)."""

    A: Region
    B: Region
    C: Region
    trans_A: bool = False
    trans_B: bool = False
    policy: str = "Square"
    clear_accum: bool = False
    k_pack: int = 1
    wg_wait: int = 0
    loc: SourceLoc | None = field(default=None, compare=False)
    name = "gemm"

    def mnk(self) -> tuple[E.Expr, E.Expr, E.Expr]:
        a, b = squeeze(self.A.extents), squeeze(self.B.extents)
        m, ka = (a[1], a[0]) if self.trans_A else (a[0], a[1])
        kb, n = (b[1], b[0]) if self.trans_B else (b[0], b[1])
        return m, n, ka if E.as_int(ka) is not None else kb

    def check(self) -> None:
        for label, r in (("A", self.A), ("B", self.B), ("C", self.C)):
            if len(squeeze(r.extents)) != 2:
                raise ShapeMismatchError(
                    f"T.gemm operand {label} (`{r.buffer.name}`) must be a 2-d tile, got {_fmt(r.extents)}",
                    loc=self.loc,
                )
        a, b, c = squeeze(self.A.extents), squeeze(self.B.extents), squeeze(self.C.extents)
        m, ka, kb, mn = _gemm_dims(a, b, c, self.trans_A, self.trans_B, "A")
        problems = ([] if same_extent(ka, kb) else [f"K of A is {ka} but K of B is {kb}"]) + mn
        if problems:
            raise ShapeMismatchError(
                f"T.gemm shape mismatch: A {_fmt(a)}, B {_fmt(b)}, C {_fmt(c)} "
                f"(transpose_A={self.trans_A}, transpose_B={self.trans_B}): " + "; ".join(problems),
                loc=self.loc,
                hint="A is [M, K] ([K, M] with transpose_A), B is [K, N] ([N, K] with transpose_B), C is [M, N]",
            )


#: the dtypes of 2:4 sparsity metadata and how many dense K columns one element of each covers
#: (4 bits per group of 4 columns: see ``GemmSp``)
SPARSE_META_DTYPES = {"int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "int32": 32, "uint32": 32}


@dataclass(**_NODE)
class GemmSp(TileOp):
    """``T.gemm_sp(A_sparse, E, B, C)``: ``C += op(A) @ op(B)`` where ``A`` ([M, K], 2:4 sparse along
    K) is given compressed: ``A`` is ``A_sparse`` ([M, K/2]; [K/2, M] with ``trans_A``), the two kept
    values of each group of 4 columns in column order, and ``E`` ([M, K / e]) says where they were.

    The metadata format (the one ``tilelang_x.utils.sparse.compress`` writes): row ``m`` of ``E`` is a
    little-endian bit string with 4 bits per group ``g`` of 4 dense columns at bits ``4g..4g+3``:
    the low 2 bits are the column (0-3) of the first kept value, the high 2 bits that of the second,
    and the first is the smaller. An element of ``E`` holds ``e = bits / 4 * 4`` columns' worth
    (``SPARSE_META_DTYPES``), so the same bytes read as int8, int16 or int32 mean the same thing."""

    A: Region
    E: Region
    B: Region
    C: Region
    trans_A: bool = False
    trans_B: bool = False
    policy: str = "Square"
    clear_accum: bool = False
    loc: SourceLoc | None = field(default=None, compare=False)
    name = "gemm_sp"

    def mnk(self) -> tuple[E.Expr, E.Expr, E.Expr]:
        """(M, N, K) with K the dense depth (twice A_sparse's)."""
        b, c = squeeze(self.B.extents), squeeze(self.C.extents)
        kb = b[1] if self.trans_B else b[0]
        return c[0], c[1], kb

    def check(self) -> None:
        for label, r in (("A_sparse", self.A), ("E", self.E), ("B", self.B), ("C", self.C)):
            if len(squeeze(r.extents)) != 2 and (r is not self.E or len(squeeze(r.extents[:-1])) != 1):
                raise ShapeMismatchError(
                    f"T.gemm_sp operand {label} (`{r.buffer.name}`) must be a 2-d tile, got {_fmt(r.extents)}",
                    loc=self.loc,
                )
        a, b, c = (squeeze(r.extents) for r in (self.A, self.B, self.C))
        e = squeeze(self.E.extents[:-1]) + self.E.extents[-1:]  # [M, K / e]; one column is a column
        m, ka, kb, mn = _gemm_dims(a, b, c, self.trans_A, self.trans_B, "A_sparse")
        per = SPARSE_META_DTYPES[self.E.buffer.dtype.name]
        problems = []
        ia, ib, ie = E.as_int(ka), E.as_int(kb), E.as_int(e[1])
        if not (ia * 2 == ib if ia is not None and ib is not None else same_extent(ka * 2, kb)):
            problems.append(f"A_sparse holds K/2 = {ka} columns but K of B is {kb}")
        if ib is not None and (ib % per or ie is not None and ie * per != ib):
            problems.append(f"E must be [M, K / {per}] = [{m}, {ib / per:g}] for {self.E.buffer.dtype} metadata")
        if not same_extent(m, e[0]):
            problems.append(f"M of A_sparse is {m} but E has {e[0]} rows")
        problems += mn
        if problems:
            raise ShapeMismatchError(
                f"T.gemm_sp shape mismatch: A_sparse {_fmt(a)}, E {_fmt(e)}, B {_fmt(b)}, C {_fmt(c)} "
                f"(transpose_A={self.trans_A}, transpose_B={self.trans_B}): " + "; ".join(problems),
                loc=self.loc,
                hint="A_sparse is [M, K/2] ([K/2, M] with transpose_A), E is [M, K / e] (e = 8, 16 or 32 for "
                "8-, 16- or 32-bit metadata), B is [K, N] ([N, K] with transpose_B), C is [M, N]",
            )


@dataclass(**_NODE)
class Reduce(TileOp):
    """``T.reduce_<kind>(src, dst, dim, clear)``: reduce ``src`` along ``dim`` into ``dst``;
    without ``clear`` the result is combined with what ``dst`` holds."""

    kind: str
    src: Region
    dst: Region
    dim: int
    clear: bool = True
    loc: SourceLoc | None = field(default=None, compare=False)
    name = "reduce"

    def check(self) -> None:
        src = self.src.extents
        expect = squeeze(src[: self.dim] + src[self.dim + 1:])
        got = squeeze(self.dst.extents)
        if len(expect) != len(got) or not all(same_extent(a, b) for a, b in zip(expect, got)):
            raise ShapeMismatchError(
                f"T.reduce_{self.kind}: reducing `{self.src.buffer.name}` {_fmt(src)} along dim "
                f"{self.dim} gives {_fmt(expect)}, but `{self.dst.buffer.name}` is {_fmt(self.dst.extents)}",
                loc=self.loc,
            )


@dataclass(**_NODE)
class CumSum(TileOp):
    """``T.cumsum(src, dst, dim, reverse)``: inclusive prefix sum along ``dim``; with ``kind="max"``
    the running maximum (``T.cummax``)."""

    src: Region
    dst: Region
    dim: int
    reverse: bool = False
    kind: str = "sum"
    loc: SourceLoc | None = field(default=None, compare=False)
    name = "cumsum"

    def check(self) -> None:
        s, d = self.src.extents, self.dst.extents
        if len(s) != len(d) or not all(same_extent(a, b) for a, b in zip(s, d)):
            raise ShapeMismatchError(
                f"T.cum{self.kind}: `{self.src.buffer.name}` {_fmt(s)} and `{self.dst.buffer.name}` {_fmt(d)} differ",
                loc=self.loc,
            )


@dataclass(**_NODE)
class Atomic(TileOp):
    """``T.atomic_<kind>(dst, value)``: ``value`` is a scalar expression (``dst`` one element)
    or a region of the same shape as ``dst``. ``order`` is the memory order of a ``store``
    (``E.MEMORY_ORDERS``); the read-modify-write kinds leave it None (relaxed)."""

    kind: str
    dst: Region
    value: E.Expr | Region
    order: str | None = None
    loc: SourceLoc | None = field(default=None, compare=False)
    name = "atomic"

    def check(self) -> None:
        if isinstance(self.value, Region):
            s, d = squeeze(self.value.extents), squeeze(self.dst.extents)
            if len(s) != len(d) or not all(same_extent(a, b) for a, b in zip(s, d)):
                raise ShapeMismatchError(
                    f"T.atomic_{self.kind}: value region {_fmt(self.value.extents)} does not match "
                    f"destination `{self.dst.buffer.name}` region {_fmt(self.dst.extents)}",
                    loc=self.loc,
                )


#: the combine operations of ``T.alloc_reducer``; the bitwise ones take integer reducers only
REDUCER_KINDS = ("sum", "max", "min", "bitand", "bitor", "bitxor")


@dataclass(**_NODE)
class ReducerInit(TileOp):
    """Opens an epoch of the reducer ``dst`` (``T.alloc_reducer``; a whole buffer): the result of
    the epoch is ``value`` combined exactly once with every contribution ``ReducerUpdate`` makes
    until ``FinalizeReducer``."""

    kind: str
    dst: Region
    value: E.Expr
    loc: SourceLoc | None = field(default=None, compare=False)
    name = "reducer_init"


@dataclass(**_NODE)
class ReducerUpdate(TileOp):
    """Combines ``value`` into the element ``dst`` (a one-element region) of an open reducer. Unlike
    a store, any number of ``T.Parallel`` iterations may update the same element; every
    contribution counts once, in no particular order."""

    kind: str
    dst: Region
    value: E.Expr
    loc: SourceLoc | None = field(default=None, compare=False)
    name = "reducer_update"


@dataclass(**_NODE)
class FinalizeReducer(TileOp):
    """Closes the epoch of the reducer ``src``: from here on it holds the combined result, which is
    also copied to ``dst`` when given (``T.finalize_reducer(acc, dst)``)."""

    kind: str
    src: Region
    dst: Region | None = None
    loc: SourceLoc | None = field(default=None, compare=False)
    name = "finalize_reducer"
