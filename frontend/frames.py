"""``with T.Kernel(...)`` and the IR loops (``T.Parallel``, ``T.Pipelined``, ``T.serial``, ...).

Both work without any source rewriting: ``T.Kernel`` is a context manager that opens a frame
on the active builder, and an IR loop is an iterable whose iterator opens a frame, yields the
loop variables once (so the Python loop body runs exactly once, recording the body), then closes
the frame into ``For`` nodes. The source rewrite only tells them the names the user gave the
variables (``as (bx, by)``, ``for i, j in ...``) so the IR reads like the source.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from ..core_ir import dtypes
from ..core_ir import expr as E
from ..core_ir.errors import TileLangSyntaxError, TileLangTypeError
from ..core_ir.source import SourceLoc, caller_loc
from ..core_ir.stmt import For, Kernel, freeze_annotations
from ..core_ir.tile_order import PERSISTENT_WALK, PersistentWalk, panel_order
from . import builder as B
from .fold import fold_extent
from .registers import place_register_hints
from .warpgroup_branches import branches_to_regions

_BLOCK_NAMES = ("bx", "by", "bz")


def _index_expr(value: Any, what: str) -> E.Expr:
    if isinstance(value, bool) or not (isinstance(value, E.Expr) or hasattr(value, "as_expr") or E.is_py_scalar(value)):
        raise TileLangTypeError(
            f"{what} must be an integer or an integer expression, got {type(value).__name__} {value!r}",
            loc=caller_loc(),
        )
    e = E.convert(value)
    if not e.dtype.is_int:
        raise TileLangTypeError(f"{what} must be an integer, got {e} of dtype {e.dtype}", loc=caller_loc())
    return e


def _names(names: Any, count: int, defaults: tuple[str, ...], what: str, loc: SourceLoc | None) -> list[str]:
    if names is None:
        return [defaults[k] if k < len(defaults) else f"{defaults[0]}{k}" for k in range(count)]
    if isinstance(names, str):
        return [names] if count == 1 else [f"{names}_{k}" for k in range(count)]
    if len(names) != count:
        raise TileLangSyntaxError(
            f"{what} gives {count} index variable{'s' if count != 1 else ''} but {len(names)} names are unpacked",
            loc=loc,
            hint=f"unpack exactly {count} name{'s' if count != 1 else ''}",
        )
    return list(names)


def _cluster_dims(value: Any, loc: Any) -> tuple[int, ...]:
    """``cluster_dims=`` as a tuple of 1 to 3 positive Python ints."""
    dims = list(value) if isinstance(value, (list, tuple)) else [value]
    if not 1 <= len(dims) <= 3 or not all(hasattr(d, "__index__") and not isinstance(d, bool) and d.__index__() > 0
                                          for d in dims):
        raise TileLangSyntaxError(
            f"T.Kernel cluster_dims={value!r}: expected a positive int or a list of 1 to 3 positive ints", loc=loc,
            hint="the cluster shape must be known when the kernel is built, e.g. cluster_dims=(2, 1, 1)")
    return tuple(d.__index__() for d in dims)


#: The most threads a block may have on every GPU.
MAX_BLOCK_THREADS = 1024


def _check_block_size(threads: tuple[int, ...], loc: SourceLoc | None) -> None:
    total = math.prod(threads)
    if total > MAX_BLOCK_THREADS:
        raise TileLangSyntaxError(
            f"T.Kernel threads={threads if len(threads) > 1 else threads[0]} is {total} threads a block; "
            f"GPUs run at most {MAX_BLOCK_THREADS}", loc=loc,
            hint="use fewer threads (e.g. 128 or 256) and give each more work, or more blocks in the grid")


class KernelFrame:
    """``with T.Kernel(gx, gy, gz, threads=128) as (bx, by, bz)``."""

    _tlx_names: Any = None

    def __init__(self, *grid: Any, threads: Any = None, prelude: str | None = None, cluster_dims: Any = None,
                 is_cpu: bool = False) -> None:
        self.loc = caller_loc()
        self.builder = B.require("T.Kernel")
        if not 1 <= len(grid) <= 3:
            raise TileLangSyntaxError(
                f"T.Kernel takes 1 to 3 grid dimensions, got {len(grid)}", loc=self.loc,
                hint="write T.Kernel(gx), T.Kernel(gx, gy) or T.Kernel(gx, gy, gz)",
            )
        self.grid = tuple(_index_expr(g, f"T.Kernel grid dimension {k}") for k, g in enumerate(grid))
        for k, g in enumerate(self.grid):
            v = E.as_int(g)
            if v is not None and v <= 0:
                raise TileLangSyntaxError(f"T.Kernel grid dimension {k} is {v}; it must be positive", loc=self.loc)
        if threads is None:
            threads = 128
        t = list(threads) if isinstance(threads, (list, tuple)) else [threads]
        ints = [E.as_int(x) for x in t]
        if not 1 <= len(t) <= 3 or any(x is None or x <= 0 for x in ints):
            raise TileLangSyntaxError(
                f"T.Kernel threads={threads!r}: expected a positive int or a list of 1 to 3 positive ints",
                loc=self.loc,
                hint="the thread count must be known when the kernel is built, e.g. threads=128",
            )
        self.threads = tuple(int(x) for x in ints)  # type: ignore[arg-type]
        if not is_cpu:
            _check_block_size(self.threads, self.loc)
        ann: dict[str, Any] = {}
        if prelude is not None:
            if not isinstance(prelude, str):
                raise TileLangSyntaxError(
                    f"T.Kernel prelude={prelude!r}: expected a string of CUDA code", loc=self.loc,
                    hint='e.g. prelude="__device__ float twice(float x) { return 2 * x; }"')
            ann["prelude"] = prelude
        if cluster_dims is not None:
            ann["cluster_dims"] = _cluster_dims(cluster_dims, self.loc)
        if is_cpu:
            ann["is_cpu"] = True
        self.annotations = freeze_annotations(ann)
        self.frame: B.Frame | None = None
        self.depth = 0

    def __enter__(self) -> Any:
        b = self.builder
        if b.kernel_open:
            raise TileLangSyntaxError(
                "T.Kernel blocks cannot be nested", loc=self.loc,
                hint="use one `with T.Kernel(...)` per kernel; loop inside it with T.Parallel / T.serial",
            )
        names = self._tlx_names
        n = len(self.grid)
        if isinstance(names, str):
            label = [names] if n == 1 else [f"{names}_{k}" for k in range(n)]
        else:
            label = _names(names, n, _BLOCK_NAMES, f"T.Kernel with {n} grid dimension{'s' if n > 1 else ''}",
                           self.loc)
        self.vars = tuple(E.Var(name, dtypes.int32, self.loc) for name in label)
        self.depth = b.depth
        self.frame = b.push("kernel", self.loc)
        b.kernel_open += 1
        b.kernel_frame = self
        if isinstance(names, tuple) or (names is None and n > 1) or (isinstance(names, str) and n > 1):
            return self.vars
        return self.vars[0]

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        b = self.builder
        b.kernel_open -= 1
        b.kernel_frame = None
        if exc_type is not None:
            b.unwind(self.depth)
            return False
        assert self.frame is not None
        body = place_register_hints(branches_to_regions(b.pop(self.frame), self.threads), self.threads)
        b.emit(Kernel(self.grid, self.vars, self.threads, body, self.annotations, loc=self.loc))
        b.kernels += 1
        return False


class ClusterKernelFrame(KernelFrame):
    """``with T.ClusterKernel(gx, gy, cluster_dims=2, threads=128) as (bx, by)``: TileLang's
    spelling of ``T.Kernel(..., cluster_dims=...)``, the cluster shape required."""

    def __init__(self, *grid: Any, cluster_dims: Any, threads: Any = None, prelude: str | None = None) -> None:
        super().__init__(*grid, threads=threads, prelude=prelude, cluster_dims=cluster_dims)


class IRLoop:
    """An IR loop nest; iterate it once in a ``for`` statement inside ``T.Kernel``."""

    __slots__ = ("kind", "label", "dims", "annotations", "loc", "names", "steps")

    def __init__(self, kind: str, label: str, dims: list[tuple[E.Expr | None, E.Expr]],
                 annotations: dict[str, Any] | None = None, steps: list[int] | None = None) -> None:
        self.kind = kind
        self.label = label
        self.dims = dims
        self.annotations = freeze_annotations(annotations)
        self.loc = caller_loc()
        self.names: Any = None
        self.steps = steps

    def __iter__(self) -> Iterator[Any]:
        b = B.require_kernel(self.label)
        count = len(self.dims)
        defaults = ("i", "j", "k", "l") if count > 1 else ("i",)
        names = _names(self.names, count, defaults, f"{self.label} with {count} extent{'s' if count > 1 else ''}",
                       self.loc)
        loop_vars = []
        for name, (_, extent) in zip(names, self.dims):
            dt = extent.dtype if extent.dtype.is_int and extent.dtype.bits > 32 else dtypes.int32
            loop_vars.append(E.Var(name, dt, self.loc))
        values: list[Any] = list(loop_vars)
        if self.steps is not None:
            values = [v if s == 1 else (st if st is not None else 0) + v * s
                      for v, s, (st, _) in zip(loop_vars, self.steps, self.dims)]
        frame = b.push("loop", self.loc, self.kind)
        yield values[0] if count == 1 and not isinstance(self.names, tuple) else tuple(values)
        body = b.pop(frame)
        for k in range(count - 1, -1, -1):
            start, extent = self.dims[k]
            if self.steps is not None and self.steps[k] != 1:
                start = None
            body = For(loop_vars[k], extent, self.kind, body, start,
                       self.annotations if k == 0 else (), loc=self.loc)
        b.emit(body)


class PersistentLoop(IRLoop):
    """``for bx, by in T.Persistent(domain, wave_size, index, group_size)``: one serial loop over
    the tiles of ``domain`` that block ``index`` of ``wave_size`` takes (tile ``index``, ``index +
    wave_size``, ...), yielding each tile's coordinates, so that the ``wave_size`` blocks take every
    tile once. A 2-D domain is walked in panels of ``group_size`` along its second dimension (the
    first one fastest inside a panel, for L2 reuse); other ranks with the first dimension fastest."""

    __slots__ = ("domain", "wave_size", "index", "group_size")

    def __init__(self, domain: list[E.Expr], wave_size: E.Expr, index: E.Expr, group_size: int) -> None:
        super().__init__("serial", "T.Persistent", [(None, wave_size)])
        self.domain, self.wave_size, self.index, self.group_size = domain, wave_size, index, group_size

    def coords(self, tile: E.Expr) -> list[E.Expr]:
        if len(self.domain) == 2 and self.group_size > 1:
            return list(panel_order(tile, *self.domain, self.group_size, column=False))
        out, rest = [], tile
        for k, d in enumerate(self.domain):
            out.append(rest if k == len(self.domain) - 1 else rest % d)
            rest = rest // d
        return out

    def __iter__(self) -> Iterator[Any]:
        b = B.require_kernel(self.label)
        count = len(self.domain)
        names = _names(self.names, count, ("i", "j", "k", "l") if count > 1 else ("i",),
                       f"{self.label} over {count} dimension{'s' if count > 1 else ''}", self.loc)
        total = self.domain[0]
        for d in self.domain[1:]:
            total = total * d
        wave = E.Var("_".join(names) + "_wave", dtypes.int32, self.loc)
        trips = fold_extent((total - self.index + self.wave_size - 1) // self.wave_size)
        coords = self.coords(self.index + wave * self.wave_size)
        frame = b.push("loop", self.loc, self.kind)
        yield coords[0] if count == 1 and not isinstance(self.names, tuple) else tuple(coords)
        body = b.pop(frame)
        walk = PersistentWalk(tuple(self.domain), self.wave_size, self.index, tuple(coords), tuple(names))
        b.emit(For(wave, trips, "serial", body, None, ((PERSISTENT_WALK, walk),), loc=self.loc))


def persistent_loop(domain: Any, wave_size: Any, index: Any, group_size: Any) -> PersistentLoop:
    dims = list(domain) if isinstance(domain, (list, tuple)) else [domain]
    if not dims:
        raise TileLangSyntaxError("T.Persistent needs a non-empty domain", loc=caller_loc())
    size = E.as_int(group_size) if not isinstance(group_size, bool) else None
    if size is None or size < 1:
        raise TileLangSyntaxError(f"T.Persistent group_size={group_size!r} must be a positive Python int",
                                  loc=caller_loc())
    return PersistentLoop([_index_expr(d, "T.Persistent domain entry") for d in dims],
                          _index_expr(wave_size, "T.Persistent wave_size"), _index_expr(index, "T.Persistent index"),
                          size)


def _range_dims(args: tuple[Any, ...], label: str) -> tuple[list[tuple[E.Expr | None, E.Expr]], list[int]]:
    if not 1 <= len(args) <= 3:
        raise TileLangSyntaxError(f"{label} takes 1 to 3 arguments (start, stop, step), got {len(args)}",
                                  loc=caller_loc())
    if len(args) == 1:
        return [(None, _index_expr(args[0], f"{label} extent"))], [1]
    start = _index_expr(args[0], f"{label} start")
    stop = _index_expr(args[1], f"{label} stop")
    step = 1
    if len(args) == 3:
        s = E.as_int(args[2])
        if s is None or s == 0:
            raise TileLangSyntaxError(f"{label} step must be a nonzero Python int, got {args[2]!r}", loc=caller_loc())
        step = s
    if step == 1:
        extent = fold_extent(stop - start)
    elif step > 0:
        extent = fold_extent((stop - start + (step - 1)) // step)
    else:
        extent = fold_extent((start - stop + (-step - 1)) // (-step))
    if E.as_int(start) == 0 and step == 1:
        return [(None, extent)], [1]
    return [(start, extent)], [step]


def serial_loop(kind: str, label: str, args: tuple[Any, ...], annotations: dict[str, Any] | None = None) -> IRLoop:
    dims, steps = _range_dims(args, label)
    return IRLoop(kind, label, dims, annotations, steps if steps != [1] else None)


def nest(kind: str, label: str, extents: tuple[Any, ...], annotations: dict[str, Any] | None = None) -> IRLoop:
    if not extents:
        raise TileLangSyntaxError(f"{label} needs at least one extent", loc=caller_loc())
    dims = [(None, _index_expr(x, f"{label} extent")) for x in extents]
    return IRLoop(kind, label, dims, annotations)
