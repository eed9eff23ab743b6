"""TMA stores in the staged epilogue (``lower/tma_store.py``, pass config ``tlx.tma_store``), checked
without a GPU. Each warp's lanes run the lowered copy in lockstep over a simulated shared memory,
and lane 0's ``cp.async.bulk.tensor`` stores read their slot with TMA's own swizzle (backends.md
A5, at the slot's byte address in the kernel's shared memory) and write the box clipped to the
tensor: every global element must receive the register the element-wise copy stores there, exactly
once. The simulation also checks the ordering: a store reads only stmatrix data fenced
(``fence.proxy.async``) and published (``__syncwarp``), a slot is rewritten only after lane 0's
``wait_group.read`` released it and a ``__syncwarp``, and no store still reads shared memory when
the epilogue ends. The SASS shows UTMASTG."""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any

import pytest

from tests.kernels import gemm, gemm_tma_store
from tests.null.cuda_helpers import cuda_source, sass_text
from tests.null.test_cuda_epilogue import _ev, _flat, _kernel
from tests.null.test_cuda_staged_epilogue import CASES, ELEMENT, _element_writes, _epilogue_block, _lower, _Warp
from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.buffer import Buffer
from tilelang_x.core_ir.stmt import Alloc, If, Seq
from tilelang_x.core_ir.visit import rewrite, walk
from tilelang_x.plugins.cuda.lir import Block, Evaluate, Intrin, SmemAddr

OFF = {"tlx.tma_store": False}
TMA_CASES = {
    **CASES,
    "batched_3d": lambda: gemm_tma_store.batched_matmul.get_ir(2, 72, 40, 64, block_N=32),
    # 4 stages of 128×64 + 64×256 tiles leave room for one 16 KB slot per warp, not two
    "one_slot": lambda: gemm.matmul.get_ir(256, 512, 256, block_M=128, block_N=256, block_K=64, num_stages=4,
                                          threads=256),
}


