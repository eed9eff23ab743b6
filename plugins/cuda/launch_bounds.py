"""What a kernel's ``__launch_bounds__`` says: its block size and, when asked, the minimum number
of blocks the compiler must fit on one SM (which caps the registers per thread). The minimum is
``T.annotate_min_blocks_per_sm(n)``, or 1 for a warp-specialized kernel or one that calls
setmaxnreg itself (setmaxnreg needs an entry register cap; hopper/finalize.py sets it for the
former, and hopper/pipeline.py does not warp-specialize a kernel annotated with another count)."""

from __future__ import annotations

from typing import Any

from ...core_ir.stmt import Annotate, Kernel, Stmt
from ...core_ir.visit import walk
from .registers import moves_registers

#: the ``Annotate`` kind ``T.annotate_min_blocks_per_sm`` emits (data: the count)
MIN_BLOCKS = "min_blocks_per_sm"


def annotated_min_blocks(body: Stmt) -> int | None:
    """The count ``T.annotate_min_blocks_per_sm`` gives in ``body`` (the last one), if any."""
    counts = [n.data[0] for n in walk(body) if isinstance(n, Annotate) and n.kind == MIN_BLOCKS]
    return counts[-1] if counts else None


def launch_bounds(kernel: Kernel, ctx: Any) -> str:
    """The arguments of ``__launch_bounds__`` for ``kernel``."""
    blocks = ctx.data.get("cuda.min_blocks") or annotated_min_blocks(kernel.body) or \
        (1 if moves_registers(kernel.body) else None)
    return f"{kernel.num_threads}, {blocks}" if blocks else f"{kernel.num_threads}"
