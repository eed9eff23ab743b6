"""``tilelang.utils``: host-side helpers (``sparse``: 2:4 compression for ``T.gemm_sp``; ``tensor``:
``torch_assert_close``, the tolerant comparison TileLang's examples use)."""
