"""wgmma groups left in flight across the statements that do not need them (sm_90a, pass config
``tlx.lazy_wgmma_waits``, default on).

Every ``T.gemm`` lowers to one wgmma group followed by ``wgmma.wait_group 0``, so the tensor cores
idle while the warpgroup computes what comes next. In the body of a warp-specialized compute loop
(FlashAttention backward: five gemms with elementwise work between them) the wait moves down to
the first statement that needs the group done, and becomes ``wait_group n`` with ``n`` the groups
issued after it, which may stay in flight:

- a statement that reads or writes the group's accumulator registers (its local array);
- one that writes shared memory the group reads;
- a block barrier, when the group reads shared memory some statement of the loop writes (the other
  warpgroup writes it after the barrier);
- the stage release (``tlx_mbar_arrive`` on an empty barrier): not waited for but moved below the
  wait that completes every group issued before it, since it lets the producer overwrite the
  stage the groups read;
- anything else that makes a call (an unknown one, or within a branch or a loop): every group; a
  branch or a loop of plain loads and stores is judged by what it touches.

The loop body ends with every group done. After each wait, the completed groups' accumulators are
fenced (``tlx_fence_regs``), so ptxas does not move their reads above it. Not applied to rotated
loops (rotate.py places its own waits) nor to those ping-pong takes (pingpong.py).

Before the waits are placed, each gemm is issued as early as its operands allow (pass config
``tlx.early_wgmma_issue``, default on): it moves up, with the statement clearing its accumulator
just before it, past statements that touch none of its registers, write none of the shared memory
it reads and make no call (a stage wait, a barrier, another gemm stop it). FlashAttention
backward's dP = V·dOᵀ then runs while the warpgroup exponentiates the scores of S = K·Qᵀ, which it
does not read, instead of after them."""

from __future__ import annotations

import dataclasses
from typing import Any

from ....core_ir import expr as E
from ....core_ir.buffer import Buffer
from ....core_ir.stmt import Alloc, For, Seq, Stmt, Store
from ....core_ir.visit import flat_seq, rewrite, walk
from ..lir import AtomicStore, Barrier, Block, Evaluate, Intrin, PtrTo, SmemAddr, is_call
from .pingpong import CONSUMER_LOOP, ROTATED

KEY = "tlx.lazy_wgmma_waits"
EARLY_KEY = "tlx.early_wgmma_issue"
#: calls that touch no register or shared memory a wgmma group uses
_HARMLESS = ("tlx_mbar_wait", "tlx_fence_proxy_async")


@dataclasses.dataclass
class _Group:
    acc: PtrTo  # the accumulator, as the lowering fences it
    total: int
    smem: set[int]  # shared tiles (storage ids) it reads


def _issue(s: Stmt) -> tuple[Block, _Group] | None:
    """A lowered gemm ending in ``wait0; fence_regs(acc)``: the block without them, and its group."""
    if not (isinstance(s, Block) and s.label == "gemm"):
        return None
    body = flat_seq(s.body)
    if len(body) < 2 or not is_call(body[-2], "tlx_wgmma_wait0") or not is_call(body[-1], "tlx_fence_regs") \
            or sum(is_call(x, "tlx_wgmma_commit") for x in body) != 1:
        return None
    fence = body[-1].value
    assert isinstance(fence, Intrin)
    acc, total = fence.args
    if not isinstance(acc, PtrTo) or E.as_int(total) is None:
        return None
    smem = {id(n.buffer.storage) for n in walk(s) if isinstance(n, SmemAddr)}
    return dataclasses.replace(s, body=Seq(tuple(body[:-2]))), _Group(acc, E.as_int(total), smem)  # type: ignore[arg-type]


def _locals(s: Stmt) -> set[int]:
    """The register arrays ``s`` touches (a view's as the array owning its registers)."""
    return {id(b.storage) for n in walk(s)
            if isinstance(b := getattr(n, "buffer", None), Buffer) and b.scope == "local"}


def _shared_writes(s: Stmt) -> set[int]:
    out: set[int] = set()
    for n in walk(s):
        b = getattr(n, "buffer", None)
        if isinstance(b, Buffer) and b.scope == "shared" and (
                isinstance(n, (Store, AtomicStore)) or getattr(n, "mode", "r") in ("w", "rw", "async")):
            out.add(id(b.storage))
    return out


