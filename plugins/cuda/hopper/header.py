"""Device text of the Hopper path: ``include/tlx_hopper.h`` plus one generated wrapper per wgmma
form a kernel uses (an m64nNk16 call lists all N/2 accumulators as asm operands, so each N gets its
own function; only the ones used are emitted, which keeps cold compiles short)."""

from __future__ import annotations

import functools
import os

from ..ptx_types import k_step, ptx_type


@functools.lru_cache(maxsize=1)
def hopper_header() -> str:
    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "include", "tlx_hopper.h")) as fh:
        return fh.read()


#: wrapper name -> the arguments of ``wgmma_source`` that define it
WGMMA_FORMS: dict[str, tuple[int, str, bool, int, int]] = {}


def wgmma_name(n: int, ab: str, a_regs: bool, trans_a: int, trans_b: int) -> str:
    kind = "rs" if a_regs else "ss"
    name = f"tlx_wgmma_{kind}_{ptx_type(ab)}_n{n}_t{trans_a}{trans_b}"
    WGMMA_FORMS[name] = (n, ab, a_regs, trans_a, trans_b)
    return name


@functools.cache
def wgmma_source(n: int, ab: str, a_regs: bool, trans_a: int, trans_b: int) -> str:
    """``void name(float* d, <A>, tlx_u64 desc_b, int scale_d)``: D (+)= A·B for one m64nNk16
    (k32 for fp8, k8 for tf32) step; ``<A>`` is ``tlx_u64 desc_a`` or ``const tlx_u32* a`` (4 registers)."""
    t = ptx_type(ab)
    k = k_step(ab)
    integer = t in ("s8", "u8")
    nd = n // 2
    outs = ", ".join(f'"+{"r" if integer else "f"}"(d[{i}])' for i in range(nd))
    dregs = ", ".join(f"%{i}" for i in range(nd))
    name = wgmma_name(n, ab, a_regs, trans_a, trans_b)
    shape = f"m64n{n}k{k}.{'s32' if integer else 'f32'}.{t}.{t}"
    if a_regs:
        a_ops = f"{{%{nd}, %{nd + 1}, %{nd + 2}, %{nd + 3}}}"
        b_op, s_op = f"%{nd + 4}", f"%{nd + 5}"
        imms = f"1, 1, {trans_b}" if k == 16 else "1, 1" if not integer else ""
        ins = '"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale)'
        sig = f"{'int' if integer else 'float'}* d, const tlx_u32* a, tlx_u64 db, int scale"
    else:
        a_ops = f"%{nd}"
        b_op, s_op = f"%{nd + 1}", f"%{nd + 2}"
        imms = f"1, 1, {trans_a}, {trans_b}" if k == 16 else "1, 1" if not integer else ""
        ins = '"l"(da), "l"(db), "r"(scale)'
        sig = f"{'int' if integer else 'float'}* d, tlx_u64 da, tlx_u64 db, int scale"
    tail = f", {imms}" if imms else ""  # integer forms have no scale / transpose immediates
    asm = (f'"{{\\n .reg .pred p;\\n setp.ne.b32 p, {s_op}, 0;\\n'
           f' wgmma.mma_async.sync.aligned.{shape} {{{dregs}}}, {a_ops}, {b_op}, p{tail};\\n}}\\n"')
    return (f"TLX_DEV void {name}({sig}) {{\n  asm volatile({asm}\n    : {outs}\n    : {ins});\n}}\n")
