"""Launch metadata of one generated CUDA kernel: what ``runtime.load(binary, meta)`` needs.

The code generator (``codegen.py``) builds a ``KernelMeta`` next to the CUDA source; the runtime
turns it into a launcher ``launcher(args, dims)``:

- ``args``: one value per parameter of the ``PrimFunc``, in order (tensors and Python scalars),
  exactly what the kernel object passes;
- ``dims``: the dynamic shape variables (then the integer scalar parameters the grid reads), either
  a sequence of ints ordered as ``meta.dims`` or a mapping ``name -> int``.

The kernel's C signature is ``meta.params`` in order. Each ``ParamSpec`` says where its value
comes from:

- ``kind == "buffer"``: the data pointer of ``args[index]`` (a tensor of dtype ``dtype``),
  passed as a device pointer (``void*``-sized, 8 bytes);
- ``kind == "scalar"``: ``args[index]`` converted to ``ctype`` (``int``, ``long long``,
  ``float``, ``double``, ``bool``...);
- ``kind == "dim"``: ``dims[index]`` (or ``dims[name]`` for a mapping), passed as ``ctype``
  (``int`` for int32 shape variables, ``long long`` for int64).
- ``kind == "tmap"`` (sm_90a): a 128-byte ``CUtensorMap`` of tensor ``args[index]`` passed by
  value (``__grid_constant__``), described by the matching entry of ``meta.tensor_maps``.

Launch geometry: ``meta.grid(dims) -> (gx, gy, gz)`` (all >= 1; ``grid_static`` holds it when
no dimension is dynamic), ``grid_source`` is that grid as Python text over the dims (see
``make_grid_fn``), ``meta.cluster`` the ``__cluster_dims__`` the kernel is declared with (sm_90a;
``grid`` raises ``ArgumentError`` when a dynamic grid is not a multiple of it, naming ``meta.loc``,
the kernel's source line), ``meta.block == (bx, by, bz)``, ``meta.smem_bytes`` dynamic shared
memory per block. When ``smem_bytes > 48 * 1024`` the runtime must call
``cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes)`` once after
loading (driver API: ``cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
smem_bytes)``). The kernel uses only dynamic shared memory (no static ``__shared__`` arrays).

``kernel_name`` is the ``extern "C"`` entry symbol in the cubin.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from ...core_ir.errors import ArgumentError, TileLangError
from ...core_ir.source import SourceLoc

#: C parameter type for each IR dtype name of a scalar / dim parameter.
SCALAR_CTYPES: dict[str, str] = {
    "bool": "bool", "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
    "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
    "uint64": "unsigned long long", "float16": "half", "bfloat16": "nv_bfloat16",
    "float32": "float", "float64": "double",
}

#: Shared-memory bytes a block may use without the opt-in attribute.
DEFAULT_SMEM_LIMIT = 48 * 1024

#: The flags at the start of a stream-K workspace, one word per block (``TLX_SK_FLAG_WORDS`` in
#: tlx_hopper.h): the most blocks a stream-K launch may have.
SK_FLAG_WORDS = 1024
SK_FLAG_BYTES = 4 * SK_FLAG_WORDS


@dataclass(frozen=True)
class ParamSpec:
    """One kernel parameter, in C-signature order.

    ``kind``: ``"buffer"`` | ``"scalar"`` | ``"dim"``; ``index``: position in ``args`` (buffer,
    scalar) or in ``dims`` (dim); ``dtype``: IR dtype name (element dtype for a buffer);
    ``ctype``: the C type in the signature (``"half*"``..., ``"int"``...); ``name``: the C name;
    ``align``: bytes a buffer's address must be a multiple of (its vector accesses need it).
    """

    name: str
    kind: str
    index: int
    dtype: str
    ctype: str
    readonly: bool = False
    align: int = 1

    @property
    def is_pointer(self) -> bool:
        return self.kind == "buffer"

    @property
    def align_mask(self) -> int:
        """The low address bits that must be zero (a buffer's ``align``; 0 for other kinds)."""
        return self.align - 1 if self.kind == "buffer" else 0


@dataclass(frozen=True)
class KernelMeta:
    """Everything needed to launch one compiled kernel (see the module docstring)."""

    kernel_name: str
    params: tuple[ParamSpec, ...]
    block: tuple[int, int, int]
    smem_bytes: int = 0
    dims: tuple[str, ...] = ()
    grid_static: tuple[int, int, int] | None = None
    grid_source: str = ""
    arch: str = "sm_80"
    #: Hopper TMA: per ``kind == "tmap"`` parameter (in order), (tensor arg index, dtype name, box
    #: dims innermost first, CUtensorMapSwizzle); the runtime encodes the map at launch.
    tensor_maps: tuple[tuple[int, str, tuple[int, ...], int], ...] = ()
    #: thread-block cluster shape (``__cluster_dims__``), None without clusters
    cluster: tuple[int, int, int] | None = None
    #: the kernel's ``T.Kernel`` line, for launch errors
    loc: SourceLoc | None = None
    #: a persistent kernel (hopper/persistent.py): the tiles its blocks walk with a stride of
    #: ``gridDim.x``; ``runtime.load`` sets the grid to one block per SM of the device (at most
    #: this many), in place of ``grid_static``'s 132
    persistent_tiles: int | None = None
    #: a stream-K kernel (hopper/stream_k.py): bytes of workspace slot per block of the launch;
    #: the runtime appends the workspace (``SK_FLAG_BYTES`` of flags, then the slots) as the last
    #: argument (zeroed once; every launch leaves its flags zeroed)
    workspace_per_block: int = 0
    #: the kernel calls ``T.sync_grid()`` (grid_sync.py): launched cooperatively, after a check that
    #: the grid fits on the device at once, with a grid-barrier counter appended as the last argument
    cooperative: bool = False
    #: the kernel calls ``T.pdl_sync()`` (sm_90+) and not ``T.sync_grid()``: launched with
    #: programmatic stream serialization
    pdl: bool = False
    #: the shared tiles (name, bytes), largest first: what a launch error about shared memory lists
    smem_tiles: tuple[tuple[str, int], ...] = ()

    @property
    def num_threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def needs_smem_optin(self) -> bool:
        return self.smem_bytes > DEFAULT_SMEM_LIMIT

    def grid(self, dims: Sequence[int] | Mapping[str, int] = ()) -> tuple[int, int, int]:
        """The grid for these dynamic dims (a sequence ordered as ``self.dims`` or a mapping)."""
        if self.grid_static is not None:
            return self.grid_static
        if isinstance(dims, Mapping):
            dims = [int(dims[n]) for n in self.dims]
        g = make_grid_fn(self.grid_source, self.dims)(*dims)
        grid = (max(1, int(g[0])), max(1, int(g[1])), max(1, int(g[2])))
        if self.cluster is not None and any(n % c for n, c in zip(grid, self.cluster)):
            self._cluster_error(grid, dims)
        return grid

    def checked_grid(self, *dims: int) -> tuple[int, int, int]:
        """``grid`` with the dims as arguments (the launchers' grid function of a clustered kernel)."""
        return self.grid(dims)

    def _cluster_error(self, grid: tuple[int, int, int], dims: Sequence[int]) -> NoReturn:
        assert self.cluster is not None
        ax = next(i for i in range(3) if grid[i] % self.cluster[i])
        sizes = ", ".join(f"{n}={v}" for n, v in zip(self.dims, dims))
        expr = self.grid_source.replace("{", "").replace("}", "")
        raise ArgumentError(
            f"kernel '{self.kernel_name}' runs in clusters of {self.cluster} blocks, but for {sizes} its grid is "
            f"{grid}: dimension {'xyz'[ax]} is not a multiple of {self.cluster[ax]}", loc=self.loc,
            hint=f"the grid is {expr}: pass sizes that make it a multiple of the cluster shape, or choose "
            "cluster_dims (or block sizes) that divide it")


_GRID_FNS: dict[tuple[str, tuple[str, ...]], Callable[..., tuple[int, int, int]]] = {}


def make_grid_fn(source: str, dims: Sequence[str]) -> Callable[..., tuple[int, int, int]]:
    """Compile the grid's Python expression text into a function of the dims (cached).

    ``source`` is a Python tuple expression in which a dim is written ``{name}``, e.g.
    ``"(({M} + 127) // 128, 1, 1)"``. A runtime may call this once at load time and keep the
    function for its fast path.
    """
    key = (source, tuple(dims))
    cached = _GRID_FNS.get(key)
    if cached is not None:
        return cached
    names = ", ".join(f"_d{i}" for i in range(len(dims)))
    body = source
    for i, n in enumerate(dims):
        body = body.replace("{" + n + "}", f"_d{i}")
    env: dict[str, Any] = {}
    exec(f"def _grid({names}):\n    return {body}\n", env)  # noqa: S102 - text built by codegen
    _GRID_FNS[key] = env["_grid"]
    return env["_grid"]


def check_smem_fits(meta: KernelMeta, limit: int | None) -> None:
    """A kernel whose shared tiles alone exceed the architecture's per-block shared memory
    (``limit``) cannot launch on any GPU of it: say so at compile time, naming the largest tiles."""
    if limit is None or meta.smem_bytes <= limit:
        return
    tiles = ", ".join(f"`{tile}` {size / 1024:.1f} KB" for tile, size in meta.smem_tiles[:4])
    raise TileLangError(
        f"kernel `{meta.kernel_name}` needs {meta.smem_bytes / 1024:.1f} KB of shared memory, but {meta.arch} allows "
        f"{limit / 1024:.1f} KB a block" + (f"; its largest shared tiles: {tiles}" if tiles else ""),
        loc=meta.loc,
        hint="reduce block sizes or num_stages (a pipelined tile takes num_stages times its size), or keep a "
             "tile in T.alloc_fragment")
