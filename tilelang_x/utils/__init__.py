"""``tilelang.utils``: host-side helpers (``sparse``: 2:4 compression for ``T.gemm_sp``)."""
