"""Kernels that synchronize part of a block with named barriers (``T.sync_threads(id, count)``,
``T.named_barrier_arrive(id, count)``): a producer warp handing tiles to a consumer warp, two
groups of warps each reducing its half of the input, and a double-buffered pipeline between a
producer and a consumer warp."""

import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit
def handoff(steps: int = 8, delay: int = 2000):
    """Warp 0 writes step ``k``'s slice of ``Y`` into shared memory (after ``delay`` rounds of busy
    work, so a consumer that did not wait would read the -1 the slots start with) and arrives at
    barrier 1; warp 1 waits there and copies the slice out, plus one. ``zero`` is 0 at run time (it
    keeps the busy work in the producer's data path)."""

    @T.prim_func
    def main(X: T.Tensor((steps * 32,), T.float32), Y: T.Tensor((steps * 32,), T.float32), zero: T.int32):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            S = T.alloc_shared((steps * 32,), T.float32)
            T.fill(S, -1)
            for k in T.serial(steps):
                if tx < 32:
                    work = T.alloc_var(T.int32, tx)
                    for _ in T.serial(delay):
                        work = (work * 7 + 3) % 1000003
                    S[k * 32 + tx] = X[k * 32 + tx] * 2 + T.cast(work * zero, T.float32)
                    T.named_barrier_arrive(1, 64)
                else:
                    T.sync_threads(1, 64)
                    Y[k * 32 + tx - 32] = S[k * 32 + tx - 32] + 1

    return main


@tilelang.jit
def split_reductions(n: int = 128):
    """Warps 0-3 sum ``X[0:n]`` and warps 4-7 take the maximum of ``X[n:2n]``, each group by halving
    its shared row and meeting at its own barrier (1 and 2) between the steps."""

    @T.prim_func
    def main(X: T.Tensor((2 * n,), T.float32), Out: T.Tensor((2,), T.float32)):
        with T.Kernel(1, threads=2 * n):
            tx = T.get_thread_binding()
            S = T.alloc_shared((2 * n,), T.float32)
            S[tx] = X[tx]
            if tx < n:
                stride = n // 2
                while stride > 0:
                    T.sync_threads(1, n)
                    if tx < stride:
                        S[tx] = S[tx] + S[tx + stride]
                    stride = stride // 2
                if tx == 0:
                    Out[0] = S[0]
            else:
                t = tx - n
                stride = n // 2
                while stride > 0:
                    T.sync_threads(2, n)
                    if t < stride:
                        S[tx] = T.max(S[tx], S[tx + stride])
                    stride = stride // 2
                if t == 0:
                    Out[1] = S[n]

    return main


@tilelang.jit
def pipelined_warps(steps: int = 64, delay: int = 500):
    """A producer warp fills two shared slots in turn and a consumer warp drains them: slot ``s``
    is full at barrier ``1 + s`` and empty again at barrier ``3 + s`` (the producer waits for it
    from its third step on). ``Y[k]`` is ``X[k] * 3`` when every hand-over waited."""

    @T.prim_func
    def main(X: T.Tensor((steps, 32), T.float32), Y: T.Tensor((steps, 32), T.float32), zero: T.int32):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            S = T.alloc_shared((2, 32), T.float32)
            if tx < 32:
                work = T.alloc_var(T.int32, tx)
                for j in T.serial(steps // 2):
                    for s in T.serial(2):  # slot s: full at barrier 1 + s, empty at 3 + s
                        if j > 0:
                            T.sync_threads(3 + s, 64)
                        for _ in T.serial(delay):
                            work = (work * 7 + 3) % 1000003
                        S[s, tx] = X[2 * j + s, tx] * 3 + T.cast(work * zero, T.float32)
                        T.named_barrier_arrive(1 + s, 64)
            else:
                for j in T.serial(steps // 2):
                    for s in T.serial(2):
                        T.sync_threads(1 + s, 64)
                        Y[2 * j + s, tx - 32] = S[s, tx - 32]
                        if j < steps // 2 - 1:
                            T.named_barrier_arrive(3 + s, 64)

    return main
