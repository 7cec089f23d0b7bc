"""The compiled core: one extension per kcodec/_core/*.pyx (project metadata is
in pyproject.toml).

Environment:
  KCODEC_WERROR=1  compiler warnings are errors (CI builds with it once the
                   build is warning-free: a new warning then fails the run)
  KCODEC_DEBUG=1   keep debug info (ci/asan.sh: the sanitizer's reports name
                   source lines); release builds carry none (-g0 after the
                   interpreter's own -g)
"""
import os
import subprocess
import tempfile
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

CORE = Path("kcodec") / "_core"
# columns.pyx compiles its record loop five times (fill_records); by default
# GCC then stops inlining the record parser and the copies into them (its
# growth limits for one function and for the module), and calls them per record.
# The limits leave room to spare: at 1000% growth, four more lines in the
# varint reader made GCC call the parser (320 instructions a record, not 250).
# tests/test_extension.py checks that nothing the loop calls per record is
# left out of line.
COLUMNS_INLINING = ["--param=max-inline-insns-single=2000", "--param=inline-unit-growth=200",
                    "--param=large-function-growth=3000"]


class BuildExt(build_ext):
    """build_ext, adding COLUMNS_INLINING to columns where the compiler takes
    it without a warning (GCC; clang warns that it is unused)."""

    def build_extensions(self):
        if self.compiler.compiler_type == "unix" and self._compiles_with(COLUMNS_INLINING):
            for ext in self.extensions:
                if ext.name == "kcodec._core.columns":
                    ext.extra_compile_args.extend(COLUMNS_INLINING)
        super().build_extensions()

    def _compiles_with(self, flags):
        """Whether the compiler takes flags without a word, asked quietly: the
        build's log shows only the build."""
        with tempfile.TemporaryDirectory() as tmp:
            probe = Path(tmp) / "probe.c"
            probe.write_text("int kcodec_probe(void) { return 0; }\n")
            command = [*self.compiler.compiler_so, "-Werror", *flags,
                       "-c", str(probe), "-o", str(Path(tmp) / "probe.o")]
            try:
                return subprocess.run(command, capture_output=True).returncode == 0
            except OSError:           # a compiler that cannot run
                return False


def compile_args():
    """-O3, and the flags the environment asks for (see above). They come
    after the interpreter's CFLAGS, so -g0 undoes its -g."""
    args = ["-O3"]
    if os.environ.get("KCODEC_DEBUG") != "1":
        args.append("-g0")
    if os.environ.get("KCODEC_WERROR") == "1":
        args.append("-Werror")
    return args


extensions = [
    Extension(
        f"kcodec._core.{pyx.stem}",
        [str(pyx)],
        include_dirs=[str(CORE)],
        extra_compile_args=compile_args(),
    )
    for pyx in sorted(CORE.glob("*.pyx"))
]

setup(
    cmdclass={"build_ext": BuildExt},
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": "3", "embedsignature": True},
        include_path=["."],
    ),
)
