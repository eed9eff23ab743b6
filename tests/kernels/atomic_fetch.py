"""Kernels that use the previous value an atomic returns (``return_prev=True``): a work queue of
tickets, stream compaction, per-thread slots and a running maximum."""

import tilelang_x as tilelang
import tilelang_x.language as T


@tilelang.jit
def ticket_queue(tiles: int, blocks: int, tile: int = 64):
    """Persistent blocks take tiles from a queue: each ticket ``t`` (the counter's value before the
    block's increment) is a tile the block doubles, records itself as the ``Owner`` of and counts in
    ``Claims``; every tile is claimed exactly once when every ticket is distinct."""

    @T.prim_func
    def main(X: T.Tensor((tiles * tile,), T.float32), Counter: T.Tensor((1,), T.int32),
             Y: T.Tensor((tiles * tile,), T.float32), Owner: T.Tensor((tiles,), T.int32),
             Claims: T.Tensor((tiles,), T.int32)):
        with T.Kernel(blocks, threads=128) as bx:
            t = T.alloc_var(T.int32)
            t = T.atomic_add(Counter[0], 1, return_prev=True)
            while t < tiles:
                for i in T.Parallel(tile):
                    Y[t * tile + i] = X[t * tile + i] * 2
                Owner[t] = bx
                T.atomic_add(Claims[t], 1)
                t = T.atomic_add(Counter[0], 1, return_prev=True)

    return main


@tilelang.jit
def compact_positive(n: int, block: int = 128):
    """Every positive element of ``X`` is appended to ``Y`` at a slot its own atomic claims (inside
    ``T.Parallel``: one update per element), so ``Y[:Count]`` holds the positive elements in some
    order."""

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Count: T.Tensor((1,), T.int32), Y: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n and X[bx * block + i] > 0:
                    slot = T.atomic_add(Count[0], 1, return_prev=True)
                    Y[slot] = X[bx * block + i]

    return main


@tilelang.jit
def even_thread_slots(blocks: int, threads: int = 128):
    """The even threads of each block take slots from a shared counter (a per-thread update under a
    branch on the thread index) and publish the block's total through a global one: ``Slots[b]``
    holds 0 .. threads / 2 - 1 at the even threads (in some order), -1 at the odd ones."""

    @T.prim_func
    def main(Slots: T.Tensor((blocks, threads), T.int32), Total: T.Tensor((1,), T.int32)):
        with T.Kernel(blocks, threads=threads) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((1,), T.int32)
            S[0] = 0
            if tx % 2 == 0:
                slot = T.atomic_add(S[0], 1, return_prev=True)
                Slots[bx, tx] = slot
            else:
                Slots[bx, tx] = -1
            before = T.atomic_add(Total[0], S[0], return_prev=True)
            if before < 0:  # never: the total only grows from 0
                Total[0] = -1

    return main


@tilelang.jit
def running_max(n: int, kind: str = "max", dtype: str = "float32"):
    """Every thread combines its ``X`` element into one shared element with ``T.atomic_max`` (or
    ``min``) and keeps the value it replaced: ``Prev[i]`` is the maximum of the start value and of
    the elements combined before thread ``i``'s; ``Final`` the maximum of all."""
    fetch = T.atomic_max if kind == "max" else T.atomic_min
    start = -1000 if kind == "max" else 1000

    @T.prim_func
    def main(X: T.Tensor((n,), dtype), Prev: T.Tensor((n,), dtype), Final: T.Tensor((1,), dtype)):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            S = T.alloc_shared((1,), dtype)
            S[0] = start
            Prev[tx] = fetch(S[0], X[tx], return_prev=True)
            Final[0] = S[0]

    return main


@tilelang.jit
def block_sums_with_prev(blocks: int, n: int = 64, dtype: str = "float32"):
    """Each block adds the sum of its row of ``X`` into ``Acc[0]`` once (a block-level update) and
    records the value before it in ``Before[b]``; sorted, ``Before`` are the partial sums of the
    blocks in the order they came."""

    @T.prim_func
    def main(X: T.Tensor((blocks, n), dtype), Acc: T.Tensor((1,), dtype), Before: T.Tensor((blocks,), dtype)):
        with T.Kernel(blocks, threads=64) as bx:
            row = T.alloc_fragment((n,), T.float32)
            total = T.alloc_fragment((1,), T.float32)
            T.copy(X[bx, 0:n], row)
            T.reduce_sum(row, total, dim=0)
            Before[bx] = T.atomic_add(Acc[0], total[0], return_prev=True)

    return main
