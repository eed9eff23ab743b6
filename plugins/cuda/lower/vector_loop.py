"""A ``T.vectorized`` loop of per-thread stores as one vector access of each thread: no barrier of
the block between its iterations, one after the loop.

Each thread's stores of such a loop form one vector access (the loop may be vectorized), so the
block sees them together after the loop, like a divergent statement's. TileLang's fp8 grouped GEMM
widens its weights this way (``for i in T.vectorized(8): B_shared[row, col + i] = cur[i]``): a
barrier after every element stalled each k-step 64 times. Taken only when every statement of the
body is a store, every shared or global store is per-thread, and the body reads no shared or
global buffer it writes (an iteration never waits for another thread's earlier one).
"""

from __future__ import annotations

from ....core_ir import expr as E
from ....core_ir.stmt import For, Seq, Stmt, Store
from ....core_ir.uniformity import Uniformity
from ....core_ir.visit import walk

_MEMORY = ("global", "shared")


def vector_unit(s: For, uni: Uniformity | None) -> bool:
    """Whether the ``T.vectorized`` loop ``s`` lowers as each thread's one vector access."""
    if s.kind != "vectorized" or uni is None or uni.divergent(s):
        return False
    stores = [n for n in walk(s.body) if isinstance(n, Store)]
    if any(isinstance(n, Stmt) and not isinstance(n, (Store, Seq)) for n in walk(s.body)):
        return False
    written = {id(n.buffer.storage) for n in stores if n.buffer.scope in _MEMORY}
    if not written:
        return False
    if any(n.buffer.scope in _MEMORY and not (uni.varying(n.value) or any(uni.varying(i) for i in n.indices))
           for n in stores):
        return False
    return not any(isinstance(n, (E.Load, E.AtomicLoad)) and id(n.buffer.storage) in written for n in walk(s.body))


__all__ = ["vector_unit"]
