"""Layouts: where each element of a tile lives.

A ``Layout`` maps the logical index of a tile (``i, j, ...`` over its shape) to a physical index
(one or more coordinates): a row-major, transposed or XOR-swizzled placement in shared memory. A
``Fragment`` says how a tile is spread over the threads of a block: for each logical element
(and each replica, when ``replicate > 1``) the thread that holds it and where in that thread's
registers. Both are symbolic (the maps are IR expressions over placeholder variables) and compare
and print deterministically, so they can sit in the IR (``T.annotate_layout``) and in its text.

The constructors follow TileLang: ``T.Layout(shape, lambda i, j: ...)`` and
``T.Fragment(shape, forward_fn=lambda i, j: (thread, index))`` or with ``forward_thread_fn`` and
``forward_index_fn``; a replicated fragment's functions get the replica index as a last argument.
Backends may give the maps as expressions over their own variables instead (``vars=``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .buffer import Buffer, Region
from .errors import LayoutError
from .evaluate import evaluate
from .expr import BinOp, Const, Expr, Var, as_int, convert, free_vars
from .simplify import as_linear, simplify
from .visit import substitute

__all__ = [
    "Fragment", "Layout", "make_cutlass_metadata_layout", "make_full_bank_swizzled_layout",
    "make_fully_replicated_layout_fragment", "make_half_bank_swizzled_layout", "make_linear_layout",
    "make_metadata_layout", "make_quarter_bank_swizzled_layout", "make_swizzled_layout",
]

#: Largest domain (elements, times replicas) that is enumerated to check or measure a layout.
ENUMERATION_CAP = 1 << 20
_NAMES = ("i", "j", "k", "l")


def _index_vars(n: int) -> tuple[Var, ...]:
    return tuple(Var(_NAMES[d] if n <= len(_NAMES) else f"i{d}") for d in range(n))


def _as_shape(shape: Any) -> tuple[Expr, ...]:
    if isinstance(shape, Buffer):
        return shape.shape
    if isinstance(shape, Region):
        return shape.extents
    if isinstance(shape, (int, Expr)):
        return (convert(shape),)
    return tuple(convert(s) for s in shape)


def _as_exprs(value: Any) -> tuple[Expr, ...]:
    if isinstance(value, (list, tuple)):
        return tuple(convert(v) for v in value)
    return (convert(value),)


def _static(shape: tuple[Expr, ...]) -> tuple[int, ...] | None:
    dims = [as_int(s) for s in shape]
    return None if any(d is None for d in dims) else tuple(dims)  # type: ignore[misc]


def _domain(vars: Sequence[Var], shape: Sequence[int]) -> dict[Var, np.ndarray]:
    """Every point of ``shape`` as flat index arrays, one per variable (row-major order)."""
    grids = np.meshgrid(*[np.arange(s, dtype=np.int64) for s in shape], indexing="ij")
    return {v: g.reshape(-1) for v, g in zip(vars, grids)}


def _eval_all(e: Expr, env: dict[Var, np.ndarray], size: int) -> np.ndarray:
    out = evaluate(e, env)
    return np.broadcast_to(np.asarray(out, dtype=np.int64), (size,))


class Layout:
    """A map from the logical index of a tile to a physical index.

    ``Layout(shape, forward)``: ``forward`` is a function of one index variable per dimension
    returning one expression or a sequence of them, or (with ``vars=``) expressions over the
    given variables.
    """

    def __init__(self, shape: Any, forward: Any, *, vars: Sequence[Var] | None = None) -> None:
        self.input_shape: tuple[Expr, ...] = _as_shape(shape)
        self.vars: tuple[Var, ...] = tuple(vars) if vars is not None else _index_vars(len(self.input_shape))
        if len(self.vars) != len(self.input_shape):
            raise LayoutError(f"a layout over shape {self._shape_text()} needs {len(self.input_shape)} "
                              f"index variables, got {len(self.vars)}")
        out = forward(*self.vars) if callable(forward) else forward
        self.forward: tuple[Expr, ...] = self._canon(_as_exprs(out))
        self._out_shape: tuple[Expr, ...] | None = None

    # ---- basics -----------------------------------------------------------------------------
    def _bounds(self) -> dict[Var, tuple[int | None, int | None]]:
        out: dict[Var, tuple[int | None, int | None]] = {}
        for v, s in zip(self.vars, self.input_shape):
            n = as_int(s)
            out[v] = (0, None if n is None else n - 1)
        return out

    def _canon(self, exprs: tuple[Expr, ...]) -> tuple[Expr, ...]:
        bounds = self._bounds()
        for e in exprs:
            if not e.dtype.is_int:
                raise LayoutError(f"layout expression `{e}` is not an integer expression")
        return tuple(simplify(e, bounds) for e in exprs)

    def _shape_text(self) -> str:
        dims = [str(s) for s in self.input_shape]
        return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"

    def static_input_shape(self, what: str = "this") -> tuple[int, ...]:
        shape = _static(self.input_shape)
        if shape is None:
            raise LayoutError(f"{what} needs a layout with a static shape, got {self._shape_text()}")
        return shape

    def _enumerable(self, what: str, replicas: int = 1) -> tuple[int, ...]:
        shape = self.static_input_shape(what)
        if math.prod(shape) * replicas > ENUMERATION_CAP:
            raise LayoutError(f"{what}: the layout over {shape} is too large to enumerate "
                              f"(more than {ENUMERATION_CAP} points)")
        return shape

    def get_input_shape(self) -> tuple[Expr, ...]:
        return self.input_shape

    def get_forward_vars(self) -> tuple[Var, ...]:
        return self.vars

    def get_forward_index(self) -> tuple[Expr, ...]:
        return self.forward

    @property
    def index(self) -> tuple[Expr, ...]:
        return self.forward

    # ---- mapping ----------------------------------------------------------------------------
    def _subst(self, exprs: tuple[Expr, ...], indices: Sequence[Any], extra: dict[Var, Expr] | None = None
               ) -> tuple[Expr, ...]:
        idx = _as_exprs(list(indices))
        if len(idx) != len(self.vars):
            raise LayoutError(f"layout over shape {self._shape_text()} takes {len(self.vars)} indices, "
                              f"got {len(idx)}")
        mapping = dict(zip(self.vars, idx))
        if extra:
            mapping.update(extra)
        return tuple(simplify(substitute(e, mapping)) for e in exprs)

    def map(self, indices: Sequence[Any]) -> tuple[Expr, ...]:
        """The physical index of the logical index ``indices`` (expressions or ints)."""
        return self._subst(self.forward, indices)

    def map_forward_index(self, indices: Sequence[Any]) -> tuple[Expr, ...]:
        return self.map(indices)

    def __call__(self, *indices: Any) -> tuple[Expr, ...]:
        return self.map(indices)

    @property
    def output_shape(self) -> tuple[Expr, ...]:
        """Extent of each physical coordinate: one past the largest value it takes."""
        if self._out_shape is None:
            self._out_shape = self._extents(self.forward, self._reps())
        return self._out_shape

    def get_output_shape(self) -> tuple[Expr, ...]:
        return self.output_shape

    def _reps(self) -> dict[Var, int] | None:
        return None

    def _extents(self, exprs: tuple[Expr, ...], extra: dict[Var, int] | None = None) -> tuple[Expr, ...]:
        shape = _static(self.input_shape)
        reps = math.prod(extra.values()) if extra else 1
        if shape is not None and math.prod(shape) * reps <= ENUMERATION_CAP:
            env, size = self._points(shape, extra)
            out = []
            for e in exprs:
                vals = _eval_all(e, env, size)
                if size and int(vals.min()) < 0:
                    raise LayoutError(f"layout expression `{e}` takes the negative value {int(vals.min())}")
                out.append(Const(int(vals.max()) + 1 if size else 0))
            return tuple(out)
        return tuple(self._symbolic_extent(e) for e in exprs)

    def _points(self, shape: tuple[int, ...], extra: dict[Var, int] | None = None
                ) -> tuple[dict[Var, np.ndarray], int]:
        vars = list(self.vars) + list(extra or {})
        dims = list(shape) + list((extra or {}).values())
        return _domain(vars, dims), math.prod(dims)

    def _symbolic_extent(self, e: Expr) -> Expr:
        for v, s in zip(self.vars, self.input_shape):
            if e is v:
                return s
        lin = as_linear(e, self._bounds())
        dims = {id(v): s for v, s in zip(self.vars, self.input_shape)}
        if lin is not None and lin[1] >= 0 and all(k > 0 and id(a) in dims for k, a in lin[0]):
            total: Expr = Const(lin[1] + 1)
            for k, a in lin[0]:
                total = total + (dims[id(a)] - 1) * k
            return simplify(total)
        raise LayoutError(f"cannot tell the extent of layout expression `{e}` over shape {self._shape_text()}",
                          hint="give the layout a static shape")

    def linear_index(self, indices: Sequence[Any]) -> Expr:
        """The row-major offset of the physical index of ``indices`` within ``output_shape``."""
        coords = self.map(indices)
        offset: Expr = Const(0)
        for c, extent in zip(coords, self.output_shape):
            offset = offset * extent + c
        return simplify(offset)

    def get_linearized_forward_index(self) -> Expr:
        return self.linear_index(self.vars)

    # ---- properties -------------------------------------------------------------------------
    def is_bijective(self) -> bool:
        """Whether every physical slot of ``output_shape`` holds exactly one element (checked by
        enumeration; needs a static shape of at most ``ENUMERATION_CAP`` elements)."""
        shape = self._enumerable("is_bijective")
        env, size = self._points(shape)
        return _is_dense([_eval_all(e, env, size) for e in self.forward], self.output_shape, size)

    def inverse(self) -> Layout:
        """The layout from physical index back to logical index.

        Works for layouts whose physical coordinates are mixed-radix sums of *digits* of the
        logical indices (``i``, ``i // a``, ``i % b``, ``(i // a) % b``), possibly XOR-ed with
        digits already known: row-major/column-major/tiled maps and the XOR swizzles. Anything
        else raises ``LayoutError``. The result is checked by enumeration.
        """
        return _invert(self)

    # ---- identity ---------------------------------------------------------------------------
    def _key_exprs(self) -> tuple[Expr, ...]:
        return self.forward

    def is_equal(self, other: Any) -> bool:
        if type(other) is not type(self) or len(other.vars) != len(self.vars):
            return False
        if not all(_same_dim(a, b) for a, b in zip(self.input_shape, other.input_shape)):
            return False
        return self._same_maps(other)

    def _same_maps(self, other: Layout) -> bool:
        mapping: dict[Var, Expr] = dict(zip(other.vars, self.vars))
        mine, theirs = self._key_exprs(), other._key_exprs()
        return len(mine) == len(theirs) and all(
            a.same_as(substitute(b, mapping)) for a, b in zip(mine, theirs))

    def __eq__(self, other: object) -> bool:
        return self.is_equal(other)

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        from .printer import _Printer

        p = _Printer()
        names = ", ".join(p.expr(v) for v in self.vars)
        body = ", ".join(p.expr(e) for e in self.forward)
        return f"T.Layout({self._shape_text()}, lambda {names}: ({body}{',' if len(self.forward) == 1 else ''}))"


def _same_dim(a: Expr, b: Expr) -> bool:
    ia, ib = as_int(a), as_int(b)
    return ia == ib if ia is not None and ib is not None else a.same_as(b)


def _is_dense(coords: list[np.ndarray], out_shape: tuple[Expr, ...], size: int) -> bool:
    dims = [as_int(d) for d in out_shape]
    if any(d is None for d in dims) or math.prod(dims) != size:  # type: ignore[arg-type]
        return False
    flat = np.zeros(size, dtype=np.int64)
    for c, d in zip(coords, dims):
        if size and (int(c.min()) < 0 or int(c.max()) >= d):  # type: ignore[operator]
            return False
        flat = flat * d + c
    return len(np.unique(flat)) == size


def _used_digits(e: Expr, extents: dict[Var, int], out: dict[Var, list[tuple[int, int]]]) -> None:
    """The digit ranges ``[lo, hi)`` (``(v // lo) % (hi // lo)``) of each variable that ``e`` reads."""
    a = e.a if isinstance(e, BinOp) else None
    if isinstance(e, Var) and e in extents:
        out.setdefault(e, []).append((1, extents[e]))
        return
    if isinstance(e, BinOp) and e.op in ("//", "%") and as_int(e.b) is not None:
        k = as_int(e.b)
        inner = a.a if isinstance(a, BinOp) and a.op == "//" and e.op == "%" else a
        lo = as_int(a.b) if inner is not a else 1  # type: ignore[union-attr]
        if isinstance(inner, Var) and inner in extents and lo:
            n = extents[inner]
            out.setdefault(inner, []).append((k, n) if e.op == "//" else (lo, min(lo * k, n)))  # type: ignore[operator]
            return
    for child in e.children():
        _used_digits(child, extents, out)


def unused_digits(thread: Expr, vars: Sequence[Var], shape: Sequence[Expr]) -> Expr:
    """The register index TileLang infers for a fragment given only its thread map: the digits of
    the indices that the thread map does not read, flattened (first dimension most significant)."""
    extents = {v: as_int(s) for v, s in zip(vars, shape)}
    if any(n is None for n in extents.values()):
        raise LayoutError("a fragment with a symbolic shape needs forward_index_fn")
    used: dict[Var, list[tuple[int, int]]] = {}
    _used_digits(thread, extents, used)  # type: ignore[arg-type]
    index: Expr = Const(0)
    for v in vars:
        n = extents[v]
        pos, free = 1, []
        for lo, hi in sorted(used.get(v, [])) + [(n, n)]:  # type: ignore[operator]
            if lo > pos:
                free.append((pos, lo // pos))
            pos = max(pos, hi)
        for low, extent in reversed(free):  # the most significant digit first
            index = index * extent + (v // low) % extent
    return index


class Fragment(Layout):
    """How a tile is distributed over a block's threads: for each logical element (and replica)
    the owning thread (``thread``) and the position in that thread's registers (``forward``).

    ``Fragment(shape, forward_fn=f)`` with ``f(*idx[, rep]) -> (thread, index)``, or
    ``Fragment(shape, forward_thread_fn=t, forward_index_fn=x)`` with ``t(*idx[, rep])`` and
    ``x(*idx)``; ``forward_thread=`` / ``forward_index=`` take expressions over ``vars`` (and
    ``rep_var``) instead. With ``replicate=r`` each element is held by ``r`` threads.
    """

    def __init__(
        self,
        shape: Any,
        forward_fn: Callable[..., Any] | None = None,
        forward_thread_fn: Callable[..., Any] | None = None,
        replicate: int = 1,
        forward_index_fn: Callable[..., Any] | None = None,
        *,
        forward_thread: Any = None,
        forward_index: Any = None,
        vars: Sequence[Var] | None = None,
        rep_var: Var | None = None,
    ) -> None:
        self.input_shape = _as_shape(shape)
        self.vars = tuple(vars) if vars is not None else _index_vars(len(self.input_shape))
        if len(self.vars) != len(self.input_shape):
            raise LayoutError(f"a fragment over shape {self._shape_text()} needs {len(self.input_shape)} "
                              f"index variables, got {len(self.vars)}")
        replicate = as_int(replicate)  # type: ignore[assignment]
        if replicate is None or replicate < 1:
            raise LayoutError(f"Fragment replicate must be a positive integer, got {replicate!r}")
        self.replicate = replicate
        self.rep_var: Var | None = (rep_var or Var("rep")) if replicate > 1 else None
        rep_args = (self.rep_var,) if self.rep_var is not None else ()
        if forward_fn is not None and forward_thread_fn is not None:
            raise LayoutError(
                "Fragment got both forward_fn and forward_thread_fn",
                hint="give forward_fn=lambda *idx: (thread, index), or forward_thread_fn= together with "
                "forward_index_fn=",
            )
        if forward_fn is not None:
            got = forward_fn(*self.vars, *rep_args)
            if not isinstance(got, (tuple, list)) or len(got) != 2:
                raise LayoutError("Fragment forward_fn must return (thread, index)")
            thread, index = got
        else:
            thread = forward_thread_fn if forward_thread_fn is not None else forward_thread
            index = forward_index_fn if forward_index_fn is not None else forward_index
            if callable(thread):
                thread = thread(*self.vars, *rep_args)
            if callable(index):
                index = index(*self.vars)
        if thread is None:
            raise LayoutError(
                "a Fragment needs a thread map",
                hint="give forward_fn returning (thread, index), or forward_thread_fn (and forward_index_fn)",
            )
        (self.thread,) = self._canon(_as_exprs(thread))
        self._out_shape = None
        self._thread_count: int | None = None
        if index is None:
            self.forward = self._canon((unused_digits(self.thread, self.vars, self.input_shape),))
            if not self.is_bijective():
                raise LayoutError(
                    f"cannot infer the register index of a fragment over {self._shape_text()} from its thread map "
                    f"`{self.thread}`", hint="give forward_index_fn as well")
        else:
            self.forward = self._canon(_as_exprs(index))

    def _bounds(self) -> dict[Var, tuple[int | None, int | None]]:
        out = super()._bounds()
        if self.rep_var is not None:
            out[self.rep_var] = (0, self.replicate - 1)
        return out

    def _reps(self) -> dict[Var, int] | None:
        return {self.rep_var: self.replicate} if self.rep_var is not None else None

    @property
    def thread_count(self) -> int:
        """Number of threads the fragment spans (one past the largest thread index)."""
        if self._thread_count is None:
            (extent,) = self._extents((self.thread,), self._reps())
            n = as_int(extent)
            if n is None:
                raise LayoutError(f"cannot tell the thread count of a fragment over {self._shape_text()}")
            self._thread_count = n
        return self._thread_count

    def get_thread_size(self) -> int:
        return self.thread_count

    @property
    def locals_per_thread(self) -> int:
        """Register slots each thread holds: the number of positions of the index map."""
        n = 1
        for d in self.output_shape:
            v = as_int(d)
            if v is None:
                raise LayoutError(f"cannot tell the register count of a fragment over {self._shape_text()}")
            n *= v
        return n

    def map_thread(self, indices: Sequence[Any], rep: Any = 0) -> Expr:
        """The thread holding logical element ``indices`` (replica ``rep``)."""
        extra = {self.rep_var: convert(rep)} if self.rep_var is not None else None
        return self._subst((self.thread,), indices, extra)[0]

    def map_forward_thread(self, indices: Sequence[Any], rep: Any = 0) -> Expr:
        return self.map_thread(indices, rep)

    def map_index(self, indices: Sequence[Any]) -> tuple[Expr, ...]:
        return self.map(indices)

    def is_bijective(self) -> bool:
        """Whether every (thread, register) slot holds exactly one (element, replica)."""
        shape = self._enumerable("is_bijective", self.replicate)
        env, size = self._points(shape, self._reps())
        coords = [_eval_all(self.thread, env, size)] + [_eval_all(e, env, size) for e in self.forward]
        return _is_dense(coords, (Const(self.thread_count),) + self.output_shape, size)

    def inverse(self) -> Layout:
        raise LayoutError("a Fragment has no inverse layout here; use map_thread and map_index")

    def _key_exprs(self) -> tuple[Expr, ...]:
        return (self.thread,) + self.forward

    def is_equal(self, other: Any) -> bool:
        return (isinstance(other, Fragment) and other.replicate == self.replicate
                and super().is_equal(other))

    def _same_maps(self, other: Layout) -> bool:
        assert isinstance(other, Fragment)
        mapping: dict[Var, Expr] = dict(zip(other.vars, self.vars))
        if other.rep_var is not None and self.rep_var is not None:
            mapping[other.rep_var] = self.rep_var
        mine, theirs = self._key_exprs(), other._key_exprs()
        return len(mine) == len(theirs) and all(
            a.same_as(substitute(b, mapping)) for a, b in zip(mine, theirs))

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        from .printer import _Printer

        p = _Printer()
        args = [p.expr(v) for v in self.vars] + ([p.expr(self.rep_var)] if self.rep_var is not None else [])
        index = ", ".join(p.expr(e) for e in self.forward)
        rep = f", replicate={self.replicate}" if self.replicate > 1 else ""
        return (f"T.Fragment({self._shape_text()}, forward_fn=lambda {', '.join(args)}: "
                f"({p.expr(self.thread)}, ({index}{',' if len(self.forward) == 1 else ''})){rep})")


# ---- inversion ------------------------------------------------------------------------------

def _digit(e: Expr) -> tuple[Var, int, int | None] | None:
    """``e`` as ``(v // div) % mod`` of one variable (``mod`` None: no modulo)."""
    if isinstance(e, Var):
        return e, 1, None
    if isinstance(e, BinOp) and isinstance(e.b, Const) and int(e.b.value) > 0:
        inner = _digit(e.a)
        if inner is None:
            return None
        v, div, mod = inner
        k = int(e.b.value)
        if e.op == "//":
            if mod is None:
                return v, div * k, None
            if mod % k == 0:  # (v // d % m) // k == v // (d*k) % (m / k)
                return v, div * k, mod // k
        if e.op == "%" and (mod is None or mod % k == 0):
            return v, div, k
    return None


def _invert(layout: Layout) -> Layout:
    shape = layout._enumerable("inverse")
    out_shape = tuple(as_int(d) for d in layout.output_shape)
    if any(d is None for d in out_shape):
        raise LayoutError("inverse needs a layout with a static output shape")

    def fail(why: str) -> LayoutError:
        return LayoutError(f"cannot invert {layout!r}: {why}")

    in_bounds = layout._bounds()
    new_vars = _index_vars(len(out_shape))
    out_bounds = {o: (0, d - 1) for o, d in zip(new_vars, out_shape)}  # type: ignore[operator]
    env, size = layout._points(shape)

    # 1. each physical coordinate is a mixed-radix number: read off its digits
    equations: list[tuple[Expr, Expr]] = []
    for o, e, extent in zip(new_vars, layout.forward, out_shape):
        lin = as_linear(e, in_bounds)
        if lin is None:
            raise fail(f"`{e}` is not a sum of digits")
        terms, const = lin
        if const != 0:
            raise fail(f"`{e}` has a constant offset")
        digits = []
        for k, atom in terms:
            vals = _eval_all(atom, env, size)
            if k <= 0 or int(vals.min()) != 0:
                raise fail(f"`{e}`: term `{atom}` * {k} is not a non-negative digit")
            digits.append((k, atom, int(vals.max()) + 1))
        digits.sort(key=lambda t: t[0])
        stride = 1
        for n, (k, atom, radix) in enumerate(digits):
            if k != stride:
                raise fail(f"`{e}` is not a mixed-radix sum (the term `{atom}` has stride {k}, expected {stride})")
            value = o // k if n == len(digits) - 1 else (o // k) % radix
            equations.append((atom, simplify(value, out_bounds)))
            stride *= radix
        if stride != extent:
            raise fail(f"`{e}` does not cover [0, {extent})")

    # 2. solve the digit equations for the logical indices
    known: dict[int, Expr] = {}
    pieces: dict[int, list[tuple[int, int | None, Expr]]] = {}
    extents = {id(v): s for v, s in zip(layout.vars, shape)}

    def solve(atom: Expr, value: Expr) -> bool:
        d = _digit(atom)
        if d is not None and id(d[0]) in extents:
            pieces.setdefault(id(d[0]), []).append((d[1], d[2], value))
            return True
        if isinstance(atom, BinOp) and atom.op == "^":
            for x, y in ((atom.a, atom.b), (atom.b, atom.a)):
                if all(id(v) in known for v in free_vars(y)):
                    y_val = simplify(substitute(y, {v: known[id(v)] for v in free_vars(y)}), out_bounds)
                    return solve(x, simplify(BinOp("^", value, y_val, value.dtype), out_bounds))
        return False

    pending = equations
    progress = True
    while pending and progress:
        progress = False
        rest = []
        for atom, value in pending:
            if solve(atom, value):
                progress = True
            else:
                rest.append((atom, value))
        pending = rest
        for v in layout.vars:
            if id(v) not in known and id(v) in pieces:
                whole = _assemble(pieces[id(v)], extents[id(v)])
                if whole is not None:
                    known[id(v)] = simplify(whole, out_bounds)
                    progress = True
    missing = [v.name for v in layout.vars if id(v) not in known]
    if pending or missing:
        raise fail(f"could not solve for {', '.join(missing) or 'all digits'}")
    inv = Layout(tuple(Const(d) for d in out_shape), tuple(known[id(v)] for v in layout.vars),  # type: ignore[arg-type]
                 vars=new_vars)

    # 3. check: a bijection, and inverse(forward(x)) == x everywhere
    fwd = [_eval_all(e, env, size) for e in layout.forward]
    if not _is_dense(fwd, layout.output_shape, size):
        raise fail("it is not a bijection onto its output shape")
    back_env = dict(zip(new_vars, fwd))
    for v, e in zip(layout.vars, inv.forward):
        if not np.array_equal(_eval_all(e, back_env, size), env[v]):
            raise fail("internal check of the inverse failed")
    return inv


def _assemble(parts: list[tuple[int, int | None, Expr]], extent: int) -> Expr | None:
    """Rebuild a variable from digit values ``(div, mod, value)`` when they cover it exactly."""
    total: Expr = Const(0)
    expect = 1
    seen = set()
    for div, mod, value in sorted(parts, key=lambda p: (p[0], p[1] or 0)):
        if (div, mod) in seen:
            continue
        seen.add((div, mod))
        if div != expect or expect >= extent:
            return None
        total = total + value * div
        if mod is None:
            expect = extent
        else:
            expect = div * mod
    return total if expect >= extent else None


# ---- constructors ---------------------------------------------------------------------------

def _static_shape_of(buffer_or_shape: Any, what: str) -> tuple[int, ...]:
    shape = _static(_as_shape(buffer_or_shape))
    if shape is None:
        raise LayoutError(f"{what} needs a static shape, got {buffer_or_shape!r}")
    return shape


def make_linear_layout(buffer_or_shape: Any) -> Layout:
    """Row-major flattening: ``(i0, i1, ...) -> i0 * (d1 * d2 ...) + i1 * (d2 ...) + ...``."""
    shape = _as_shape(buffer_or_shape)

    def flat(*idx: Expr) -> Expr:
        out: Expr = Const(0)
        for i, d in zip(idx, shape):
            out = out * d + i
        return out

    return Layout(shape, flat)


def make_swizzled_layout(
    buffer_or_shape: Any,
    dtype_bits: int | None = None,
    swizzle_bytes: int = 128,
    *,
    k_major: bool = True,
    allow_pad: bool = True,
) -> Layout:
    """The XOR swizzle of 16-byte chunks that makes shared-memory tiles bank-conflict free.

    The tile is stored row-major; inside each ``swizzle_bytes`` (128, 64 or 32) segment of a row
    the 16-byte chunk ``c`` of the 128-byte line ``L`` (counted over the flattened tile) moves to
    chunk ``c ^ (L % (swizzle_bytes / 16))``; the elements of a chunk stay together and in
    order. This is the pattern of TMA's and wgmma's SWIZZLE_128B/64B/32B modes. When a row is
    not a multiple of ``swizzle_bytes`` the widest swizzle that divides it is used, and a row
    narrower than 32 bytes is left unswizzled. The result has the tile's own shape: only the
    last coordinate moves. ``k_major`` and ``allow_pad`` are accepted for TileLang
    compatibility; the contiguous dimension is always the last one.
    """
    shape = _static_shape_of(buffer_or_shape, "make_swizzled_layout")
    if dtype_bits is None:
        if not isinstance(buffer_or_shape, (Buffer, Region)):
            raise LayoutError("make_swizzled_layout needs dtype_bits when given a shape")
        dtype_bits = (buffer_or_shape.buffer if isinstance(buffer_or_shape, Region) else buffer_or_shape).dtype.bits
    if swizzle_bytes not in (32, 64, 128):
        raise LayoutError(f"swizzle_bytes must be 32, 64 or 128, got {swizzle_bytes}")
    if dtype_bits not in (4, 8, 16, 32, 64):
        raise LayoutError(f"cannot swizzle elements of {dtype_bits} bits")
    width = shape[-1]
    row_bits = width * dtype_bits
    while swizzle_bytes >= 32 and row_bits % (swizzle_bytes * 8):
        swizzle_bytes //= 2
    if swizzle_bytes < 32:
        return Layout(shape, lambda *idx: idx)
    per_chunk = 128 // dtype_bits  # elements in 16 bytes
    per_line = 8 * per_chunk  # elements in 128 bytes
    chunks = swizzle_bytes // 16  # chunks in one swizzle segment

    def swizzle(*idx: Expr) -> tuple[Expr, ...]:
        row: Expr = Const(0)
        for i, d in zip(idx[:-1], shape[:-1]):
            row = row * d + i
        j = idx[-1]
        line = (row * width + j) // per_line
        chunk = j // per_chunk
        moved = (chunk // chunks) * chunks + ((chunk % chunks) ^ (line % chunks))
        return (*idx[:-1], moved * per_chunk + j % per_chunk)

    return Layout(shape, swizzle)


def make_full_bank_swizzled_layout(buffer_or_shape: Any, dtype_bits: int | None = None) -> Layout:
    """128-byte swizzle (all 32 banks)."""
    return make_swizzled_layout(buffer_or_shape, dtype_bits, 128)


def make_half_bank_swizzled_layout(buffer_or_shape: Any, dtype_bits: int | None = None) -> Layout:
    """64-byte swizzle."""
    return make_swizzled_layout(buffer_or_shape, dtype_bits, 64)


def make_quarter_bank_swizzled_layout(buffer_or_shape: Any, dtype_bits: int | None = None) -> Layout:
    """32-byte swizzle."""
    return make_swizzled_layout(buffer_or_shape, dtype_bits, 32)


def make_fully_replicated_layout_fragment(buffer_or_shape: Any, threads: int) -> Fragment:
    """Every one of ``threads`` threads holds the whole tile (row-major in its registers)."""
    shape = _as_shape(buffer_or_shape)
    linear = make_linear_layout(shape)
    return Fragment(shape, forward_thread_fn=lambda *args: args[-1] if threads > 1 else 0,
                    forward_index_fn=lambda *idx: linear.map(idx), replicate=threads)


class MetadataLayout:
    """What TileLang's ``make_metadata_layout`` / ``make_cutlass_metadata_layout`` return here. In
    TileLang these reorder ``T.gemm_sp``'s metadata to the hardware's order; tilelang-x keeps
    metadata in one row-major format (``tileops.GemmSp``) and each backend reorders it as it loads
    it, so ``T.annotate_layout`` drops this entry (the kernel runs unchanged)."""

    def __init__(self, buffer: Any) -> None:
        self.buffer = buffer

    def __repr__(self) -> str:
        return f"MetadataLayout({getattr(self.buffer, 'name', self.buffer)!r})"


def make_metadata_layout(buffer: Any, mma_dtype: Any = None, backend: str = "cutlass", arch: str | None = None,
                         **kwargs: Any) -> MetadataLayout:
    """TileLang's metadata layout for ``T.gemm_sp``'s ``E``: accepted, and a no-op (``MetadataLayout``)."""
    return MetadataLayout(buffer)


def make_cutlass_metadata_layout(buffer: Any, mma_dtype: Any = None, arch: str | None = None,
                                 **kwargs: Any) -> MetadataLayout:
    """TileLang's CUTLASS metadata layout for ``T.gemm_sp``'s ``E``: accepted, and a no-op."""
    return MetadataLayout(buffer)
