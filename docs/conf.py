"""Sphinx configuration of kcodec's documentation site.

Build it with ``bash ci/docs.sh PYTHON`` (PYTHON: a virtual environment's
python where kcodec is installed): pages are Markdown (MyST), the API
reference comes from the installed package's docstrings (autodoc, Google
style through napoleon), and the CLI reference from kcodec.cli.build_parser
(sphinx-argparse). The build treats warnings as errors.
"""
import importlib.util

project = "kcodec"
author = "the kcodec developers"
copyright = "the kcodec developers"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinxarg.ext",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

myst_heading_anchors = 3
myst_enable_extensions = ["deflist"]

# The compiled core's functions and classes carry their signature as the
# first line of their docstring (Cython's embedsignature).
autodoc_docstring_signature = True
autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_class_signature = "mixed"
# kcodec.spark needs PySpark; the capture reader dpkt. The site builds
# without them too, from stand-ins.
autodoc_mock_imports = [name for name in ("pyspark", "dpkt")
                        if importlib.util.find_spec(name) is None]

napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True
napoleon_use_rtype = False

html_theme = "furo"
html_title = "kcodec"
