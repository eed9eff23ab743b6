"""Running a compiled interpreter program: the launch frame, argument conversion, the timer.

``Program`` (built by ``compile.py``) holds the kernel as a tree of Python closures over one
flat environment list ``env``: ``env[0]`` is the active-lane mask (``None`` outside masked
``T.Parallel`` code), ``env[1]`` the ``Frame`` and the rest one slot per variable or buffer.
``make_launcher`` wraps it into ``launcher(args, dims)``, which accepts numpy arrays and torch CPU
tensors and writes results back into them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tilelang_x import knobs
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.buffer import Buffer, Region
from tilelang_x.core_ir.errors import ArgumentError, OutOfBoundsError, ShapeMismatchError, TileLangError
from tilelang_x.core_ir.source import SourceLoc
from tilelang_x.core_ir.stmt import PrimFunc

from . import numerics
from .races import RaceTracker

if TYPE_CHECKING:
    from .compile import Compiler


class _Unbound:
    def __repr__(self) -> str:
        return "<unbound>"


#: The value of an environment slot that holds nothing yet.
UNBOUND: Any = _Unbound()

MASK = 0
FRAME = 1


def is_vec(x: Any) -> bool:
    """Whether ``x`` is a per-lane array (as opposed to one scalar value)."""
    return type(x) is np.ndarray and x.ndim > 0


def fmt_region(name: str, starts: Sequence[int], extents: Sequence[int]) -> str:
    return f"`{name}`[" + ", ".join(f"{s}:{s + e}" for s, e in zip(starts, extents)) + "]"


class Frame:
    """The state of one kernel launch; tile-op executors receive it (see ``lower/__init__``)."""

    __slots__ = ("program", "env", "block", "block_id", "first_block", "parallel_depth", "grids", "loc", "turns",
                 "turn", "races", "cluster", "rank", "multicasts")

    def __init__(self, program: Program, nslots: int) -> None:
        self.program = program
        self.env: list[Any] = [UNBOUND] * nslots
        self.env[MASK] = None
        self.env[FRAME] = self
        self.block: tuple[int, ...] = ()
        self.block_id = 0  # the block's linear index (x fastest)
        self.first_block = True
        self.parallel_depth = 0
        self.grids: list[np.ndarray] = []  # the index grids of the T.Parallel loops around this point
        self.loc: SourceLoc | None = None  # of the tile op running now
        self.turns: Any = None  # a kernel with T.sync_grid(): its blocks' grid_sync.Turns
        self.turn = 0  # and this block's place in them
        self.races: RaceTracker | None = None  # this launch's, when the race check is on
        self.cluster: Any = None  # a kernel with cluster barriers: its cluster's cluster_sync.ClusterTurns
        self.rank = 0  # the block's rank in its cluster (T.block_rank_in_cluster())
        self.multicasts: dict[Any, Any] = {}  # this launch's multicast TMA loads (multicast.py)

    def fork(self, block: tuple[int, ...], turns: Any, turn: int, block_id: int | None = None) -> Frame:
        """The frame of one block of a kernel with ``T.sync_grid()``, which runs beside the others
        (``grid_sync``), or of one warpgroup of a block (``team``): its own copy of the slots.
        ``block_id``: the block's linear index (``None``: this frame's)."""
        f = Frame.__new__(Frame)
        f.program = self.program
        f.env = list(self.env)
        f.env[FRAME] = f
        f.block = block
        f.block_id = self.block_id if block_id is None else block_id
        f.races = self.races
        f.first_block = not any(block)
        f.parallel_depth = 0
        f.grids = []
        f.loc = None
        f.turns, f.turn = turns, turn
        f.cluster, f.rank = self.cluster, self.rank
        f.multicasts = self.multicasts
        return f

    # ---- what executors use --------------------------------------------------------------------
    @property
    def mask(self) -> np.ndarray | None:
        """Active lanes inside a masked ``T.Parallel`` body (``None``: all)."""
        return self.env[MASK]

    @property
    def in_parallel(self) -> bool:
        return self.parallel_depth > 0

    @property
    def lane_shape(self) -> tuple[int, ...]:
        """The shape of the lanes of the ``T.Parallel`` nest running now (``()`` outside one)."""
        return np.broadcast_shapes(*(g.shape for g in self.grids))

    def eval(self, expr: Any) -> Any:
        """The value of ``expr`` (an ``Expr`` or a Python number) at this point of execution."""
        if not isinstance(expr, E.Expr):
            return expr
        return self.program.compiler.expr_fn(expr)(self.env)

    def array(self, buffer: Buffer) -> np.ndarray:
        """The numpy array holding ``buffer``."""
        arr = self.env[self.program.compiler.buffer_slot(buffer)]
        if arr is UNBOUND:
            raise TileLangError(f"buffer `{buffer.name}` is used before it is allocated", loc=self.loc)
        return arr

    def bounds(self, region: Region) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """``(starts, extents)`` of ``region`` as Python ints."""
        starts, extents = self.program.compiler.region_fn(region)(self.env)
        if any(is_vec(s) for s in starts) or any(is_vec(e) for e in extents):
            raise TileLangError(
                f"the region of `{region.buffer.name}` depends on a T.Parallel index here",
                loc=self.loc,
                hint="tile ops take whole tiles; index elements inside T.Parallel instead",
            )
        return tuple(int(s) for s in starts), tuple(int(e) for e in extents)

    def read(self, region: Region, loc: SourceLoc | None = None, atomic: bool = False) -> np.ndarray:
        """The values of ``region`` (shape = its extents); out-of-range parts of a global
        buffer read as zero. ``atomic``: the read of an atomic update (for the race check)."""
        arr = self.array(region.buffer)
        starts, extents = self.bounds(region)
        src, dst, inside = _clip(starts, extents, arr.shape)
        races = self.races
        if races is not None and dst is not None and races.tracks(region.buffer):
            account = races.atomic if atomic else races.read
            account(region.buffer, arr, src, self.block_id, loc or self.loc)
        if inside:
            return arr[src]
        self._check_guarded(region, starts, extents, arr.shape, "read of", loc)
        out = np.zeros(extents, dtype=arr.dtype)
        if dst is not None:
            out[dst] = arr[src]
        return out

    def write(self, region: Region, values: Any, src_dtype: Any = None, loc: SourceLoc | None = None,
              atomic: bool = False) -> None:
        """Store ``values`` into ``region`` (converted to the buffer's dtype); out-of-range parts
        of a global buffer are skipped. ``atomic``: the store of an atomic update (the race check
        accounts for it at its read)."""
        buf = region.buffer
        arr = self.array(buf)
        starts, extents = self.bounds(region)
        vals = np.asarray(numerics.convert(values, buf.dtype, src_dtype))
        if vals.shape != extents:
            if vals.size == _prod(extents) and vals.ndim > 0:
                vals = vals.reshape(extents)
            else:
                try:
                    vals = np.broadcast_to(vals, extents)
                except ValueError:
                    raise ShapeMismatchError(
                        f"cannot store values of shape {vals.shape} into {fmt_region(buf.name, starts, extents)}",
                        loc=loc or self.loc,
                    ) from None
        src, dst, inside = _clip(starts, extents, arr.shape)
        races = self.races
        if races is not None and dst is not None and not atomic and races.tracks(buf):
            races.store(buf, arr, src, vals if inside else vals[dst], self.block_id, loc or self.loc)
        if inside:
            arr[src] = vals
            return
        self._check_guarded(region, starts, extents, arr.shape, "write to", loc)
        if dst is not None:
            arr[src] = vals[dst]

    def _check_guarded(
        self, region: Region, starts: tuple[int, ...], extents: tuple[int, ...], shape: tuple[int, ...],
        what: str, loc: SourceLoc | None,
    ) -> None:
        if region.buffer.scope == "global":
            return
        raise OutOfBoundsError(
            f"out-of-bounds {what} {region.buffer.scope} buffer {fmt_region(region.buffer.name, starts, extents)}: "
            f"the buffer's shape is {tuple(shape)}",
            loc=loc or self.loc,
            hint="only global tensors are guarded (out-of-range tails load zero and skip stores)",
        )


def _prod(xs: Sequence[int]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def _clip(
    starts: Sequence[int], extents: Sequence[int], shape: Sequence[int]
) -> tuple[tuple[slice, ...], tuple[slice, ...] | None, bool]:
    """Slices of the part of a region inside ``shape``: (in the buffer, in the region, whether
    the whole region is inside). The second is ``None`` when nothing is inside."""
    if len(starts) != len(shape):
        raise TileLangError(f"a region of rank {len(starts)} on a buffer of rank {len(shape)}")
    src: list[slice] = []
    dst: list[slice] = []
    inside = True
    empty = False
    for s, e, n in zip(starts, extents, shape):
        lo, hi = max(s, 0), min(s + e, n)
        if lo != s or hi != s + e:
            inside = False
        if hi <= lo:
            empty = True
            hi = lo
        src.append(slice(lo, hi))
        dst.append(slice(lo - s, hi - s))
    return tuple(src), (None if empty else tuple(dst)), inside


class Program:
    """A kernel compiled for the interpreter: ``run(args, dims)`` executes it on numpy arrays."""

    def __init__(self, func: PrimFunc, compiler: Compiler, body: Callable[[list[Any]], None],
                 race_check: bool | None = None) -> None:
        self.func = func
        self.compiler = compiler
        self.body = body
        self.written = compiler.written_params()
        self.race_check = race_check  # the pass config tlx.interp_race_check (None: the knob decides)
        self.race_tracked = compiler.race_candidates
        self.bind_views = compiler.param_views()
        self._by_name = {var.name: slot for var, slot in compiler.shape_var_slots()}

    def run(self, args: Sequence[Any], dims: dict[Any, int] | None = None) -> None:
        """Execute with one value per parameter: numpy arrays in storage dtypes for buffers (see
        ``numerics``), numbers for scalars. Arrays are updated in place."""
        func = self.func
        if len(args) != len(func.params):
            raise ArgumentError(
                f"kernel `{func.name}` takes {len(func.params)} arguments, got {len(args)}", loc=func.loc
            )
        comp = self.compiler
        frame = Frame(self, comp.nslots)
        env = frame.env
        by_name = self._by_name
        for key, value in (dims or {}).items():
            slot = comp.var_slot_if_known(key) if isinstance(key, E.Var) else None
            if slot is None:  # a variable of another copy of the function: match by name
                slot = by_name.get(key.name if isinstance(key, E.Var) else str(key))
            dt = key.dtype if isinstance(key, E.Var) else None
            if slot is not None:
                env[slot] = numerics.scalar(int(value), dt or comp.slot_dtype(slot))
        for p, a in zip(func.params, args):
            if isinstance(p, Buffer):
                env[comp.buffer_slot(p)] = a
            else:
                env[comp.var_slot(p)] = numerics.scalar(a.item() if hasattr(a, "item") else a, p.dtype)
        # bind dynamic dimensions from the arrays, then check every shape
        for p, a in zip(func.params, args):
            if isinstance(p, Buffer):
                _bind_shape(p, a, env, comp)
        for p, a in zip(func.params, args):
            if isinstance(p, Buffer):
                _check_shape(p, a, frame)
        for bind in self.bind_views:
            bind(env)
        check = knobs.interp.race_check if self.race_check is None else self.race_check
        if check and self.race_tracked:
            frame.races = RaceTracker(func.name, self.race_tracked)
        with np.errstate(all="ignore"), _single_threaded_blas():
            self.body(env)


def _bind_shape(p: Buffer, a: np.ndarray, env: list[Any], comp: Compiler) -> None:
    if a.ndim != p.ndim:
        raise ArgumentError(f"argument `{p.name}` must have {p.ndim} dimensions, got shape {tuple(a.shape)}")
    for d, n in zip(p.shape, a.shape):
        if isinstance(d, E.Var):
            slot = comp.var_slot(d)
            if env[slot] is UNBOUND:
                env[slot] = numerics.scalar(n, d.dtype)


def _check_shape(p: Buffer, a: np.ndarray, frame: Frame) -> None:
    want = tuple(int(frame.eval(d)) for d in p.shape)
    if want != tuple(a.shape):
        raise ArgumentError(f"argument `{p.name}` must have shape {want}, got {tuple(a.shape)}")


# ---- BLAS threads ------------------------------------------------------------------------------

_blas_local: Any = None  # openblas_set_num_threads_local, False when there is none


@contextlib.contextmanager
def _single_threaded_blas() -> Iterator[None]:
    """Run numpy's BLAS single-threaded in this thread while a kernel runs.

    The interpreter multiplies small tiles, where threads only cost; and when torch's OpenMP
    workers are still spinning after a torch call, a multi-threaded OpenBLAS fighting them for
    the cores runs a tile product 1000x slower. ``openblas_set_num_threads_local`` changes the
    setting for the calling thread only; without it (another BLAS) nothing changes.
    """
    fn = _blas_local if _blas_local is not None else _find_blas_local()
    if not fn:
        yield
        return
    prev = fn(1)
    try:
        yield
    finally:
        fn(prev)


def _find_blas_local() -> Any:
    global _blas_local
    _blas_local = False
    try:
        import ctypes
        import glob
        import os

        root = os.path.dirname(os.path.dirname(np.__file__))
        for path in sorted(glob.glob(os.path.join(root, "numpy.libs", "*openblas*"))):
            lib = ctypes.CDLL(path)
            fn = getattr(lib, "openblas_set_num_threads_local", None)
            if fn is not None:
                fn.argtypes = [ctypes.c_int]
                fn.restype = ctypes.c_int
                _blas_local = fn
                break
    except OSError:
        pass
    return _blas_local


# ---- arguments from numpy arrays and torch tensors ---------------------------------------------

#: torch dtypes numpy cannot hold, and the IR dtype each one is.
_TORCH_NARROW = {"torch.bfloat16": "bfloat16", "torch.float8_e4m3fn": "float8_e4m3", "torch.float8_e5m2": "float8_e5m2"}


def _to_storage(arg: Any, p: Buffer) -> tuple[np.ndarray, Callable[[np.ndarray], None] | None]:
    """The storage array for argument ``arg`` of buffer ``p`` and a function that copies results
    back into ``arg`` (``None`` when the array shares ``arg``'s memory)."""
    want = numerics.storage_dtype(p.dtype)
    if type(arg).__module__.startswith("torch"):
        t = arg
        if t.device.type != "cpu":
            raise ArgumentError(
                f"argument `{p.name}` is on {t.device}; the interpreter runs on CPU tensors",
                hint="pass CPU tensors (tensor.cpu()), or compile for the device's target",
            )
        t = t.detach()
        narrow = _TORCH_NARROW.get(str(t.dtype))
        if narrow is not None or str(t.dtype).startswith("torch.float8"):
            arr = t.float().numpy()
            if narrow != p.dtype.name:
                arr = numerics.convert(arr, p.dtype)

            def back(values: np.ndarray, t: Any = t) -> None:
                import torch

                t.copy_(torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)))

            return arr, back
        arr = t.numpy()
    elif isinstance(arg, np.ndarray):
        arr = arg
    else:
        raise ArgumentError(f"argument `{p.name}` must be a tensor or numpy array, got {type(arg).__name__}")
    if arr.dtype == want and not numerics.is_narrow(p.dtype):
        return arr, None
    conv = numerics.convert(arr, p.dtype)
    if conv is arr:
        conv = arr.copy()

    def back_np(values: np.ndarray, target: np.ndarray = arr) -> None:
        target[...] = values

    return conv, back_np


