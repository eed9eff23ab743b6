"""Kernels that synchronize the blocks of a thread-block cluster (``T.cluster_arrive`` /
``_relaxed``, ``T.cluster_wait``, ``T.cluster_sync``, ``T.block_rank_in_cluster``) and kernels whose
block barriers vote (``T.syncthreads_count`` / ``_and`` / ``_or``)."""

import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit
def ranks(gx: int = 4, gy: int = 4, cluster=None):
    """``R[by, bx]`` = the rank of block ``(bx, by)`` in its cluster of ``cluster``."""

    @T.prim_func
    def main(R: T.Tensor((gy, gx), T.int32)):
        with T.Kernel(gx, gy, threads=64, cluster_dims=cluster) as (bx, by):
            R[by, bx] = T.block_rank_in_cluster()

    return main


@tilelang.jit
def neighbours(n: int = 16, cx: int = 2, delay: int = 2000):
    """Each block stores its row of ``X`` doubled into ``Y`` (after ``delay`` rounds of busy work in
    odd blocks, so a reader that did not wait would read the -1 ``Y`` starts with), meets its cluster
    at ``T.cluster_sync()``, then copies the row of the next block of its cluster (rank + 1, cyclic)
    into ``Z``. ``zero`` is 0 at run time."""

    @T.prim_func
    def main(X: T.Tensor((n, 64), T.float32), Y: T.Tensor((n, 64), T.float32), Z: T.Tensor((n, 64), T.float32),
             zero: T.int32):
        with T.Kernel(n, threads=64, cluster_dims=(cx, 1, 1)) as bx:
            tx = T.get_thread_binding()
            work = T.alloc_var(T.int32, tx)
            if bx % 2 == 1:
                for _ in T.serial(delay):
                    work = (work * 7 + 3) % 1000003
            Y[bx, tx] = X[bx, tx] * 2 + T.cast(work * zero, T.float32)
            T.cluster_sync()
            rank = T.cast(T.block_rank_in_cluster(), T.int32)
            peer = bx - rank + (rank + 1) % cx
            Z[bx, tx] = Y[peer, tx]

    return main


@tilelang.jit
def split_phases(n: int = 8, cx: int = 2, cy: int = 2):
    """A 2-D grid in clusters of ``(cx, cy)``: each block writes its value, arrives, does unrelated
    work, waits, and sums the values of its cluster (in rank order); a second, relaxed round checks
    the barrier's reuse."""

    @T.prim_func
    def main(V: T.Tensor((n, n), T.int32), S: T.Tensor((n, n), T.int32), Other: T.Tensor((n, n), T.int32)):
        with T.Kernel(n, n, threads=32, cluster_dims=(cx, cy, 1)) as (bx, by):
            V[by, bx] = by * n + bx
            T.cluster_arrive()
            Other[by, bx] = bx - by
            T.cluster_wait()
            total = T.alloc_var(T.int32, 0)
            for j in T.serial(cy):
                for i in T.serial(cx):
                    total += V[by - by % cy + j, bx - bx % cx + i]
            T.cluster_arrive_relaxed()
            T.cluster_wait()
            S[by, bx] = total

    return main


@tilelang.jit
def block_barrier(n: int = 4, cluster=None):
    """Without clusters of several blocks ``T.cluster_sync()`` is a barrier of the block: thread
    ``t`` writes shared slot ``t``, then reads slot ``t + 1`` (cyclic)."""

    @T.prim_func
    def main(Y: T.Tensor((n, 128), T.int32), R: T.Tensor((n,), T.int32)):
        with T.Kernel(n, threads=128, cluster_dims=cluster) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((128,), T.int32)
            S[tx] = tx * 3 + bx
            T.cluster_sync()
            Y[bx, tx] = S[(tx + 1) % 128]
            if tx == 0:
                R[bx] = T.block_rank_in_cluster()

    return main


@tilelang.jit
def votes(threads: int = 128, blocks: int = 3):
    """Per block: how many threads hold a nonzero ``X[block, thread]``, whether all do, whether any
    does."""

    @T.prim_func
    def main(X: T.Tensor((blocks, threads), T.int32), C: T.Tensor((blocks, 3), T.int32)):
        with T.Kernel(blocks, threads=threads) as bx:
            tx = T.get_thread_binding()
            count = T.syncthreads_count(X[bx, tx])
            every = T.syncthreads_and(X[bx, tx] != 0)
            some = T.syncthreads_or(X[bx, tx])
            if tx == 0:
                C[bx, 0] = count
                C[bx, 1] = every
                C[bx, 2] = some

    return main


@tilelang.jit
def votes_2d(tx_n: int = 32, ty_n: int = 3):
    """The votes in a block of ``(tx_n, ty_n)`` threads on ``X[ty, tx] > 0``."""

    @T.prim_func
    def main(X: T.Tensor((ty_n, tx_n), T.float32), C: T.Tensor((3,), T.int32)):
        with T.Kernel(1, threads=(tx_n, ty_n)):
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            count = T.syncthreads_count(X[ty, tx] > 0)
            every = T.syncthreads_and(X[ty, tx] > 0)
            some = T.syncthreads_or(X[ty, tx] > 0)
            if tx == 0 and ty == 0:
                C[0] = count
                C[1] = every
                C[2] = some

    return main


@tilelang.jit
def vote_loop(threads: int = 128):
    """Every thread counts up to its ``Limit`` while some thread of the block still counts
    (``while T.syncthreads_or(...)``): all end at the block's maximum, the rounds it took."""

    @T.prim_func
    def main(Limit: T.Tensor((threads,), T.int32), Out: T.Tensor((threads,), T.int32),
             Rounds: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=threads):
            tx = T.get_thread_binding()
            k = T.alloc_var(T.int32, 0)
            rounds = T.alloc_var(T.int32, 0)
            while T.syncthreads_or(k < Limit[tx]):
                if k < Limit[tx]:
                    k += 1
                rounds += 1
            Out[tx] = k
            if tx == 0:
                Rounds[0] = rounds

    return main
