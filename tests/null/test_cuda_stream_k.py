"""Stream-K in persistent GEMMs (``hopper/persistent.py`` ``StreamK``, ``hopper/stream_k.py``, pass
config ``tlx.stream_k``), checked without a GPU: the walk covers every k-iteration of every tile
exactly once, each tile's sum ends in the block that starts it, and the kernel gets its fixup, its
workspace parameter and launch metadata only when asked and when the accumulator's sum can be split."""

from __future__ import annotations

import pytest

import tilelang_x.language as T
from tests.kernels import gemm
from tests.null.cuda_helpers import cuda_source, sass_ops
from tilelang_x.core_ir import dtypes
from tilelang_x.core_ir import expr as E
from tilelang_x.core_ir.evaluate import evaluate
from tilelang_x.plugins.cuda.hopper.persistent import AUTO_MIN_SAVED, MAX_PARTS, _stream_k

ON = {"tlx.stream_k": True}


def _block_env(sk: object, env: dict) -> dict:
    """``env`` with the walk's per-block values (``StreamK.prelude``), each within its bounds."""
    for d in sk.prelude:  # type: ignore[attr-defined]
        env[d.var] = evaluate(d.value, env)
        assert d.bounds is not None and d.bounds[0] <= env[d.var] <= d.bounds[1], d.var.name
    return env


def _walk(total: int, n: int, blocks: int) -> dict[tuple[int, int], tuple[int, bool, bool, int]]:
    """(tile, k) -> (block, partial, owner, last peer) over the whole grid, each block's one tile
    loop (whole tiles, then the tail's segments), the stage counter running on from one to the next."""
    pid, j, stride = (E.Var(nm, dtypes.int32) for nm in ("pid", "j", "P"))
    sk = _stream_k(pid, j, stride, total, n)
    cover: dict[tuple[int, int], tuple[int, bool, bool, int]] = {}
    for b in range(blocks):
        env = _block_env(sk, {pid: b, stride: blocks})
        dp, whole, segments = (evaluate(x, env) for x in (sk.dp, sk.whole_tiles, sk.segments))
        assert segments == 0 or whole == dp  # the tail's segments follow the whole tiles in one loop
        counter = 0
        for jj in range(whole + segments):
            at = {**env, j: jj}
            for d in sk.decls:
                at[d.var] = evaluate(d.value, at)
                assert d.bounds is not None and d.bounds[0] <= at[d.var] <= d.bounds[1], d.var.name
            t, k0, length = at[sk.tile], at[sk.k0], at[sk.length]
            assert at[sk.off] == counter
            counter += length
            role = (b, bool(evaluate(sk.partial, at)), bool(evaluate(sk.owner, at)), evaluate(sk.last_peer, at))
            for k in range(k0, k0 + length):
                assert (t, k) not in cover, (t, k)
                cover[(t, k)] = role
    return cover


@pytest.mark.parametrize("total,n,blocks", [(512, 64, 132), (512, 64, 128), (1664, 128, 132), (300, 3, 132),
                                            (133, 2, 132), (200, 64, 7), (10, 5, 3), (264, 64, 132),
                                            (7168, 64, 132), (9, 7, 5), (192, 64, 132), (140, 64, 132),
                                            (198, 64, 132)])
