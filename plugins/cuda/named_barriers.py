"""The kernel's named barriers (``T.sync_threads(id, count)``, ``T.named_barrier_arrive``):
``bar.sync id, count`` / ``bar.arrive id, count`` (``tlx_bar_sync`` / ``tlx_bar_arrive``).

The compiler names barriers of its own: warp specialization's consumers (1), pingpong's turns (2,
3), stream-K's consumers (1) and the ``T.ws`` regions' (1 to 15). They never share a kernel with
the user's: the first three are off in a kernel that names barriers (it counts as one that queries
threads, ``uses_simt``), and ``verify_ws`` refuses named barriers beside ``T.ws`` regions and
mbarriers. ``check_ids`` makes sure of it before code is generated.
"""

from __future__ import annotations

from ...core_ir import expr as E
from ...core_ir.errors import NotSupportedError
from ...core_ir.stmt import NamedBarrier, Stmt
from ...core_ir.visit import walk
from .lir import Evaluate, Intrin

#: the calls of the user's named barriers, and those of the compiler's
USER_CALLS = ("tlx_bar_sync", "tlx_bar_arrive")
COMPILER_CALLS = ("tlx_named_bar_sync", "tlx_ws_sync", "tlx_pp_wait", "tlx_pp_pass", "tlx_sk_store", "tlx_sk_add")


def named_barrier(s: NamedBarrier) -> Evaluate:
    """The call of ``s``."""
    fn = "tlx_bar_arrive" if s.arrive else "tlx_bar_sync"
    return Evaluate(Intrin(fn, (s.barrier_id, E.const(s.count))), s.loc)


def check_ids(body: Stmt) -> None:
    """Raise when the lowered ``body`` has the user's named barriers and the compiler's."""
    calls = [n for n in walk(body) if isinstance(n, Evaluate) and isinstance(n.value, Intrin)]
    user = next((n for n in calls if n.value.fn in USER_CALLS), None)
    own = next((n.value.fn for n in calls if n.value.fn in COMPILER_CALLS), None)
    if user is not None and own is not None:
        raise NotSupportedError(
            f"this kernel's named barriers would share ids with the ones the compiler placed ({own})", loc=user.loc,
            hint='compile it with pass_configs={"tl.disable_warp_specialized": True}, or drop the named barriers')
