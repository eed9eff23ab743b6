"""Text form of the IR, written to read like the TileLang source it came from.

The text of a function is also its identity for caching, so it must be deterministic: variables
and buffers that share a name are told apart by a numeric suffix in order of appearance.
"""

from __future__ import annotations

from typing import Any

from . import expr as E
from .buffer import Buffer, Region
from .packed import LANES, packed_parts
from .stmt import (
    Alloc,
    Annotate,
    Assert,
    BarrierArrive,
    BarrierExpectTx,
    BarrierInit,
    BarrierWait,
    BulkGroup,
    CpAsyncGroup,
    FenceProxyAsync,
    For,
    If,
    Jump,
    Kernel,
    NamedBarrier,
    PrimFunc,
    Print,
    Seq,
    Stmt,
    Store,
    Sync,
    WarpSpecialize,
    While,
)
from .tileops import TmaCopy

_PREC = {
    "or": 1, "and": 2, "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
    "|": 5, "^": 6, "&": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "//": 10, "%": 10,
    "**": 12,
}
_UNARY_PREC = {"not": 3, "neg": 11, "~": 11}


class _Names:
    """Assigns unique printed names to variables and buffers."""

    def __init__(self) -> None:
        self.by_id: dict[int, str] = {}
        self.taken: set[str] = set()

    def __call__(self, obj: Any, base: str) -> str:
        key = id(obj)
        name = self.by_id.get(key)
        if name is None:
            name, n = base, 1
            while name in self.taken:
                name = f"{base}_{n}"
                n += 1
            self.taken.add(name)
            self.by_id[key] = name
        return name


