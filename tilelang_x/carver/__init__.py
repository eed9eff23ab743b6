"""``tilelang.carver``: only what TileLang's examples import from it, ``carver.arch.driver`` (the
device queries persistent kernels size their grids with). TileLang's tile-configuration search
(roller) is not provided: ``tilelang.autotune`` searches configurations."""
