"""The frontend: the TileLang language surface and the capture of kernel functions into IR.

- ``language`` — the ``T.*`` namespace (``tilelang_x.language`` re-exports it); implemented in
  ``surface`` (tile ops, allocation, expressions), ``frames`` (``T.Kernel`` and IR loops),
  ``spec`` (``T.Tensor``) and ``function`` (``T.prim_func``, ``T.macro``).
- ``capture`` — reads a kernel function's source and rewrites ``if``/``while``/assignments/
  annotations/``return``/boolean operators into calls on ``runtime`` (``__tlx__``), compiled
  with the user's file name and line numbers so errors point at the user's code.
- ``builder`` — the ``Builder`` a trace writes statements into (frames, store handler).
- ``jit`` — ``@tilelang.jit`` for the classic (factory) and eager (``T.const``) styles, and
  ``tilelang.compile``.
"""
