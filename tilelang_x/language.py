"""The TileLang language: ``import tilelang_x.language as T``.

A thin re-export of ``tilelang_x.frontend.language``; unknown ``T.<name>`` raises a located
``TileLangSyntaxError`` naming the closest supported names.
"""

from tilelang_x.frontend import language as _language
from tilelang_x.frontend.language import *  # noqa: F403
from tilelang_x.frontend.language import __all__  # noqa: F401


def __getattr__(name: str) -> object:
    return _language.__getattr__(name)
