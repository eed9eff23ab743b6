"""tilelang-x."""