def test_walk_covers_each_iteration_once_and_owners_add_their_peers(total: int, n: int, blocks: int) -> None:
    cover = _walk(total, n, blocks)
    assert set(cover) == {(t, k) for t in range(total) for k in range(n)}
    split, rest = 0, total % blocks
    for t in range(total):
        owner, partial, owns, last = cover[(t, 0)]
        covering = sorted({cover[(t, k)][0] for k in range(n)})
        assert not partial and owns == (len(covering) > 1)
        if owns:  # the owner adds exactly the later blocks that hold the rest of the tile
            split += 1
            assert covering == list(range(owner, last + 1))
            assert all(cover[(t, k)][1] == (cover[(t, k)][0] != owner) for k in range(n))
            if 2 * rest > blocks:  # every block walks more than n / 2 iterations of the tail
                assert len(covering) <= 3
            else:  # the tile in equal parts, each on a block of its own, all starting together
                assert len(covering) == min(MAX_PARTS, n, blocks // rest)
                assert {cover[(t, k)][0] for k in range(n) if k < n // len(covering)} == {owner}
    assert (split > 0) == (rest > 0)


def _gemm(m: int = 4096, n: int = 4096, k: int = 4096, **kw: object) -> object:
    return gemm.matmul.get_ir(m, n, k, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256, **kw)


def test_fixup_and_workspace_when_asked() -> None:
    src, ctx = cuda_source(_gemm(), "sm_90a", ON)
    meta = ctx.data["cuda.meta"]
    assert meta.params[-1].name == "tlx_sk_ws" and meta.params[-1].index == 3
    assert meta.workspace_per_block == 128 * 256 * 4  # 128 registers of 256 consumer threads
    assert "float* __restrict__ tlx_sk_ws" in src and "for (int ko_i = 0; ko_i < tlx_sk_len; ++ko_i)" in src
    # one tile loop (the producer's and the consumers'), one epilogue, k-loops over the segment only
    assert src.count("for (int tlx_tile_j = 0;") == 2 and src.count("tlx_tma_store_2d(C_tmap0") == 4
    assert "ko_p < tlx_sk_len; ++ko_p)" in src and "ko_i < 64;" not in src and "ko_p < 64;" not in src
    body = src[src.index("tlx_sk_store(&C_local[0]"):]
    assert "tlx_sk_store(&C_local[0], 128, tlx_sk_ws, tlx_pid, 256);" in src
    assert body.index("tlx_sk_add(&C_local[0], 128, tlx_sk_ws, tlx_pid + 1,") < body.index("if (!(tlx_sk_k0 > 0)) {") \
        < body.index("tlx_tma_store_2d(C_tmap0")
    # the stage ring's index is proven non-negative (no floor modulo in the k-loops)
    assert "tlx_floormod(((tlx_sk_off" not in src and "(unsigned)((tlx_sk_off + ko_i)) % (unsigned)(3)" in src


def test_workspace_flags_sit_where_the_runtime_leaves_room_for_them() -> None:
    from tilelang_x.plugins.cuda.hopper.header import hopper_header
    from tilelang_x.plugins.cuda.meta import SK_FLAG_BYTES, SK_FLAG_WORDS

    assert f"#define TLX_SK_FLAG_WORDS {SK_FLAG_WORDS}\n" in hopper_header() and SK_FLAG_BYTES == 4 * SK_FLAG_WORDS


def test_stream_k_kernel_compiles_without_local_memory() -> None:
    ops = sass_ops(_gemm(), r"\b(HGMMA|UTMALDG|LDL|STL)\b", "sm_90a", ON)
    assert ops.get("HGMMA") and ops.get("UTMALDG") and not ops.get("LDL") and not ops.get("STL")


def test_default_has_no_stream_k() -> None:
    src, ctx = cuda_source(_gemm(), "sm_90a")
    assert "tlx_sk_ws" not in src.split("TLX_DEV")[-1] and ctx.data["cuda.meta"].workspace_per_block == 0


def test_not_for_clusters_or_non_persistent_kernels() -> None:
    src, _ = cuda_source(_gemm(cluster=(2, 1, 1)), "sm_90a", {**ON, "tlx.persistent": True})
    assert "tlx_sk_ws" not in src.split("TLX_DEV")[-1]
    src, _ = cuda_source(_gemm(), "sm_90a", {**ON, "tlx.persistent": False})
    assert "tlx_sk_ws" not in src.split("TLX_DEV")[-1]


@T.prim_func
def _accumulates_onto_c(A: T.Tensor((4096, 512), T.float16), B: T.Tensor((512, 4096), T.float16),
                        C: T.Tensor((4096, 4096), T.float32)):
    with T.Kernel(16, 32, threads=256) as (bx, by):
        A_s = T.alloc_shared((128, 64), T.float16)
        B_s = T.alloc_shared((64, 256), T.float16)
        C_f = T.alloc_fragment((128, 256), T.float32)
        T.copy(C[by * 128, bx * 256], C_f)  # C += A @ B: the sum does not start from zero
        for ko in T.Pipelined(8, num_stages=3):
            T.copy(A[by * 128, ko * 64], A_s)
            T.copy(B[ko * 64, bx * 256], B_s)
            T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C[by * 128, bx * 256])


def test_not_when_the_sum_does_not_start_from_zero(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("DEBUG", logger="tilelang_x.cuda.hopper"):
        src, ctx = cuda_source(_accumulates_onto_c, "sm_90a", ON)
    assert "tlx_tile_j" in src and "tlx_sk_ws" not in src.split("TLX_DEV")[-1]
    assert "tlx.stream_k ignored (the loop is not one T.gemm into a cleared float32 fragment)" in caplog.text


def test_an_ignored_request_says_why(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("DEBUG", logger="tilelang_x.cuda.hopper"):
        cuda_source(_gemm(cluster=(2, 1, 1)), "sm_90a", ON)
        cuda_source(_gemm(), "sm_90a", {**ON, "tlx.persistent": False})
    assert "tlx.stream_k ignored (a cluster launch)" in caplog.text
    assert "tlx.stream_k ignored (the kernel is not persistent)" in caplog.text



@pytest.mark.parametrize("m,n,k,split", [(1536, 4096, 4096, True),  # 192 tiles: 60 left after a wave, in halves
                                         (2304, 2816, 4096, True),  # 198 tiles: 66 left, half the SMs, in halves
                                         (1152, 4096, 2048, True),  # 144 tiles: 12 left, 32 iterations in quarters
                                         (1536, 4096, 2048, False),  # 32 iterations in halves: 16 saved
                                         (4096, 4096, 4096, False),  # 512 tiles: 116 left, over half the SMs
                                         (1536, 4096, 1024, False),  # 16 iterations: the fixup would cost more
                                         (1024, 4096, 4096, False)])  # 128 tiles: one wave
def test_automatic_only_for_a_tail_of_at_most_half_the_sms(m: int, n: int, k: int, split: bool) -> None:
    src, ctx = cuda_source(_gemm(m=m, n=n, k=k), "sm_90a")
    assert ("tlx_sk_ws" in src.split("TLX_DEV")[-1]) == split
    assert (ctx.data["cuda.meta"].workspace_per_block > 0) == split
    if split:  # on another device, a tail over half the SMs or too few spared iterations runs as whole tiles
        assert "const int tlx_sk_whole_only = (((tlx_sk_rest * 2) > tlx_blocks) || (" in src
        assert f") < {AUTO_MIN_SAVED})) ? 1 : 0;" in src
        src, ctx = cuda_source(_gemm(m=m, n=n, k=k), "sm_90a", {"tlx.stream_k": False})
        assert "tlx_sk_ws" not in src.split("TLX_DEV")[-1] and ctx.data["cuda.meta"].workspace_per_block == 0


@pytest.mark.parametrize("total,n,blocks", [(192, 64, 132), (192, 64, 100), (192, 64, 114), (140, 64, 132),
                                            (144, 32, 132), (144, 32, 100), (192, 32, 132), (198, 64, 132)])
def test_automatic_walk_leaves_a_tail_over_half_the_sms_whole(total: int, n: int, blocks: int) -> None:
    """On the launch's block count (which may not be the 132 SMs the compiler decided for), a tail
    of more than half the SMs, or whose parts would spare fewer than ``AUTO_MIN_SAVED`` iterations,
    runs as whole tiles."""
    pid, j, stride = (E.Var(nm, dtypes.int32) for nm in ("pid", "j", "P"))
    sk = _stream_k(pid, j, stride, total, n, even=False)
    rest = total % blocks
    parts = min(MAX_PARTS, n, blocks // max(rest, 1))
    whole_only = 2 * rest > blocks or n - -(-n // parts) < AUTO_MIN_SAVED
    tiles = []
    for b in range(blocks):
        env = _block_env(sk, {pid: b, stride: blocks})
        whole, segments = evaluate(sk.whole_tiles, env), evaluate(sk.segments, env)
        tiles += [b + jj * blocks for jj in range(whole)]
        assert segments == (0 if whole_only or b >= rest * parts else 1)
    split = sorted(set(range(total)) - set(tiles))
    assert len(tiles) == len(set(tiles)) and (split == [] if whole_only else len(split) == rest)

_HOST_MAIN = r"""
#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>
using std::max;
using std::min;
static int tlx_floordiv(int a, int b) { int q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
static int check(int tlx_blocks) {
  std::map<std::pair<int, int>, int> cover;
  std::vector<int> partial(tlx_blocks, -1), waits_on_nothing(1, 0);
  for (int tlx_pid = 0; tlx_pid < tlx_blocks; ++tlx_pid) {
    int counter = 0, steps = 0;
    LOOPS
  }
  return (int)cover.size() == TILES * ITERS ? 0 : 1;
}
int main() {
  for (int blocks : {132, 128, 114, 100, 78})
    if (check(blocks)) { printf("bad walk on %d blocks\n", blocks); return 1; }
  printf("ok\n");
  return 0;
}
"""

_HOST_STEP = r"""
      if (++steps > 100000 || tlx_sk_off != counter || tlx_sk_len < 1 || tlx_sk_k0 < 0 ||
          tlx_sk_k0 + tlx_sk_len > ITERS || tlx_sk_tile < 0 || tlx_sk_tile >= TILES) return 1;
      counter += tlx_sk_len;
      for (int k = tlx_sk_k0; k < tlx_sk_k0 + tlx_sk_len; ++k)
        if (!cover.emplace(std::make_pair(tlx_sk_tile, k), tlx_pid).second) return 1;
      if (tlx_sk_k0 > 0) {
        if (partial[tlx_pid] >= 0) return 1;
        partial[tlx_pid] = tlx_sk_tile;
      } else if (tlx_sk_len < ITERS) {
        for (int q = tlx_pid + 1; q <= LAST_PEER; ++q)
          if (q >= tlx_blocks || q <= tlx_pid) return 1;
      }
"""


@pytest.mark.parametrize("m,n,k,bm,bn,stages,configs", [(4096, 4096, 1024, 128, 256, 3, ON),
                                                        (3700, 1960, 328, 128, 256, 3, ON),
                                                        (4096, 4096, 512, 128, 128, 4, ON),
                                                        (1536, 4096, 4096, 128, 256, 3, {})])  # automatic
def test_generated_walk_runs_on_the_host(m: int, n: int, k: int, bm: int, bn: int, stages: int, configs: dict,
                                         tmp_path: object) -> None:
    """The tile loops and their declarations as codegen writes them, compiled with the host's C++
    compiler and run for several grids: every (tile, k) once, counters contiguous, peers in range
    (a bound that lost its parentheses once made the tile loop endless on the GPU)."""
    import re
    import shutil
    import subprocess

    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    func = gemm.matmul.get_ir(m, n, k, block_M=bm, block_N=bn, block_K=64, num_stages=stages, threads=256)
    src, ctx = cuda_source(func, "sm_90a", configs)
    consumers = src[src.index("TLX_SETMAXNREG_INC(", src.index('extern "C"')):]
    pattern = re.compile(r"((?:\s*const int tlx_sk_\w+ = .*?;\n)+)"
                         r"\s*for \(int tlx_tile_j = (.*?); tlx_tile_j < (.*?); \+\+tlx_tile_j\) \{\n"
                         r"((?:\s*const int tlx_sk_\w+ = .*?;\n){4})")
    loops = pattern.findall(consumers)
    assert len(loops) == 1
    last_peer = re.search(r"tlx_sk_add\(&C_local\[0\], \d+, tlx_sk_ws, tlx_pid \+ 1, (.*), 256\);", consumers)
    assert last_peer is not None
    code = "".join(f"{p}for (int tlx_tile_j = {a}; tlx_tile_j < {b}; ++tlx_tile_j) {{\n{d}{_HOST_STEP}}}\n"
                   for p, a, b, d in loops)
    tiles, iters = ctx.data["cuda.meta"].persistent_tiles, -(-k // 64)
    program = _HOST_MAIN.replace("LOOPS", code).replace("LAST_PEER", last_peer.group(1))
    program = program.replace("TILES", str(tiles)).replace("ITERS", str(iters))
    cpp, exe = tmp_path / "walk.cpp", tmp_path / "walk"  # type: ignore[operator]
    cpp.write_text(program)
    subprocess.run([cxx, "-O1", "-o", str(exe), str(cpp)], check=True, capture_output=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout
