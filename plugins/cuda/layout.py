"""Layouts of the CUDA backend.

``Fragment``: how a register tile is spread over the threads of a block. Each logical dimension is
a mixed-radix number whose digits (most significant first) are either *thread* digits (the digit
is ``(tx // stride) % extent`` of the thread index) or *local* digits (``(v // stride) % extent``
of the thread's register slot ``v``). Thread digits that appear in no dimension (``rep``) are
replication: those threads hold copies. Both directions are closed-form, and dropping a dimension
(a row statistic of a tile) is just moving its thread digits to ``rep``.

``SharedLayout``: a shared-memory tile, row-major with an optional XOR swizzle of its 16-byte
chunks (backends.md A5), which makes ldmatrix and 128-bit cp.async conflict-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ...core_ir import expr as E
from ...core_ir.errors import LayoutError


@dataclass(frozen=True)
class Digit:
    """One digit of a dimension: ``kind`` ``"T"`` (thread) or ``"L"`` (local register slot)."""

    extent: int
    kind: str
    stride: int


Dim = tuple[Digit, ...]


def _prod(xs: list[int] | tuple[int, ...]) -> int:
    return math.prod(xs) if xs else 1


@dataclass(frozen=True)
class Fragment:
    """A thread/register distribution of a tile (see the module docstring)."""

    dims: tuple[Dim, ...]
    rep: tuple[Digit, ...]
    threads: int
    origin: str = ""

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(_prod([d.extent for d in dim]) for dim in self.dims)

    @property
    def num_local(self) -> int:
        return _prod([d.extent for dim in self.dims for d in dim if d.kind == "L"])

    def describe(self) -> str:
        parts = []
        for dim in self.dims:
            parts.append("·".join(f"{d.extent}{d.kind}{d.stride}" for d in dim) or "1")
        rep = ", rep " + "·".join(f"{d.extent}T{d.stride}" for d in self.rep) if self.rep else ""
        return f"[{' | '.join(parts)}{rep}]"

    # ---- closed forms --------------------------------------------------------------------------
    def coords(self, tx: E.Expr, v: E.Expr) -> tuple[E.Expr, ...]:
        """The logical indices held by thread ``tx`` in register slot ``v``."""
        out = []
        for dim in self.dims:
            total: E.Expr | None = None
            place = _prod([d.extent for d in dim])
            for d in dim:
                place //= d.extent
                if d.extent == 1:
                    continue
                value = _digit(tx if d.kind == "T" else v, d)
                term = value * place if place != 1 else value
                total = term if total is None else total + term
            out.append(E.const(0) if total is None else total)
        return tuple(out)

    def owner_digits(self, index: tuple[int, ...]) -> tuple[dict[int, int], int]:
        """For a constant logical index: thread digit values by stride, and the local slot."""
        threads: dict[int, int] = {}
        local = 0
        for dim, i in zip(self.dims, index):
            place = _prod([d.extent for d in dim])
            for d in dim:
                place //= d.extent
                val = (i // place) % d.extent
                if d.kind == "T":
                    threads[d.stride] = val
                else:
                    local += val * d.stride
        return threads, local

    def replica_guard(self, tx: E.Expr) -> E.Expr | None:
        """Condition true for exactly one copy of each element (``None``: no replication)."""
        cond: E.Expr | None = None
        for d in self.rep:
            if d.extent == 1:
                continue
            c = E.binary("==", _digit(tx, d), 0)
            cond = c if cond is None else E.binary("and", cond, c)
        return cond


def spread_over_threads(frag: Fragment) -> bool:
    """Whether ``frag`` places its elements in different threads (then code outside ``T.Parallel``,
    which every thread runs, cannot find an element in its own registers)."""
    return any(d.kind == "T" for dim in frag.dims for d in dim)


def _digit(src: E.Expr, d: Digit) -> E.Expr:
    x = src if d.stride == 1 else src // d.stride
    return x % d.extent


def compact_locals(dims: tuple[Dim, ...], rep: tuple[Digit, ...], threads: int, origin: str = "") -> Fragment:
    """Re-stride the local digits densely, keeping their relative order (by old stride, then
    position)."""
    locs = [(d.stride, n, k) for n, dim in enumerate(dims) for k, d in enumerate(dim) if d.kind == "L"]
    order = sorted(locs, key=lambda t: (-t[0], t[1], t[2]))
    exts = {(n, k): dims[n][k].extent for _, n, k in locs}
    new_stride: dict[tuple[int, int], int] = {}
    s = 1
    for _, n, k in reversed(order):
        new_stride[(n, k)] = s
        s *= exts[(n, k)]
    out = []
    for n, dim in enumerate(dims):
        out.append(tuple(Digit(d.extent, d.kind, new_stride[(n, k)]) if d.kind == "L" else d
                         for k, d in enumerate(dim)))
    return Fragment(tuple(out), rep, threads, origin)


def reshape_fragment(frag: Fragment, shape: tuple[int, ...], origin: str = "") -> Fragment | None:
    """``frag`` seen through a row-major reshape to ``shape`` (``T.reshape`` / ``T.view`` of a
    fragment, same dtype): the digits of all dimensions, read most significant first, are one
    mixed-radix number for the flat index; they are cut into the new dimensions from the least
    significant end, a digit split in two where a boundary falls inside it. The register slots
    and threads stay those of ``frag`` (the view shares its registers). ``None`` when a boundary
    falls inside a digit whose extent it does not divide."""
    if _prod(list(shape)) != _prod(list(frag.shape)):
        return None
    digits = [d for dim in frag.dims for d in dim if d.extent > 1]
    rev: list[tuple[Digit, ...]] = []
    for ext in reversed(shape):
        dim: list[Digit] = []
        need = ext
        while need > 1:
            if not digits:
                return None
            d = digits.pop()
            if d.extent <= need:
                if need % d.extent:
                    return None
                dim.append(d)
                need //= d.extent
                continue
            if d.extent % need:
                return None
            dim.append(Digit(need, d.kind, d.stride))  # the low part ...
            digits.append(Digit(d.extent // need, d.kind, d.stride * need))  # ... the high part stays
            need = 1
        merged: list[Digit] = []  # least significant first: rejoin the halves of a split digit
        for d in dim:
            low = merged[-1] if merged else None
            if low is not None and low.kind == d.kind and d.stride == low.stride * low.extent:
                merged[-1] = Digit(low.extent * d.extent, d.kind, low.stride)
            else:
                merged.append(d)
        rev.append(tuple(reversed(merged)))
    if digits:
        return None
    return Fragment(tuple(reversed(rev)), frag.rep, frag.threads, origin or frag.origin)


# ---- constructors ------------------------------------------------------------------------------
def default_fragment(shape: tuple[int, ...], threads: int, vec: int = 1, origin: str = "") -> Fragment:
    """Coalesced default: ``vec`` consecutive elements of the last dim per thread, threads next,
    then the remaining elements as further register slots; unused threads replicate."""
    left = threads
    ts = 1
    rev_dims: list[list[Digit]] = []
    for n in reversed(range(len(shape))):
        ext = shape[n]
        digits: list[Digit] = []
        v = math.gcd(vec, ext) if n == len(shape) - 1 else 1
        rest = ext // v
        t = math.gcd(rest, left)
        loc = rest // t
        if loc > 1:
            digits.append(Digit(loc, "L", 0))
        if t > 1:
            digits.append(Digit(t, "T", ts))
            ts *= t
            left //= t
        if v > 1:
            digits.append(Digit(v, "L", 0))
        rev_dims.append(digits)
    dims = tuple(tuple(d) for d in reversed(rev_dims))
    rep = (Digit(left, "T", ts),) if left > 1 else ()
    # local order: row-major over (dims, digits) -> give decreasing provisional strides
    counter = [10**9]

    def mark(d: Digit) -> Digit:
        counter[0] -= 1
        return Digit(d.extent, d.kind, counter[0]) if d.kind == "L" else d

    dims = tuple(tuple(mark(d) for d in dim) for dim in dims)
    return compact_locals(dims, rep, threads, origin)


def mma_c_fragment(m: int, n: int, wm: int, wn: int, origin: str = "") -> Fragment:
    """mma.sync m16n8 accumulator layout over an M×N tile split into wm×wn warps (A1: c0 = (g,
    2q), c1 = (g, 2q+1), c2 = (g+8, 2q), c3 = (g+8, 2q+1)); slot = ((mi*NI + ni)*2 + h)*2 + e."""
    mi, ni = m // (16 * wm), n // (8 * wn)
    rows = (Digit(wm, "T", 32 * wn), Digit(mi, "L", ni * 4), Digit(2, "L", 2), Digit(8, "T", 4))
    cols = (Digit(wn, "T", 32), Digit(ni, "L", 4), Digit(4, "T", 1), Digit(2, "L", 1))
    return Fragment((_strip(rows), _strip(cols)), (), 32 * wm * wn, origin)


def mma_a_fragment(m: int, k: int, wm: int, wn: int, origin: str = "") -> Fragment:
    """The A operand of m16n8k16 held in registers (A1: a0 = (g, 2q..), a1 = (g+8, ..),
    a2 = (g, 2q+8..), a3 = (g+8, 2q+8..)); slot = ((mi*KI + ki)*2 + kh)*4 + h*2 + e. Warps along N
    hold copies."""
    mi, ki = m // (16 * wm), k // 16
    rows = (Digit(wm, "T", 32 * wn), Digit(mi, "L", ki * 8), Digit(2, "L", 2), Digit(8, "T", 4))
    cols = (Digit(ki, "L", 8), Digit(2, "L", 4), Digit(4, "T", 1), Digit(2, "L", 1))
    rep = (Digit(wn, "T", 32),) if wn > 1 else ()
    return Fragment((_strip(rows), _strip(cols)), rep, 32 * wm * wn, origin)


def _strip(dim: tuple[Digit, ...]) -> Dim:
    return tuple(d for d in dim if d.extent != 1)


def drop_dims(frag: Fragment, keep: list[int], origin: str = "") -> Fragment:
    """The layout of a tile indexed by the dims ``keep`` (in that order) of ``frag``: the dropped
    dims' thread digits become replication, their register digits disappear."""
    dims = tuple(frag.dims[k] for k in keep)
    rep = list(frag.rep)
    for n, dim in enumerate(frag.dims):
        if n not in keep:
            rep.extend(d for d in dim if d.kind == "T")
    return compact_locals(dims, tuple(sorted(rep, key=lambda d: -d.stride)), frag.threads, origin)