def _tma_swizzle(o: int, span: int) -> int:
    """TMA's swizzle of byte offset ``o`` (A5): the 16-byte chunk bits XOR the row bits above."""
    return o ^ (((o >> 7) & (span // 16 - 1)) << 4)


def _kernel_text(source: str) -> str:
    return source[source.index('extern "C" __global__'):]  # without the inlined headers


def _calls(s: Any) -> list[Intrin]:
    return [n for n in walk(s) if isinstance(n, Intrin)]


class _TmaWarp(_Warp):
    """A warp running a TMA-store epilogue: lane 0's stores, bulk groups and waits on top of the
    stmatrix writes of ``_Warp``."""

    def __init__(self, *args: Any, maps: dict[int, Any], params: tuple[Any, ...], ws_byte: int) -> None:
        super().__init__(*args)
        self.maps, self.params, self.ws_byte = maps, params, ws_byte
        self.unfenced: set[int] = set()
        self.open: set[int] = set()
        self.groups: list[set[int]] = []
        self.freed: dict[int, int] = {}  # element -> epoch in which lane 0's wait released it

    def run(self, s: Any) -> None:
        fn = s.value.fn if isinstance(s, Evaluate) and isinstance(s.value, Intrin) else None
        if isinstance(s, (Block, Seq)) or fn in ("__syncwarp", "tlx_stsm_x4"):
            super().run(s)
        elif fn == "tlx_fence_proxy_async":
            self.unfenced.clear()
        elif isinstance(s, If):
            lanes = [env for env in self.envs if _ev(s.cond, env)]
            assert s.otherwise is None and len(lanes) == 1 and lanes[0]["tx"] % 32 == 0, "not lane 0 alone"
            for call in _calls(s.then):
                self.lane0(call, lanes[0])
        else:
            raise AssertionError(f"unexpected {s!r} in a TMA-store epilogue")

    def write(self, elem: int, value: tuple[int, int]) -> None:
        self.touch(elem)
        assert all(elem not in g for g in [self.open, *self.groups]), f"slot element {elem} rewritten while read"
        assert self.freed.get(elem, -1) < self.epoch, f"slot element {elem} rewritten before a __syncwarp"
        self.shared[elem] = (value, self.epoch)
        self.unfenced.add(elem)

    def lane0(self, call: Intrin, env: dict[str, int]) -> None:
        if call.fn == "tlx_tma_store_commit":
            self.groups.append(self.open)
            self.open = set()
        elif call.fn.startswith("tlx_tma_store_wait_read"):
            keep = int(call.fn[-1])
            done, self.groups = self.groups[:len(self.groups) - keep], self.groups[len(self.groups) - keep:]
            for elem in set().union(*done):
                self.freed[elem] = self.epoch
        else:
            assert re.fullmatch(r"tlx_tma_store_\dd", call.fn), call.fn
            self.store(call, env)

    def store(self, call: Intrin, env: dict[str, int]) -> None:
        spec = self.maps[id(call.args[0])]
        slot = call.args[1]
        assert isinstance(slot, SmemAddr)
        base = _ev(slot.indices[0], env)
        inner, rows = spec.box[0], next(b for b in spec.box[1:] if b != 1)
        span = {3: 128, 2: 64, 1: 32}[spec.swizzle]
        assert inner * 2 == span, "a box row spans the swizzle"
        assert (self.ws_byte + 2 * base) % (8 * span) == 0, "slot not aligned to the swizzle atom"
        coords = [_ev(c, env) for c in reversed(call.args[2:])]  # outermost first
        shape = [E.as_int(d) for d in self.params[spec.arg].shape]
        row_dim = len(shape) - 1 - next(i for i, b in enumerate(spec.box) if i and b != 1)
        for r, c in itertools.product(range(rows), range(inner)):
            elem = base + _tma_swizzle(r * span + 2 * c, span) // 2
            self.touch(elem)
            got = self.shared.get(elem)
            assert got is not None and got[1] < self.epoch and elem not in self.unfenced, \
                f"slot element {elem} read before its fence and __syncwarp"
            self.open.add(elem)
            idx = list(coords)
            idx[row_dim] += r
            idx[-1] += c
            if all(0 <= i < d for i, d in zip(idx, shape)):  # the copy engine clips the rest
                slot_reg, tx = got[0]
                self.out.append((_flat(self.params[spec.arg], idx), slot_reg, tx))

    def finish(self) -> None:
        assert not self.open and not self.groups, "the epilogue ends while a TMA store reads shared memory"


def _tma_block(lowered: Any) -> Any:
    blocks = [n for n in walk(lowered.body) if isinstance(n, Block) and n.label == "parallel"
              and any(c.fn.startswith("tlx_tma_store_") for c in _calls(n))]
    assert len(blocks) == 1, "no TMA-store epilogue"
    return blocks[0]


def _ws(block: Any) -> Any:
    return next(n.buffer for n in walk(block) if isinstance(n, SmemAddr))


def _tma_writes(func: Any, configs: dict[str, bool]) -> tuple[set[tuple[int, int, int]], list[int], int, Any]:
    source, ctx = cuda_source(func, "sm_90a", configs)
    lowered = ctx.data["lowered"]
    block = _tma_block(lowered)
    ws = _ws(block)
    ws_byte = int(re.search(rf"{ws.name} = \(\w+\*\)\(tlx_smem \+ (\d+)\)", source).group(1))  # type: ignore[union-attr]
    maps = {id(s.var): s for s in ctx.data["cuda.tmaps"]}
    grid = [E.as_int(g) for g in _kernel(lowered).grid]
    threads, size = ctx.data["cuda.threads"], E.as_int(ws.shape[0])
    out: set[tuple[int, int, int]] = set()
    for pos in itertools.product(*(range(g) for g in grid)):
        env = dict(zip(("bx", "by", "bz"), pos))
        owner: dict[int, int] = {}
        for w in range(threads // 32):
            warp = _TmaWarp([{**env, "tx": 32 * w + lane} for lane in range(32)], {}, owner, w, size,
                            maps=maps, params=tuple(lowered.params), ws_byte=ws_byte)
            warp.run(block)
            warp.finish()
            for key in warp.out:
                assert key not in out, f"element {key[0]} written twice"
                out.add(key)
    return out, grid, threads, block


@pytest.mark.parametrize("name", sorted(TMA_CASES))
def test_tma_stores_write_what_the_element_copy_writes(name: str) -> None:
    got, grid, threads, block = _tma_writes(TMA_CASES[name](), {})
    waits = {c.fn for c in _calls(block) if c.fn.startswith("tlx_tma_store_wait_read")}
    if name == "one_slot":
        assert waits == {"tlx_tma_store_wait_read0"}, waits
    ref, grid_ref, threads_ref = _lower(TMA_CASES[name](), ELEMENT)
    assert (grid, threads) == (grid_ref, threads_ref)
    assert got == _element_writes(_epilogue_block(ref), grid, threads)


def test_two_slots_ping_pong() -> None:
    """128×256 tile, 8 warps, 4 chunks each: slots alternate, the reuse waits leave one store in flight."""
    _, _, _, block = _tma_writes(CASES["128x256_ws"](), {})
    assert [c.fn for c in _calls(block) if c.fn.startswith("tlx_tma_store_wait")] == \
        ["tlx_tma_store_wait_read1"] * 2 + ["tlx_tma_store_wait_read0"]


def test_map_parameter_and_written_output() -> None:
    func = gemm.matmul.get_ir(200, 136, 96, block_M=64, block_N=64, block_K=32, in_dtype=dtypes.bfloat16,
                              out_dtype=dtypes.bfloat16)
    source, ctx = cuda_source(func, "sm_90a")
    assert "const __grid_constant__ tlx_tmap C_tmap0" in source and "tlx_bf16* __restrict__ C," in source
    assert ctx.data["cuda.meta"].tensor_maps[-1] == (2, "bfloat16", (64, 16), 3)  # C, 64 × 16 box, 128B swizzle
    assert "tlx_tma_store_2d(C_tmap0, " in source and "tlx_copy16" not in _kernel_text(source)
    assert source == cuda_source(func, "sm_90a")[0]  # deterministic: the source is the cubin cache key


def test_workspace_is_aligned_to_the_swizzle_atom() -> None:
    """Codegen places the staging workspace on a 1024-byte boundary even behind another buffer."""
    from tilelang_x.plugins.cuda.codegen import generate

    _, ctx = cuda_source(CASES["tails_relu"](), "sm_90a")
    lowered = ctx.data["lowered"]
    kernel = _kernel(lowered)
    pad = Buffer("pad", (3,), dtypes.float16, "shared")
    body = rewrite(lowered.body, lambda n: dataclasses.replace(n, body=Seq((Alloc(pad), n.body)))
                   if n is kernel else None)
    source = generate(dataclasses.replace(lowered, body=body), ctx)
    offsets = dict(re.findall(r"(\w+) = \(\w+\*\)\(tlx_smem \+ (\d+)\)", source))
    assert offsets["pad"] == "0" and int(offsets[_ws(_tma_block(lowered)).name]) == 1024, offsets


@pytest.mark.parametrize("func, configs", [
    (lambda: CASES["tails_relu"](), OFF),
    (lambda: CASES["tails_relu"](), {"tl.disable_tma_lower": True}),
    (lambda: gemm.matmul.get_ir(128, 128, 64, block_M=64, block_N=64, out_dtype=dtypes.float32), {}),
    (lambda: gemm_tma_store.matmul_accumulate.get_ir(200, 136, 96), {}),  # the kernel also reads C
])
def test_ineligible_keeps_the_per_lane_stores(func: Any, configs: dict[str, bool]) -> None:
    source, ctx = cuda_source(func(), "sm_90a", configs)
    assert "tlx_tma_store" not in _kernel_text(source) and all(m[0] != 2 for m in ctx.data["cuda.meta"].tensor_maps)


def _has_utmastg(func: Any, configs: dict[str, bool]) -> bool:
    return re.search(r"\bUTMASTG\b", sass_text(func, "sm_90a", configs)) is not None


def test_sass_tma_store() -> None:
    func = gemm.matmul.get_ir(512, 512, 512, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)
    assert _has_utmastg(func, {})
    assert not _has_utmastg(func, OFF)
    assert not _has_utmastg(gemm.matmul.get_ir(128, 128, 64, block_M=64, block_N=64, out_dtype=dtypes.float32), {})
    assert not _has_utmastg(gemm_tma_store.matmul_accumulate.get_ir(200, 136, 96), {})


@pytest.mark.parametrize("defer", [True, False])
def test_persistent_stores_stay_in_flight_until_the_next_tile(defer: bool) -> None:
    """``tlx.defer_store_drain``: a tile's epilogue starts by waiting for the previous tile's stores
    and does not wait for its own; the block waits once, after its tile loop. Off: each epilogue
    waits for its own stores at its end."""
    func = gemm.matmul.get_ir(2000, 2104, 192, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)
    source, _ = cuda_source(func, "sm_90a", {"tlx.persistent": True, "tlx.defer_store_drain": defer})
    text = _kernel_text(source)
    loop = text[text.index("for (int tlx_tile_j", text.index("TLX_SETMAXNREG_INC")):]
    epilogue = loop[loop.index("tlx_stsm_x4") - 200:]
    first_store, last_store = epilogue.index("tlx_tma_store_2d"), epilogue.rindex("tlx_tma_store_commit")
    waits = [m.start() for m in re.finditer(r"tlx_tma_store_wait_read0\(\)", epilogue)]
    if defer:
        assert len(waits) == 2 and waits[0] < first_store and waits[1] > last_store
        assert epilogue[last_store:waits[1]].count("}") == 3  # closes lane 0's branch, the epilogue, the tile loop
    else:
        assert len(waits) == 1 and waits[0] > last_store
    lanes, _ = cuda_source(func, "sm_90a", {"tlx.persistent": True, "tlx.tma_store": False})
    assert "tlx_tma_store" not in _kernel_text(lanes)