class _Printer:
    def __init__(self, has_views: bool = True) -> None:
        self.names = _Names()
        self.lines: list[str] = []
        self.has_views = has_views  # False: skip looking for views to declare
        self.declared: set[int] = set()

    # ---- expressions ------------------------------------------------------------------------
    def expr(self, e: Any, parent_prec: int = 0) -> str:
        if not isinstance(e, E.Expr):
            return repr(e)
        if isinstance(e, E.Var):
            return self.names(e, e.name)
        if isinstance(e, E.Const):
            if e.dtype.is_bool:
                return "True" if e.value else "False"
            if e.dtype.is_float:
                text = repr(float(e.value))
                if e.dtype.name != "float32":
                    return f"T.{e.dtype.name}({text})"
            elif e.dtype.name == "int32":
                text = str(e.value)
            else:
                return f"T.{e.dtype.name}({e.value})"
            # a negative literal reads as a unary minus: `(-3) ** x`
            return f"({text})" if text.startswith("-") and parent_prec > _UNARY_PREC["neg"] else text
        if isinstance(e, E.BinOp):
            if e.op in ("min", "max"):
                return f"T.{e.op}({self.expr(e.a)}, {self.expr(e.b)})"
            prec = _PREC[e.op]
            # Python chains comparisons (`a < b == c`) and `**` groups to the right, so those
            # need parentheses on the other side than the left-associative operators
            left = prec + 1 if prec == _PREC["=="] or e.op == "**" else prec
            right = prec if e.op == "**" else prec + 1
            text = f"{self.expr(e.a, left)} {e.op} {self.expr(e.b, right)}"
            return f"({text})" if prec < parent_prec else text
        if isinstance(e, E.UnaryOp):
            sym = {"neg": "-", "not": "not ", "~": "~"}[e.op]
            prec = _UNARY_PREC[e.op]
            text = f"{sym}{self.expr(e.a, prec)}"
            return f"({text})" if prec < parent_prec else text
        if isinstance(e, E.Select):
            return f"T.if_then_else({self.expr(e.cond)}, {self.expr(e.t)}, {self.expr(e.f)})"
        if isinstance(e, E.Cast):
            return f"T.cast({self.expr(e.a)}, {e.dtype.name})"
        if isinstance(e, E.Call):
            args = [self.expr(a) for a in e.args]
            if e.name == "reinterpret":
                args.insert(0, e.dtype.name)
            ieee = E.ieee_parts(e.name)
            if ieee is not None:
                name, mode = ieee
                return f"T.{name}({', '.join(args if name == 'ieee_frsqrt' else [*args, repr(mode)])})"
            lane = packed_parts(e.name)
            if lane is not None:
                pairs = [f"T.{e.dtype.name}x{LANES}({', '.join(args[i:i + LANES])})"
                         for i in range(0, len(args), LANES)]
                return f"T.{lane[0]}({', '.join(pairs)})[{lane[1]}]"
            return f"T.{e.name}({', '.join(args)})"
        if isinstance(e, E.ExternCall):
            dtype = "void" if e.void else e.dtype.name
            return f"T.call_extern({dtype!r}, {e.name!r}{''.join(', ' + self.expr(a) for a in e.args)})"
        if isinstance(e, E.Load):
            return f"{self.buf(e.buffer)}[{', '.join(self.expr(i) for i in e.indices)}]"
        if isinstance(e, E.AtomicFetch):
            element = f"{self.buf(e.buffer)}[{', '.join(self.expr(i) for i in e.indices)}]"
            return f"T.atomic_{e.kind}({element}, {self.expr(e.value)}, return_prev=True)"
        if isinstance(e, E.AtomicLoad):
            element = f"{self.buf(e.buffer)}[{', '.join(self.expr(i) for i in e.indices)}]"
            return f"T.atomic_load({element}, memory_order={e.order!r})"
        if isinstance(e, E.ThreadIndex):
            return f"T.get_thread_binding({e.dim})"
        if isinstance(e, E.ClusterRank):
            return "T.block_rank_in_cluster()"
        if isinstance(e, E.WarpOp):
            args = [self.expr(a) for a in e.args]
            if e.op in E.SHUFFLE_OPS and e.width != E.WARP_SIZE:
                args.append(f"width={e.width}")
            return f"T.{e.op}({', '.join(args)})"
        return repr(e)

    def shape(self, b: Buffer) -> str:
        dims = [self.expr(d) for d in b.shape]
        return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"

    def buf(self, b: Buffer) -> str:
        return self.names(b, b.name)

    def region(self, r: Region) -> str:
        if r.is_full():
            return self.buf(r.buffer)
        parts = []
        for s, x in zip(r.starts, r.extents):
            if E.as_int(x) == 1:
                parts.append(self.expr(s))
            elif E.as_int(s) == 0:
                parts.append(f":{self.expr(x)}")
            else:
                parts.append(f"{self.expr(s)}:{self.expr(s + x)}")
        return f"{self.buf(r.buffer)}[{', '.join(parts)}]"

    def value(self, v: Any) -> str:
        if isinstance(v, Region):
            return self.region(v)
        if isinstance(v, Buffer):
            return self.buf(v)
        if isinstance(v, E.Expr):
            return self.expr(v)
        if isinstance(v, tuple):
            return "(" + ", ".join(self.value(x) for x in v) + ("," if len(v) == 1 else "") + ")"
        return repr(v)

    # ---- statements -------------------------------------------------------------------------
    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def declare_views(self, s: Stmt, depth: int) -> None:
        """``v = T.view(base, shape, dtype)`` for each view ``s`` uses that is not declared yet
        (views have no statement of their own: they are declared before the first simple
        statement that uses them)."""
        from .visit import buffers_used

        for b in buffers_used(s):
            if b.base is not None and id(b) not in self.declared:
                self.declared.add(id(b))
                self.emit(depth, f"{self.buf(b)} = T.view({self.buf(b.base)}, {self.shape(b)}, {b.dtype.name})")

    def stmt(self, s: Stmt, depth: int) -> None:
        if self.has_views and not isinstance(s, (Seq, For, If, While, Kernel)):
            self.declare_views(s, depth)
        if isinstance(s, Seq):
            if not s.stmts:
                self.emit(depth, "pass")
            for c in s.stmts:
                self.stmt(c, depth)
        elif isinstance(s, For):
            self.for_loop(s, depth)
        elif isinstance(s, If):
            self.emit(depth, f"if {self.expr(s.cond)}:")
            self.stmt(s.then, depth + 1)
            if s.otherwise is not None:
                self.emit(depth, "else:")
                self.stmt(s.otherwise, depth + 1)
        elif isinstance(s, While):
            self.emit(depth, f"while {self.expr(s.cond)}:")
            self.stmt(s.body, depth + 1)
        elif isinstance(s, Store):
            idx = ", ".join(self.expr(i) for i in s.indices)
            self.emit(depth, f"{self.buf(s.buffer)}[{idx}] = {self.expr(s.value)}")
        elif isinstance(s, Alloc):
            self.alloc(s, depth)
        elif isinstance(s, Kernel):
            grid = ", ".join(self.expr(g) for g in s.grid)
            threads = s.threads[0] if len(s.threads) == 1 else list(s.threads)
            extra = "".join(f", {k}={v!r}" for k, v in s.annotations)
            names = ", ".join(self.expr(v) for v in s.block_vars)
            self.emit(depth, f"with T.Kernel({grid}, threads={threads}{extra}) as ({names}):")
            self.stmt(s.body, depth + 1)
        elif isinstance(s, Print):
            self.emit(depth, f"T.print({self.value(s.value)}, msg={s.msg!r})")
        elif isinstance(s, (Sync, NamedBarrier)):
            self.emit(depth, s.call)
        elif isinstance(s, Jump):
            self.emit(depth, s.kind)
        elif isinstance(s, Assert):
            self.emit(depth, f"T.device_assert({self.expr(s.cond)}, msg={s.msg!r})")
        elif isinstance(s, Annotate):
            self.emit(depth, f"T.annotate({s.kind!r}, {self.value(s.data)})")
        elif isinstance(s, WarpSpecialize):
            self.emit(depth, f"with {s.call}:")
            self.stmt(s.body, depth + 1)
        elif isinstance(s, BarrierInit):
            self.emit(depth, f"T.barrier_init({self.buf(s.buffer)}, {list(s.counts)})")
        elif isinstance(s, BarrierArrive):
            cta = "" if s.cta is None else f", cta_id={self.expr(s.cta)}"
            self.emit(depth, f"T.barrier_arrive({self.buf(s.buffer)}[{self.expr(s.index)}]{cta})")
        elif isinstance(s, BarrierWait):
            self.emit(depth, f"T.barrier_wait({self.buf(s.buffer)}[{self.expr(s.index)}], {self.expr(s.parity)})")
        elif isinstance(s, BarrierExpectTx):
            self.emit(depth, f"{s.call}({self.buf(s.buffer)}[{self.expr(s.index)}], {self.expr(s.nbytes)})")
        elif isinstance(s, FenceProxyAsync):
            self.emit(depth, "T.fence_proxy_async()")
        elif isinstance(s, (CpAsyncGroup, BulkGroup)):
            self.emit(depth, s.call)
        elif isinstance(s, TmaCopy):
            arrive = ", emit_arrive=True" if s.arrive else ""
            bar = "" if s.barrier is None else f", barrier={self.buf(s.barrier)}[{self.expr(s.index)}]"
            mask = f", cluster_mask={s.mask:#b}" if s.mask else ""
            self.emit(depth, f"T.tma_copy({self.value(s.src)}, {self.value(s.dst)}{bar}{mask}{arrive})")
        else:
            self.tile_op(s, depth)

    def for_loop(self, s: For, depth: int) -> None:
        kind = {"serial": "T.serial", "unroll": "T.unroll", "parallel": "T.Parallel",
                "pipelined": "T.Pipelined", "vectorized": "T.vectorized"}[s.kind]
        args = self.expr(s.extent)
        if s.start is not None:
            args = f"{self.expr(s.start)}, {self.expr(s.start + s.extent)}"
        args += "".join(f", {k}={v!r}" for k, v in s.annotations)
        self.emit(depth, f"for {self.expr(s.var)} in {kind}({args}):")
        self.stmt(s.body, depth + 1)

    def alloc(self, s: Alloc, depth: int) -> None:
        b = s.buffer
        name = self.buf(b)
        if b.scope == "var":
            init = "" if s.init is None else f", {self.expr(s.init)}"
            self.emit(depth, f"{name} = T.alloc_var({b.dtype.name}{init})")
            return
        self.emit(depth, f"{name} = T.alloc_{b.scope}({self.shape(b)}, {b.dtype.name})")

    def tile_op(self, s: Stmt, depth: int) -> None:
        import dataclasses

        args = []
        for f in dataclasses.fields(s):
            if f.name == "loc":
                continue
            v = getattr(s, f.name)
            if f.default is not dataclasses.MISSING and v == f.default:
                continue
            args.append(f"{f.name}={self.value(v)}")
        self.emit(depth, f"T.{getattr(s, 'name', type(s).__name__)}({', '.join(args)})")

    def func(self, f: PrimFunc) -> str:
        params = []
        for p in f.params:
            if isinstance(p, Buffer):
                params.append(f"{self.buf(p)}: T.Tensor({self.shape(p)}, {p.dtype.name})")
            else:
                params.append(f"{self.expr(p)}: {p.dtype.name}")
        head = ""
        if f.out_idx:
            head += f"# out_idx={list(f.out_idx)}\n"
        for k, v in f.attrs:
            head += f"# {k}={v!r}\n"
        self.lines.append(f"{head}@T.prim_func\ndef {f.name}({', '.join(params)}):")
        self.stmt(f.body, 1)
        return "\n".join(self.lines)


def expr_to_str(e: E.Expr) -> str:
    return _Printer().expr(e)


def region_to_str(r: Region) -> str:
    return _Printer().region(r)


def stmt_to_str(s: Stmt) -> str:
    p = _Printer()
    p.stmt(s, 0)
    return "\n".join(p.lines)


def func_to_str(f: PrimFunc) -> str:
    """The function as TileLang-like source text (deterministic: usable as a cache key)."""
    from .visit import buffers_used

    return _Printer(any(b.base is not None for b in buffers_used(f.body))).func(f)
