"""``tilelang.carver.arch``: the device queries of ``driver``."""
