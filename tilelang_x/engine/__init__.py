"""``tilelang.engine``: the names TileLang's examples import from its compile engine: the hooks that
post-process the generated device source before it is compiled (``callback``)."""

from .callback import (
    register_cuda_postproc,
    register_cuda_postproc_callback,
    register_hip_postproc,
    register_hip_postproc_callback,
)

__all__ = [
    "register_cuda_postproc", "register_cuda_postproc_callback", "register_hip_postproc",
    "register_hip_postproc_callback",
]
