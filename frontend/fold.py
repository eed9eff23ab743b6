"""Folding of region extents written as differences, e.g. ``A[bx*BM:(bx+1)*BM]``.

The slice's extent ``(bx+1)*BM - bx*BM`` must become ``BM`` (a constant or the very variable
the other operand's shape uses) before a tile op can compare shapes. A tiny polynomial normal
form over integer expressions is enough: sums of products of atoms with integer coefficients,
where an atom is any sub-expression that is not ``+``, ``-``, ``*`` or an integer constant.
The folded extent replaces the written one only when it is a constant or a single atom, so
nothing else about the user's expressions changes.
"""

from __future__ import annotations

from typing import Any

from ..core_ir import expr as E

# polynomial: {monomial: coefficient}; a monomial is a sorted tuple of atom keys
Poly = dict[tuple[Any, ...], int]

_MAX_TERMS = 64


def _poly(e: E.Expr, atoms: dict[Any, E.Expr]) -> Poly | None:
    if isinstance(e, E.Const):
        if not e.dtype.is_int:
            return None
        return {(): int(e.value)} if e.value else {}
    if isinstance(e, E.BinOp) and e.op in ("+", "-", "*") and e.dtype.is_int:
        a = _poly(e.a, atoms)
        b = _poly(e.b, atoms)
        if a is None or b is None:
            return None
        if e.op == "*":
            out: Poly = {}
            for ma, ca in a.items():
                for mb, cb in b.items():
                    m = tuple(sorted(ma + mb, key=repr))
                    out[m] = out.get(m, 0) + ca * cb
            out = {m: c for m, c in out.items() if c}
        else:
            sign = 1 if e.op == "+" else -1
            out = dict(a)
            for m, c in b.items():
                out[m] = out.get(m, 0) + sign * c
            out = {m: c for m, c in out.items() if c}
        return out if len(out) <= _MAX_TERMS else None
    if isinstance(e, E.UnaryOp) and e.op == "neg":
        a = _poly(e.a, atoms)
        return None if a is None else {m: -c for m, c in a.items()}
    if not e.dtype.is_int:
        return None
    key = e.structural_key()
    atoms.setdefault(key, e)
    return {(key,): 1}


def fold_extent(e: Any) -> Any:
    """``e`` as a constant or a single atom when its polynomial form is one; else ``e``."""
    if not isinstance(e, E.Expr) or isinstance(e, (E.Const, E.Var)):
        return e
    atoms: dict[Any, E.Expr] = {}
    p = _poly(e, atoms)
    if p is None:
        return e
    if not p:
        return E.Const(0, e.dtype)
    if len(p) == 1:
        (mono, coef), = p.items()
        if mono == ():
            return E.Const(coef, e.dtype)
        if len(mono) == 1 and coef == 1:
            atom = atoms[mono[0]]
            return atom if atom.dtype == e.dtype else e
    return e
