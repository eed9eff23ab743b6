"""Build glue for the one optional C extension: the compiled CUDA launcher.

Everything else lives in pyproject.toml. ``tilelang_x.plugins.cuda._launcher`` is built only when
Cython and a C compiler are present (it needs no CUDA toolkit: it calls the driver through function
pointers handed over at run time). Without them, or when the build fails, the package installs
anyway and the runtime uses its ctypes launcher. pyproject.toml lists Cython among the build
requirements, so pip's isolated build has it; ``--no-build-isolation`` uses the environment's.
"""

from __future__ import annotations

from setuptools import setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """``build_ext`` that warns instead of failing: the extension is an optimisation."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 - no compiler, missing Python headers...
            self.warn(f"tilelang-x: the compiled CUDA launcher was not built ({e}); the ctypes launcher will be used")

    def build_extension(self, ext) -> None:  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001
            self.warn(f"tilelang-x: building {ext.name} failed ({e}); the ctypes launcher will be used")


def extensions() -> list:
    try:
        from Cython.Build import cythonize
        from setuptools import Extension
    except ImportError:
        return []
    ext = Extension(
        "tilelang_x.plugins.cuda._launcher",
        ["plugins/cuda/_launcher.pyx"],
        extra_compile_args=["-O2"],
    )
    try:
        return cythonize([ext], build_dir="build/cython", quiet=True, compiler_directives={"language_level": 3})
    except Exception as e:  # noqa: BLE001
        print(f"tilelang-x: cythonize failed ({e}); the ctypes launcher will be used")
        return []


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