def make_launcher(program: Program) -> Callable[[Sequence[Any], dict[Any, int] | None], None]:
    """``launcher(args, dims)``: run ``program`` on numpy arrays or torch CPU tensors (one per
    parameter; numbers for scalar parameters) and write results back into them."""
    func = program.func
    params = func.params
    written = program.written

    def launcher(args: Sequence[Any], dims: dict[Any, int] | None = None) -> None:
        if len(args) != len(params):
            raise ArgumentError(
                f"kernel `{func.name}` takes {len(params)} arguments, got {len(args)}", loc=func.loc
            )
        values: list[Any] = []
        backs: list[tuple[Callable[[np.ndarray], None], np.ndarray]] = []
        for i, (p, a) in enumerate(zip(params, args)):
            if isinstance(p, Buffer):
                arr, back = _to_storage(a, p)
                values.append(arr)
                if back is not None and i in written:
                    backs.append((back, arr))
            else:
                values.append(a)
        program.run(values, dims)
        for back, arr in backs:
            back(arr)

    launcher.program = program  # type: ignore[attr-defined]
    return launcher


# ---- profiler --------------------------------------------------------------------------------

def wallclock_timer(fn: Callable[[], Any], n_warmup: int, n_repeat: int) -> list[float]:
    """Time ``fn`` by the wall clock: ``n_warmup`` untimed calls, then ``n_repeat`` timed ones
    (at least one). Returns one time per timed call, in milliseconds."""
    for _ in range(max(0, int(n_warmup))):
        fn()
    times: list[float] = []
    for _ in range(max(1, int(n_repeat))):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times
