"""The tile-level IR shared by the frontend and every backend."""

from . import dtypes
from .buffer import Buffer, Region
from .dtypes import DType, as_dtype
from .errors import TileLangError
from .expr import BinOp, Call, Cast, Const, Expr, Load, Select, UnaryOp, Var
from .source import SourceLoc
from .stmt import Alloc, Annotate, For, If, Jump, Kernel, PrimFunc, Print, Seq, Stmt, Store, While
from .tileops import Atomic, Copy, CumSum, Fill, Gemm, Reduce, TileOp

__all__ = [
    "Alloc", "Annotate", "Atomic", "BinOp", "Buffer", "Call", "Cast", "Const", "Copy", "CumSum",
    "DType", "Expr", "Fill", "For", "Gemm", "If", "Jump", "Kernel", "Load", "PrimFunc", "Print", "Reduce",
    "Region", "Select", "Seq", "SourceLoc", "Stmt", "Store", "TileLangError", "TileOp", "UnaryOp",
    "Var", "While", "as_dtype", "dtypes",
]
