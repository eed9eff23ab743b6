"""The shared kernel suite: TileLang kernels written exactly as a user writes them.

`suite.CASES` lists every case with its inputs and torch reference; the interpreter tests
(tests/null) and the GPU tests (tests/backend/<x>) run the same cases.
"""
