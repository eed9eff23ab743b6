"""Stream-K in a persistent gemm-only kernel (``pass_configs={"tlx.stream_k": bool}``): which
kernels can split a tile's k-loop between blocks, and the consumers' fixup after a segment.

The walk is persistent.py's ``StreamK``. A segment's sum is only part of the tile's when the
accumulator starts from zero (``T.clear`` before the loop) and the loop's one ``T.gemm`` is all
that adds to it; then after the segment's last wgmma:

- a segment that starts inside its tile stores the accumulator's registers into the block's slot
  of the workspace (``tlx_sk_store``: float4 ``v`` of consumer thread ``t`` at ``v * threads + t``,
  so the owner, which has the same fragment layout, reads its own registers back), fences, meets
  the other consumers at their named barrier and flags the slot (a release store);
- the segment that starts the tile waits for each later block's flag (an acquire load by one
  thread, then the barrier), adds that slot into its registers and clears the flag, so every
  launch leaves the workspace as it found it (``tlx_sk_add``);
- the kernel's statements after the loop (the epilogue) run only in blocks whose segment starts
  the tile.

The workspace is the kernel's last C parameter (``tlx_sk_ws``, not a ``T.Tensor``): the runtime
appends one per device and stream, shared by the stream's stream-K kernels (``runtime._workspace``):
a flag word per block at its start (``meta.SK_FLAG_WORDS``, the same place for every kernel), then
the launch's slots.
"""

from __future__ import annotations

from ....core_ir import dtypes
from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.stmt import Alloc, Annotate, If, Seq, Stmt
from ....core_ir.tileops import Fill, Gemm
from ....core_ir.visit import walk
from ..lir import Evaluate, Intrin, PtrTo
from .persistent import Persistent

KEY = "tlx.stream_k"


def accumulator(before: list[Stmt], work: list[Stmt], overlap: bool) -> Buffer | None:
    """The float32 fragment a gemm-only loop body ``work`` accumulates into, when its sum can be
    split: one ``T.gemm`` kept in flight (``overlap``) that does not clear it, and the statements
    ``before`` the loop clear it and write nothing else."""
    if not overlap or len(work) != 1 or not isinstance(work[0], Gemm):
        return None
    gemm = work[0]
    acc = gemm.C.buffer
    if gemm.clear_accum or gemm.wg_wait != 0 or acc.scope != "fragment" or acc.dtype != dtypes.float32:
        return None
    clears = [s for s in before if isinstance(s, Fill) and s.dst.buffer is acc]
    others = [s for s in before if not isinstance(s, (Fill, Alloc, Annotate))]
    zero = len(clears) == 1 and isinstance(clears[0].value, E.Const) and float(clears[0].value.value) == 0.0
    if not zero or others or not _whole(clears[0], acc):
        return None
    return acc


def _whole(fill: Fill, acc: Buffer) -> bool:
    return all(E.as_int(st) == 0 and E.as_int(ext) == E.as_int(dim)
               for st, ext, dim in zip(fill.dst.starts, fill.dst.extents, acc.shape))


def workspace() -> E.Var:
    """The workspace parameter of one compilation (codegen declares it ``float*``)."""
    return E.Var("tlx_sk_ws", dtypes.int64)


def _on_fragment(fn: str, acc: Buffer, *args: E.Expr) -> Evaluate:
    """``fn(&registers[0], count, *args)`` on the thread's registers of ``acc`` (lower/walker.py)."""
    return Evaluate(Intrin(fn, (PtrTo(acc, (E.const(0),) * len(acc.shape), "rw"), *args)))


def fixup(acc: Buffer, pers: Persistent, consumers: int, ws: E.Var, epilogue: list[Stmt]) -> list[Stmt]:
    """The consumers' statements after a segment's last wgmma: the partial's store or the owner's
    adds, then ``epilogue`` in the blocks whose segment starts the tile."""
    sk = pers.stream_k
    assert sk is not None
    threads = E.const(consumers)
    store = _on_fragment("tlx_sk_store", acc, ws, pers.pid, threads)
    add = _on_fragment("tlx_sk_add", acc, ws, pers.pid + 1, sk.last_peer, threads)
    return [If(sk.partial, store, If(sk.owner, add, None)),
            If(E.unary("not", sk.partial), Seq(tuple(epilogue)), None)]


def uses_workspace(body: Stmt) -> tuple[int, int] | None:
    """(registers per thread, consumer threads) of the lowered ``tlx_sk_store``, if any: the slot."""
    for n in walk(body):
        if isinstance(n, Intrin) and n.fn == "tlx_sk_store":
            regs, threads = E.as_int(n.args[1]), E.as_int(n.args[4])
            if regs is not None and threads is not None:
                return regs, threads
    return None

