"""Guarded ``T.Pipelined`` loops on the warp-specialized Hopper pipeline (pipeline.py): a loop whose
whole body is ``if cond(k): ...`` (TileLang's block-sparse attention: ``if block_mask[k]:``), with
the producer copies inside the branch.

The producer and the consumers both evaluate ``cond`` for every k and skip the iterations it
rejects; each side counts the iterations it takes, and that count, not k, picks the stage and the
barrier phase, so both walk the same ring of stages. ``cond`` may read the loop variable, block
indices, scalar arguments, tensors the kernel does not write, and local arrays or variables that
statements before the loop fill from those (the mask row copied to ``block_mask``): the producer
replays those statements (``Guard.setup``) before its loop. Without this, copies under an ``if``
run synchronously in the body."""

from __future__ import annotations

from dataclasses import dataclass

from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.stmt import Alloc, For, If, Seq, Stmt, Store
from ....core_ir.visit import walk
from ..pipelining import written_ids

_LOCAL = ("local", "var")
_REPLAYABLE = (Seq, For, If, Store)


@dataclass(frozen=True)
class Guard:
    cond: E.Expr
    #: indices of the statements before the loop (at the kernel's top level) the producer replays
    setup: tuple[int, ...]


class _Reads:
    """What a guard's inputs may read: ``host`` variables, the tensors ``fixed`` (parameters the
    kernel does not write) and local buffers, which it collects in ``locals``."""

    def __init__(self, host: set[int], fixed: set[int]) -> None:
        self.host = host
        self.fixed = fixed
        self.locals: dict[int, Buffer] = {}

    def ok(self, node: object, bound: set[int]) -> bool:
        for n in walk(node):  # type: ignore[arg-type]
            if isinstance(n, E.AtomicLoad):
                return False
            if isinstance(n, E.Load):
                b = n.buffer
                if b.scope in _LOCAL and b.base is None:
                    self.locals[id(b)] = b
                elif id(b) not in self.fixed:
                    return False
            elif isinstance(n, E.Var) and id(n) not in self.host and id(n) not in bound:
                return False
        return True


def _replayable(s: Stmt, reads: _Reads) -> bool:
    """Whether the producer may run ``s`` as well: loops, branches and stores to local buffers over
    what ``reads`` allows (and the statement's own loop variables)."""
    bound = {id(n.var) for n in walk(s) if isinstance(n, For)}
    for n in walk(s):
        if isinstance(n, Stmt) and not isinstance(n, _REPLAYABLE):
            return False
        if isinstance(n, Store) and (n.buffer.scope not in _LOCAL or n.buffer.base is not None):
            return False
    return reads.ok(s, bound)


def plan_guard(params: tuple, host: set[int], body: Stmt, top: list[Stmt], at: int, loop: For,
               cond: E.Expr) -> Guard | None:
    """The guard of ``loop`` (``top[at]``, the kernel body's top level being ``top``), or ``None``
    when the producer cannot evaluate ``cond`` on its own."""
    written = written_ids(body)
    fixed = {id(p) for p in params if isinstance(p, Buffer) and id(p) not in written}
    reads = _Reads(host, fixed)
    if not reads.ok(cond, {id(loop.var)}):
        return None
    setup: set[int] = set()
    grew = True
    while grew:
        grew = False
        for i, s in enumerate(top[:at]):
            if i not in setup and written_ids(s) & set(reads.locals):
                if not _replayable(s, reads):
                    return None
                setup.add(i)
                grew = True
    hoisted = {id(s.buffer) for s in top if isinstance(s, Alloc) and s.init is None}
    for b in reads.locals:
        if b not in hoisted or any(b in written_ids(s) for i, s in enumerate(top) if i not in setup):
            return None
    return Guard(cond, tuple(sorted(setup)))
