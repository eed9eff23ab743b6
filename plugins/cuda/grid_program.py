"""The launch grid as a small integer program the compiled launcher runs without calling Python.

``grid_program(source, dims)`` turns the grid text of ``KernelMeta.grid_source`` (a Python tuple
of three integer expressions over ``{dim}`` names, e.g. ``"(({n} + 255) // 256, 1, 1)"``) into
three postfix programs of ``(opcode, operand)`` pairs, or ``None`` when the text uses anything
beyond integer constants, dims, ``+ - * // %``, ``min`` and ``max`` (the launcher then calls the
Python grid function). Division follows Python (floor), as the grid function does.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

# Opcodes shared with _launcher.pyx.
G_CONST, G_DIM, G_ADD, G_SUB, G_MUL, G_FLOORDIV, G_MOD, G_MIN, G_MAX = range(9)
#: The compiled launcher's evaluation stack depth.
MAX_DEPTH = 16
_BINOPS: dict[type, int] = {ast.Add: G_ADD, ast.Sub: G_SUB, ast.Mult: G_MUL, ast.FloorDiv: G_FLOORDIV,
                            ast.Mod: G_MOD}
_CALLS = {"min": G_MIN, "max": G_MAX}
_LIMIT = 1 << 40

Program = list[tuple[int, int]]


class _Unsupported(Exception):
    pass


def _emit(node: ast.expr, names: dict[str, int], out: Program) -> int:
    """Append ``node``'s postfix code to ``out``; the stack depth it needs."""
    if isinstance(node, ast.Constant) and type(node.value) is int and -_LIMIT <= node.value <= _LIMIT:
        out.append((G_CONST, node.value))
        return 1
    if isinstance(node, ast.Name) and node.id in names:
        out.append((G_DIM, names[node.id]))
        return 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        out.append((G_CONST, 0))
        depth = _emit(node.operand, names, out)
        out.append((G_SUB, 0))
        return depth + 1
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left = _emit(node.left, names, out)
        right = _emit(node.right, names, out)
        out.append((_BINOPS[type(node.op)], 0))
        return max(left, right + 1)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS
            and len(node.args) >= 2 and not node.keywords):
        depth = _emit(node.args[0], names, out)
        for arg in node.args[1:]:
            depth = max(depth, 1 + _emit(arg, names, out))
            out.append((_CALLS[node.func.id], 0))
        return depth
    raise _Unsupported


def grid_program(source: str, dims: Sequence[str]) -> list[Program] | None:
    """Three postfix programs (x, y, z) for grid text ``source`` over ``dims``, or ``None``."""
    body = source
    names: dict[str, int] = {}
    for i, name in enumerate(dims):
        body = body.replace("{" + name + "}", f"_d{i}")
        names[f"_d{i}"] = i
    try:
        tree = ast.parse(body.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(tree, ast.Tuple) or len(tree.elts) != 3:
        return None
    programs: list[Program] = []
    for elt in tree.elts:
        prog: Program = []
        try:
            depth = _emit(elt, names, prog)
        except _Unsupported:
            return None
        if depth > MAX_DEPTH:
            return None
        programs.append(prog)
    return programs


def _apply(op: int, a: int, b: int) -> int:
    if op == G_ADD:
        return a + b
    if op == G_SUB:
        return a - b
    if op == G_MUL:
        return a * b
    if op == G_FLOORDIV:
        return a // b
    if op == G_MOD:
        return a % b
    return min(a, b) if op == G_MIN else max(a, b)


def run(programs: list[Program], dims: Sequence[int]) -> tuple[int, int, int]:
    """The grid the programs compute (the reference the compiled launcher follows; for tests)."""
    out = []
    for prog in programs:
        stack: list[int] = []
        for op, arg in prog:
            if op == G_CONST:
                stack.append(arg)
            elif op == G_DIM:
                stack.append(int(dims[arg]))
            else:
                b, a = stack.pop(), stack.pop()
                stack.append(_apply(op, a, b))
        out.append(max(1, stack[0]))
    return out[0], out[1], out[2]
