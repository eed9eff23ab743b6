"""Which barriers of a wgmma kernel need the ``fence.proxy.async`` before them (sm_90a, finalize.py).

Shared memory a thread writes with ordinary stores and the async proxy (wgmma, TMA stores) reads
after a barrier needs that fence in the writing thread (backends.md A7), so finalize put one before
every barrier of a kernel with wgmma. A thread that has written nothing since its last fence has
nothing to order: a forward data-flow over the lowered body tracks whether an ordinary
shared-memory write (a store, a ``w`` / ``rw`` address, a ``cp.async``) may have happened since the
thread's last fence, through branches (either side) and loops (to a fixed point over the back
edge), and each barrier reached only clean keeps no fence. FlashAttention backward's loop had one
before its first consumer barrier although the dQ reduction of the previous iteration had fenced
its own stores (Nsight Compute, session 15: 1.4 % of the stall samples).

Conservative where it cannot follow control flow: a kernel with ``break`` / ``continue``,
``while`` loops or ``T.ws`` regions keeps every fence, and a barrier inside a statement the flow
does not enter keeps its own. Switch: pass config ``tlx.elide_proxy_fences`` (default on).
"""

from __future__ import annotations

from typing import Any

from ....core_ir.buffer import Buffer
from ....core_ir.stmt import Alloc, For, If, Jump, Kernel, Seq, Stmt, Store, WarpSpecialize, While
from ....core_ir.visit import walk
from ..lir import AtomicStore, Barrier, Block, Intrin, PairStore, PtrTo, SmemAddr, is_call
from ..perf_options import pass_configs

KEY = "tlx.elide_proxy_fences"
FENCE = "tlx_fence_proxy_async"
#: intrinsics whose ``async`` shared addresses belong to the async proxy (or to barriers)
_ASYNC_PROXY = ("tlx_tma", "tlx_wgmma", "tlx_mbar")


def _shared(buf: Any) -> bool:
    return isinstance(buf, Buffer) and buf.scope == "shared"


def _leaf(s: Stmt) -> tuple[bool, bool]:
    """(whether ``s`` may write shared memory through the generic proxy, whether it holds control
    flow the data flow does not follow: ``break`` / ``continue``, ``while``, ``T.ws`` regions)."""
    writes = opaque = False
    for n in walk(s):
        if isinstance(n, (Jump, While, WarpSpecialize)):
            opaque = True
        elif isinstance(n, (Store, AtomicStore, PairStore)) and _shared(n.buffer):
            writes = True
        elif isinstance(n, (SmemAddr, PtrTo)) and n.mode in ("w", "rw") and _shared(n.buffer):
            writes = True
        elif isinstance(n, Intrin) and not n.fn.startswith(_ASYNC_PROXY) and any(
                isinstance(a, (SmemAddr, PtrTo)) and a.mode == "async" for arg in n.args for a in walk(arg)):
            writes = True  # cp.async and the like
    return writes, opaque


class _Flow:
    def __init__(self) -> None:
        self.reached: set[int] = set()
        self.needed: set[int] = set()
        self.writes: dict[int, bool] = {}  # of the leaves, which loops revisit
        self.opaque = False

    def run(self, s: Stmt | None, dirty: bool) -> bool:
        """The state after ``s`` entered with ``dirty``; records the barriers reached dirty."""
        if s is None:
            return dirty
        if isinstance(s, Barrier):
            self.reached.add(id(s))
            if dirty:
                self.needed.add(id(s))
            return False  # fenced before it, or nothing to fence
        if is_call(s, FENCE):
            return False
        if isinstance(s, Seq):
            for c in s.stmts:
                dirty = self.run(c, dirty)
            return dirty
        if isinstance(s, (Block, Kernel)):
            return self.run(s.body, dirty)
        if isinstance(s, If):
            return self.run(s.then, dirty) | self.run(s.otherwise, dirty)
        if isinstance(s, For):
            head = dirty
            while True:
                after = dirty | self.run(s.body, head)
                if after == head:
                    return head
                head = after
        if isinstance(s, Alloc):
            return dirty
        # any other statement: a leaf, or one whose barriers keep their fences (never visited)
        if id(s) not in self.writes:
            self.writes[id(s)], opaque = _leaf(s)
            self.opaque |= opaque
        return dirty | self.writes[id(s)]


def unfenced_barriers(body: Stmt, ctx: Any) -> set[int]:
    """The ids of the barriers of ``body`` that every thread reaches with nothing to fence."""
    if not pass_configs(ctx).get(KEY, True):
        return set()
    flow = _Flow()
    flow.run(body, False)
    return set() if flow.opaque else flow.reached - flow.needed
