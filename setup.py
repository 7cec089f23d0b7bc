"""The compiled core: one extension per kcodec/_core/*.pyx (project metadata is
in pyproject.toml)."""
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

CORE = Path("kcodec") / "_core"
# columns.pyx compiles its record loop twice (fill_records); by default GCC
# then stops inlining the record parser into it, and calls it per record.
COLUMNS_INLINING = ["--param=max-inline-insns-single=2000"]

extensions = [
    Extension(
        f"kcodec._core.{pyx.stem}",
        [str(pyx)],
        include_dirs=[str(CORE)],
        extra_compile_args=["-O3"] + (COLUMNS_INLINING if pyx.stem == "columns" else []),
    )
    for pyx in sorted(CORE.glob("*.pyx"))
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": "3", "embedsignature": True},
        include_path=["."],
    ),
)