def loop_dims(shape: tuple[E.Expr, ...], indices: tuple[E.Expr, ...], vars_: list[E.Var]) -> list[int | None] | None:
    """The loop dim (position in ``vars_``) indexing each dim of a fragment of ``shape`` accessed
    at ``indices``; ``None`` for a unit dim indexed by 0 (a squeezed tile op's ``F[0, i]``). ``None``
    when some index is another expression."""
    out: list[int | None] = []
    for extent, i in zip(shape, indices):
        pos = next((p for p, v in enumerate(vars_) if i is v), None)
        if pos is None and not (E.as_int(extent) == 1 and E.as_int(i) == 0):
            return None
        out.append(pos)
    return out


def reduce_dims(src_shape: tuple[int, ...], dim: int, dst_shape: tuple[int, ...]) -> list[int | None] | None:
    """For a reduction of ``src_shape`` over ``dim`` into ``dst_shape``: the source dim giving each
    destination dim (``None``: an extra unit dim, as in reducing a ``[N]`` tile into a ``[1]``
    one). ``None`` when the destination is not the kept dims with unit dims inserted."""
    kept = [d for d in range(len(src_shape)) if d != dim]
    out: list[int | None] = []
    for extent in dst_shape:
        if kept and src_shape[kept[0]] == extent:
            out.append(kept.pop(0))
        elif extent == 1:
            out.append(None)
        else:
            return None
    return None if kept else out


