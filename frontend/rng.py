"""``T.rng_init``, ``T.rng_rand``, ``T.rng_rand_float``: random numbers from a counter-based
generator (Philox4x32-10, ``core_ir.philox``), identical in every backend.

TileLang keeps a cuRAND state per CUDA thread. The block-level execution model has no threads
that a program could name, so the stream is the *program's*: ``T.rng_init(seed, seq, off)``
opens it at its line, and each draw after it, in program order, is a pure expression
``rng_rand(seed, seq, off + k)`` for the k-th draw (``T.rng_rand_float(bit=64)`` takes two). Put
inside a ``T.Parallel`` body with ``seq`` the element's global index, every iteration draws from
its own stream, whichever thread runs it. A draw must sit in the same IR loops as the
``T.rng_init`` it follows (a loop between them would repeat the same draw).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core_ir import dtypes
from ..core_ir import expr as E
from ..core_ir.errors import TileLangSyntaxError
from ..core_ir.source import SourceLoc, caller_loc
from . import builder as bld

__all__ = ["rng_init", "rng_rand", "rng_rand_float"]

#: TileLang's ``generator=`` names of Philox4x32-10; the other generators are not provided
PHILOX = ("curandStatePhilox4_32_10_t", "mcrandStatePhilox4_32_10_t")
_SEQ_HINT = ("pass the element's global index, e.g. inside `for i, j in T.Parallel(bM, bN):` "
             "`T.rng_init(seed, (by * bM + i) * N + bx * bN + j)`")


@dataclass
class Stream:
    """The stream a ``T.rng_init`` opened: its uint64 operands, where it was opened (the kernel
    and the IR loops around it) and how many draws were taken from it so far."""

    seed: E.Expr
    subsequence: E.Expr
    offset: E.Expr
    scope: tuple[Any, ...]
    loc: SourceLoc | None
    draws: int = 0


def _scope(b: bld.Builder) -> tuple[Any, ...]:
    return (b.kernel_frame, *(f for f in b.frames if f.loop_kind is not None))


def _u64(value: Any, what: str, loc: SourceLoc | None) -> E.Expr:
    e = E.convert(value)
    if not (e.dtype.is_int or e.dtype.is_bool):
        raise TileLangSyntaxError(f"T.rng_init {what} must be an integer, got {e.dtype}", loc=loc,
                                  hint="cast it with T.cast(x, T.int64)")
    return E.cast(e, dtypes.uint64)


def rng_init(seed: Any, seq: Any = None, off: Any = 0, generator: str = PHILOX[0]) -> None:
    """Open the stream ``(seed, seq)`` at position ``off`` for the draws that follow."""
    b = bld.require_kernel("T.rng_init")
    loc = caller_loc()
    if generator not in PHILOX:
        raise TileLangSyntaxError(f"T.rng_init generator={generator!r} is not supported", loc=loc,
                                  hint=f"tilelang-x implements Philox4x32-10 only: generator={PHILOX[0]!r}")
    if seq is None:
        raise TileLangSyntaxError("T.rng_init needs seq=: a stream per CUDA thread is not defined in tilelang-x",
                                  loc=loc, hint=_SEQ_HINT)
    b.rng = Stream(_u64(seed, "seed", loc), _u64(seq, "seq", loc), _u64(off, "off", loc), _scope(b), loc)


def _draw(what: str) -> E.Expr:
    b = bld.require_kernel(what)
    stream: Stream | None = b.rng
    scope = _scope(b)
    if stream is None or stream.scope[0] is not scope[0]:
        raise TileLangSyntaxError(f"{what} without a T.rng_init before it in this kernel", loc=caller_loc(),
                                  hint=f"open a stream first: {_SEQ_HINT}")
    if len(stream.scope) != len(scope) or any(x is not y for x, y in zip(stream.scope, scope)):
        raise TileLangSyntaxError(
            f"{what} in other loops than its T.rng_init (line {stream.loc.line if stream.loc else '?'})",
            loc=caller_loc(),
            hint="call T.rng_init in the innermost loop of the draws, with a seq (or off) that includes "
                 "that loop's variable, so that every iteration draws different numbers")
    offset = E.binary("+", stream.offset, stream.draws)
    stream.draws += 1
    return E.Call(E.RNG_FUNC, (stream.seed, stream.subsequence, offset), dtypes.uint32)


def rng_rand() -> E.Expr:
    """The next uint32 of the stream."""
    return _draw("T.rng_rand")


def rng_rand_float(bit: int = 32, dist: str = "uniform") -> E.Expr:
    """The next uniform float in [0, 1): 24 random bits times 2^-24 (``bit=32``, float32), or 53
    bits of two draws times 2^-53 (``bit=64``, float64); exact, so identical in every backend."""
    if dist != "uniform":
        raise TileLangSyntaxError(f"T.rng_rand_float(dist={dist!r}) is not supported", loc=caller_loc(),
                                  hint="draw uniform floats and transform them (e.g. Box-Muller with T.log, "
                                       "T.sqrt, T.cos); the result then matches across backends within ulps")
    if bit == 32:
        bits = E.cast(E.binary(">>", _draw("T.rng_rand_float"), 8), dtypes.float32)
        return E.binary("*", bits, E.const(2.0**-24, dtypes.float32))
    if bit == 64:
        high = E.binary("<<", E.cast(_draw("T.rng_rand_float"), dtypes.uint64), 21)
        low = E.binary(">>", E.cast(_draw("T.rng_rand_float"), dtypes.uint64), 11)
        return E.binary("*", E.cast(E.binary("|", high, low), dtypes.float64), E.const(2.0**-53, dtypes.float64))
    raise TileLangSyntaxError(f"T.rng_rand_float(bit={bit!r})", loc=caller_loc(), hint="use bit=32 or bit=64")
