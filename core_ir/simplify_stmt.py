"""The statement-level simplifier: every expression of a statement tree simplified under the ranges
its enclosing loops, kernel blocks and ``if`` conditions give, and decided branches dropped."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .arith import Interval
from .buffer import Region
from .expr import BinOp, Const, Expr, Var
from .simplify import Bounds, bounds_of, implied_bounds, simplify
from .stmt import For, If, Kernel, Seq, Stmt, While


def simplify_stmt(node: Any, bounds: Bounds | None = None) -> Any:
    """Simplify every expression of a statement tree, using the ranges of enclosing loop and
    block variables and of enclosing ``if`` conditions; drop branches whose condition is
    decided. Buffers (and their shapes) are left alone; unchanged subtrees stay the same
    objects."""
    return _StmtSimplifier(dict(bounds or {})).visit(node)


class _StmtSimplifier:
    def __init__(self, bounds: dict[Var, Interval]) -> None:
        self.bounds = bounds

    def scoped(self, extra: Mapping[Var, Interval] | None, node: Any) -> Any:
        if not extra:
            return self.visit(node)
        saved = self.bounds
        self.bounds = {**saved, **extra}
        try:
            return self.visit(node)
        finally:
            self.bounds = saved

    def expr(self, e: Expr) -> Expr:
        out = simplify(e, self.bounds)
        return e if out.same_as(e) else out

    def range_of(self, start: Expr | None, extent: Expr) -> Interval:
        """Values a loop variable takes (the body only runs for these)."""
        if start is None:
            start = Const(0, extent.dtype)
        if start.dtype == extent.dtype:
            dt = extent.dtype
            last = BinOp("-", BinOp("+", start, extent, dt), Const(1, dt), dt)
            return bounds_of(start, self.bounds)[0], bounds_of(last, self.bounds)[1]
        (s_lo, s_hi), e_hi = bounds_of(start, self.bounds), bounds_of(extent, self.bounds)[1]
        return s_lo, (None if s_hi is None or e_hi is None else s_hi + e_hi - 1)

    def visit(self, node: Any) -> Any:
        if isinstance(node, Expr):
            return self.expr(node)
        if isinstance(node, tuple):
            items = tuple(self.visit(v) for v in node)
            return node if all(a is b for a, b in zip(items, node)) else items
        if isinstance(node, Region):
            starts, extents = self.visit(node.starts), self.visit(node.extents)
            if starts is node.starts and extents is node.extents:
                return node
            return Region(node.buffer, starts, extents)
        if isinstance(node, For):
            start = None if node.start is None else self.expr(node.start)
            extent = self.expr(node.extent)
            body = self.scoped({node.var: self.range_of(start, extent)}, node.body)
            if start is node.start and extent is node.extent and body is node.body:
                return node
            return dataclasses.replace(node, start=start, extent=extent, body=body)
        if isinstance(node, Kernel):
            grid = self.visit(node.grid)
            ranges = {v: (0, None if g[1] is None else g[1] - 1)
                      for v, g in zip(node.block_vars, (bounds_of(x, self.bounds) for x in grid))}
            body = self.scoped(ranges, node.body)
            if grid is node.grid and body is node.body:
                return node
            return dataclasses.replace(node, grid=grid, body=body)
        if isinstance(node, If):
            cond = self.expr(node.cond)
            if isinstance(cond, Const):
                branch = node.then if cond.value else node.otherwise
                return Seq((), node.loc) if branch is None else self.visit(branch)
            then = self.scoped(implied_bounds(cond, True, self.bounds), node.then)
            other = (None if node.otherwise is None
                     else self.scoped(implied_bounds(cond, False, self.bounds), node.otherwise))
            if cond is node.cond and then is node.then and other is node.otherwise:
                return node
            return dataclasses.replace(node, cond=cond, then=then, otherwise=other)
        if isinstance(node, While):
            cond = self.expr(node.cond)
            if isinstance(cond, Const) and not cond.value:
                return Seq((), node.loc)
            body = self.visit(node.body)
            if cond is node.cond and body is node.body:
                return node
            return dataclasses.replace(node, cond=cond, body=body)
        if isinstance(node, Seq):
            stmts = tuple(self.visit(s) for s in node.stmts)
            kept = tuple(s for s in stmts if not (isinstance(s, Seq) and not s.stmts))
            if len(kept) == len(node.stmts) and all(a is b for a, b in zip(kept, node.stmts)):
                return node
            return Seq(kept, node.loc)
        if dataclasses.is_dataclass(node) and not isinstance(node, type):
            changes = {}
            for f in dataclasses.fields(node):
                if f.name in ("loc", "annotations") or (f.name == "data" and type(node).__name__ == "Annotate"):
                    continue
                value = getattr(node, f.name)
                if isinstance(value, (Expr, Region, tuple, Stmt)):
                    new = self.visit(value)
                    if new is not value:
                        changes[f.name] = new
            return dataclasses.replace(node, **changes) if changes else node
        return node
