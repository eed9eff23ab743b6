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
from tilelang_x.plugins.cuda.hopper.persistent import _stream_k

ON = {"tlx.stream_k": True}


def _walk(total: int, n: int, blocks: int) -> dict[tuple[int, int], tuple[int, bool, bool, int]]:
    """(tile, k) -> (block, partial, owner, last peer) over the whole grid."""
    pid, j, stride = (E.Var(nm, dtypes.int32) for nm in ("pid", "j", "P"))
    sk, tile, tiles = _stream_k(pid, j, stride, total, n)
    cover: dict[tuple[int, int], tuple[int, bool, bool, int]] = {}
    for b in range(blocks):
        env = {pid: b, stride: blocks}
        for jj in range(evaluate(tiles, env)):
            at = {**env, j: jj}
            for d in sk.decls:
                at[d.var] = evaluate(d.value, at)
                assert d.bounds is not None and d.bounds[0] <= at[d.var] <= d.bounds[1], d.var.name
            t, k0, length = evaluate(tile, at), evaluate(sk.k0, at), evaluate(sk.length, at)
            role = (b, bool(evaluate(sk.partial, at)), bool(evaluate(sk.owner, at)), evaluate(sk.last_peer, at))
            for k in range(k0, k0 + length):
                assert (t, k) not in cover, (t, k)
                cover[(t, k)] = role
    return cover


@pytest.mark.parametrize("total,n,blocks", [(512, 64, 132), (512, 64, 128), (1664, 128, 132), (300, 3, 132),
                                            (133, 2, 132), (200, 64, 7), (10, 5, 3), (264, 64, 132),
                                            (7168, 64, 132), (9, 7, 5)])
def test_walk_covers_each_iteration_once_and_owners_add_their_peers(total: int, n: int, blocks: int) -> None:
    cover = _walk(total, n, blocks)
    assert set(cover) == {(t, k) for t in range(total) for k in range(n)}
    split = 0
    for t in range(total):
        owner, partial, owns, last = cover[(t, 0)]
        covering = sorted({cover[(t, k)][0] for k in range(n)})
        assert not partial and owns == (len(covering) > 1)
        if owns:  # the owner adds exactly the later blocks that hold the rest of the tile
            split += 1
            assert covering == list(range(owner, last + 1))
            assert all(cover[(t, k)][1] == (cover[(t, k)][0] != owner) for k in range(n))
            assert len(covering) <= 3  # every block walks at least n / 2 iterations of the tail
    rest = total % blocks
    assert (split > 0) == (2 * rest >= blocks)  # tail tiles are split only when at least half a wave


def _gemm(m: int = 4096, n: int = 4096, k: int = 4096, **kw: object) -> object:
    return gemm.matmul.get_ir(m, n, k, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256, **kw)


def test_fixup_and_workspace_when_asked() -> None:
    src, ctx = cuda_source(_gemm(), "sm_90a", ON)
    meta = ctx.data["cuda.meta"]
    assert meta.params[-1].name == "tlx_sk_ws" and meta.params[-1].index == 3
    assert meta.workspace_per_block == 128 * 256 * 4 + 4  # 128 registers of 256 consumer threads, a flag
    assert "float* __restrict__ tlx_sk_ws" in src and "for (int ko_i = 0; ko_i < tlx_sk_len; ++ko_i)" in src
    body = src[src.index("tlx_sk_store(&C_local[0]"):]
    assert "tlx_sk_store(&C_local[0], 128, tlx_sk_ws, tlx_pid, 256);" in src
    assert body.index("tlx_sk_add(&C_local[0], 128, tlx_sk_ws, tlx_pid + 1,") < body.index("if (!(tlx_sk_k0 > 0)) {") \
        < body.index("tlx_tma_store_2d(C_tmap0")
    # the stage ring's index is proven non-negative (no floor modulo in the k-loops)
    assert "tlx_floormod(((tlx_sk_off" not in src and "(unsigned)((tlx_sk_off + ko_i)) % (unsigned)(3)" in src


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


def test_not_when_the_sum_does_not_start_from_zero() -> None:
    src, ctx = cuda_source(_accumulates_onto_c, "sm_90a", ON)
    assert "tlx_tile_j" in src and "tlx_sk_ws" not in src.split("TLX_DEV")[-1]