def _opaque(s: Stmt) -> bool:
    """Whether ``s`` may do what the rules cannot see (control flow, unknown calls)."""
    if isinstance(s, (Block, Alloc, Store)):
        return any(isinstance(n, Barrier) for n in walk(s))
    if isinstance(s, Evaluate) and isinstance(s.value, Intrin):
        return s.value.fn not in _HARMLESS
    return any(isinstance(n, (Barrier, Evaluate)) for n in walk(s))


def _wait(pending: list[_Group], upto: int) -> list[Stmt]:
    """Wait until group ``upto`` of ``pending`` (and those before it) is done; fence them."""
    left = len(pending) - upto - 1
    out: list[Stmt] = [Evaluate(Intrin("tlx_wgmma_wait0", ())) if left == 0
                       else Evaluate(Intrin("TLX_WGMMA_WAIT", (E.const(left),)))]
    out += [Evaluate(Intrin("tlx_fence_regs", (g.acc, E.const(g.total)))) for g in pending[:upto + 1]]
    return out


def _passable(s: Stmt, regs: set[int], smem: set[int]) -> bool:
    """Whether a gemm touching the register arrays ``regs`` and reading the shared tiles ``smem``
    may be issued before ``s``."""
    if any(isinstance(n, (Barrier, Evaluate, AtomicStore)) for n in walk(s)):
        return False
    return not (_locals(s) & regs) and not (_shared_writes(s) & smem)


def _early(stmts: list[Stmt]) -> list[Stmt]:
    """``stmts`` with each gemm (and the clear of its accumulator just before it) moved up past the
    statements it does not depend on."""
    out = list(stmts)
    for i in range(len(out)):
        issue = _issue(out[i])
        if issue is None:
            continue
        _, group = issue
        regs = _locals(out[i])
        lo = i
        acc = {id(group.acc.buffer.storage)}
        if lo > 0 and _locals(out[lo - 1]) == acc and _passable(out[lo - 1], set(), group.smem):
            lo -= 1
        top = lo
        while top > 0 and _passable(out[top - 1], regs, group.smem):
            top -= 1
        out[top:i + 1] = out[lo:i + 1] + out[top:lo]
    return out


def _lazy(body: Stmt, early: bool) -> Stmt | None:
    stmts = flat_seq(body)
    if early:
        stmts = _early(stmts)
    writes_of = [_shared_writes(s) for s in stmts]
    written = set().union(*writes_of)
    out: list[Stmt] = []
    pending: list[_Group] = []
    releases: list[tuple[Stmt, int]] = []  # a stage release, with the groups issued before it
    issued = 0
    changed = False

    def complete(upto: int) -> None:
        nonlocal pending
        if upto < 0:
            return
        out.extend(_wait(pending, upto))
        pending = pending[upto + 1:]
        done = issued - len(pending)
        for rel in [r for r in releases if r[1] <= done]:
            out.append(rel[0])
            releases.remove(rel)

    for s, writes in zip(stmts, writes_of):
        issue = _issue(s)
        if issue is not None:
            block, group = issue
            regs = _locals(block)
            complete(max((i for i, g in enumerate(pending) if id(g.acc.buffer.storage) in regs), default=-1))
            out.append(block)
            pending.append(group)
            issued += 1
            changed = True
            continue
        if is_call(s, "tlx_mbar_arrive") and pending:
            releases.append((s, issued))
            continue
        if isinstance(s, Barrier):
            need = [i for i, g in enumerate(pending) if g.smem & written]
        elif _opaque(s):
            need = list(range(len(pending)))
        else:
            regs = _locals(s)
            need = [i for i, g in enumerate(pending) if id(g.acc.buffer.storage) in regs or g.smem & writes]
        complete(max(need, default=-1))
        out.append(s)
    complete(len(pending) - 1)
    return Seq(tuple(out), getattr(body, "loc", None)) if changed else None


def lazy_waits(body: Stmt, pingpong_takes: Any, early: bool) -> Stmt:
    """``body`` with the wgmma waits of its warp-specialized compute loops placed lazily (and, with
    ``early``, their gemms issued early); ``pingpong_takes(loop)``: whether ping-pong scheduling
    will take the loop (then unchanged)."""

    def fn(n: Any) -> Any:
        if isinstance(n, For) and n.ann().get(CONSUMER_LOOP) and not n.ann().get(ROTATED) and not pingpong_takes(n):
            new = _lazy(n.body, early)
            return None if new is None else dataclasses.replace(n, body=new)
        return None

    return rewrite(body, fn)