# ---- matching two layouts ----------------------------------------------------------------------
def refine(a: Dim, b: Dim) -> tuple[Dim, Dim] | None:
    """Split digits of ``a`` and ``b`` (same total extent) until both have the same extents;
    ``None`` when the radices are incompatible."""
    ra, rb = list(a), list(b)
    out_a: list[Digit] = []
    out_b: list[Digit] = []
    while ra and rb:
        x, y = ra.pop(), rb.pop()
        if x.extent == y.extent:
            out_a.append(x)
            out_b.append(y)
        elif x.extent % y.extent == 0:
            lo, hi = _split(x, y.extent)
            out_a.append(lo)
            out_b.append(y)
            ra.append(hi)
        elif y.extent % x.extent == 0:
            lo, hi = _split(y, x.extent)
            out_b.append(lo)
            out_a.append(x)
            rb.append(hi)
        else:
            return None
    if ra or rb:
        return None
    return tuple(reversed(out_a)), tuple(reversed(out_b))


def _split(d: Digit, low: int) -> tuple[Digit, Digit]:
    """Split ``d`` into (low part of extent ``low``, high part)."""
    return Digit(low, d.kind, d.stride), Digit(d.extent // low, d.kind, d.stride * low)


def local_map(loop: Fragment, dim_map: list[int | None], other: Fragment) -> list[tuple[int, int, int, int]] | None:
    """How ``other``'s register slot follows from ``loop``'s, when ``other`` dim ``k`` is indexed
    by ``loop`` dim ``dim_map[k]`` (``None``: a unit dim indexed by 0) and every element a loop
    thread visits is held by that thread in ``other``. Returns terms ``(loop_stride, extent,
    other_stride, _)``: slot = Σ ((v // loop_stride) % extent) * other_stride. ``None`` when the two
    layouts disagree."""
    terms = []
    for k, ld in enumerate(dim_map):
        if ld is None:
            continue
        pair = refine(loop.dims[ld], other.dims[k])
        if pair is None:
            return None
        for x, y in zip(*pair):
            if x.kind != y.kind:
                return None
            if x.kind == "T":
                if x.stride != y.stride:
                    return None
            else:
                terms.append((x.stride, x.extent, y.stride, 0))
    return terms


def slot_expr(terms: list[tuple[int, int, int, int]], v: E.Expr) -> E.Expr:
    out: E.Expr | None = None
    for ls, ext, os_, _ in terms:
        if ext == 1:
            continue
        term = _digit(v, Digit(ext, "L", ls))
        term = term * os_ if os_ != 1 else term
        out = term if out is None else out + term
    return E.const(0) if out is None else out


def same_layout(a: Fragment, b: Fragment) -> bool:
    if a.shape != b.shape:
        return False
    terms = local_map(a, list(range(len(a.dims))), b)
    if terms is None:
        return False
    return all(ls == os_ for ls, _, os_, _ in terms) and _rep_key(a) == _rep_key(b)


def _rep_key(f: Fragment) -> set[tuple[int, int]]:
    out = set()
    for d in f.rep:
        x = d
        while x.extent > 1:
            out.add((x.stride, 2 if x.extent % 2 == 0 else x.extent))
            if x.extent % 2 == 0:
                x = Digit(x.extent // 2, "T", x.stride * 2)
            else:
                break
    return out


def conflict(what: str, first: str, second: str, loc: object = None) -> LayoutError:
    return LayoutError(f"layout conflict for {what}: {first} vs {second}", loc=loc,  # type: ignore[arg-type]
                       hint="use the same warp policy for both uses, or copy through a separate fragment")


# ---- shared memory ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class SharedLayout:
    """Row-major shared tile; ``swizzle`` XORs the 16-byte chunk index of each row with bits of
    the row index: ``"sw128"`` (rows of n×128 B: chunk ^= row % 8 inside each 128 B segment),
    ``"sw64"`` (chunk ^= (row // 2) % 4), ``"sw32"`` (chunk ^= (row // 4) % 2) or ``"none"``."""

    shape: tuple[int, ...]
    elem_bytes: int
    swizzle: str = "none"

    @property
    def size(self) -> int:
        return _prod(list(self.shape))

    def offset(self, indices: tuple[E.Expr, ...]) -> E.Expr:
        """Element offset of a logical index."""
        cols = self.shape[-1]
        row: E.Expr = E.const(0)
        for i, ext in zip(indices[:-1], self.shape[:-1]):
            row = row * ext + i
        col = indices[-1]
        if self.swizzle == "none":
            return row * cols + col
        ce = 16 // self.elem_bytes
        # The XOR only reads row % 8; when the last row dim is a multiple of 8 (e.g. a pipeline
        # stage leads), that is its own index % 8, which keeps stage offsets linear.
        r8 = indices[-2] if len(indices) > 1 and self.shape[-2] % 8 == 0 else row
        # chunk ^ s (s < 8 chunks, ce a power of two) == col ^ (s * ce): one XOR on the column,
        # which only touches the bits under `span`; the bits above it are added, so a constant
        # part of the column (an unrolled k step) folds into the address as an immediate.
        if self.swizzle == "sw128":
            sel, span = r8 % 8, 8 * ce
        elif self.swizzle == "sw64":
            sel, span = (r8 // 2) % 4, 4 * ce
        else:
            sel, span = (r8 // 4) % 2, 2 * ce
        low = E.binary("^", E.binary("&", col, E.const(span - 1)), sel * ce)
        high = E.binary("&", col, E.const(-span))
        return row * cols + high + low


def choose_swizzle(shape: tuple[int, ...], elem_bytes: int) -> str:
    """The swizzle for a gemm operand tile whose rows are ``shape[-1]`` elements."""
    row_bytes = shape[-1] * elem_bytes
    rows = _prod(list(shape[:-1]))
    if row_bytes % 128 == 0 and rows % 8 == 0:
        return "sw128"
    if row_bytes == 64 and rows % 8 == 0:
        return "sw64"
    if row_bytes == 32 and rows % 8 == 0:
        return "sw32"
    return "none"


# ---- fragments annotated by the user ------------------------------------------------------------
def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


def _merged(digits: list[tuple[int, str, int]]) -> Dim:
    """Least-significant-first ``(radix, kind, stride)`` digits of one dim as a ``Dim`` (most
    significant first), joining neighbours that continue each other."""
    out: list[Digit] = []
    for radix, kind, stride in digits:
        last = out[-1] if out else None
        if last is not None and last.kind == kind and stride == last.stride * last.extent:
            out[-1] = Digit(last.extent * radix, kind, last.stride)
        else:
            out.append(Digit(radix, kind, stride))
    return tuple(reversed(out))


def from_annotation(frag: Any, shape: tuple[int, ...], threads: int, origin: str) -> Fragment | None:
    """The backend's ``Fragment`` for a ``core_ir.layout.Fragment`` annotation of a ``shape`` tile:
    each dim split into prime digits, each adding a multiple of itself to either the thread or the
    register index. ``None`` when the annotation's maps are not of that form, replicate, or need
    more than ``threads`` threads."""
    import numpy as np

    from ...core_ir.evaluate import evaluate

    if frag.replicate != 1 or len(frag.forward) != 1 or len(frag.vars) != len(shape):
        return None
    size = math.prod(shape)
    grids = [g.reshape(-1) for g in np.meshgrid(*[np.arange(n, dtype=np.int64) for n in shape], indexing="ij")]
    env = dict(zip(frag.vars, grids))
    thread, local = (np.broadcast_to(np.asarray(evaluate(e, env), dtype=np.int64), (size,))
                     for e in (frag.thread, frag.forward[0]))
    if thread[0] != 0 or local[0] != 0:
        return None
    rebuilt = {"T": np.zeros(size, dtype=np.int64), "L": np.zeros(size, dtype=np.int64)}
    dims = []
    for n, extent in enumerate(shape):
        weight, digits = 1, []
        for radix in _prime_factors(extent):
            point = math.prod(shape[n + 1:]) * weight  # the element whose only nonzero digit is this one
            steps = {"T": int(thread[point]), "L": int(local[point])}
            kinds = [k for k, s in steps.items() if s != 0]
            if len(kinds) != 1 or steps[kinds[0]] < 0:
                return None
            rebuilt[kinds[0]] += (grids[n] // weight) % radix * steps[kinds[0]]
            digits.append((radix, kinds[0], steps[kinds[0]]))
            weight *= radix
        dims.append(_merged(digits))
    if not ((rebuilt["T"] == thread).all() and (rebuilt["L"] == local).all()):
        return None
    slots = int(local.max()) + 1
    if slots != _prod([d.extent for dim in dims for d in dim if d.kind == "L"]) or \
            len(np.unique(thread * slots + local)) != size:
        return None
    rep, covered = [], 1
    for d in sorted((d for dim in dims for d in dim if d.kind == "T"), key=lambda d: d.stride):
        if d.stride % covered:
            return None
        if d.stride > covered:
            rep.append(Digit(d.stride // covered, "T", covered))
        covered = d.stride * d.extent
    if threads % covered:
        return None
    if threads > covered:
        rep.append(Digit(threads // covered, "T", covered))
    return Fragment(tuple(dims), tuple(sorted(rep, key=lambda d: -d.stride)), threads, origin)
