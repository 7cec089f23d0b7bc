"""The compiled core. There is no pure-Python fallback: if the extension
modules are missing, say how to build them."""
try:
    from . import build, columns, crc, records  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only on broken installs
    raise ImportError(
        "kcodec's compiled core is not built (" + str(exc) + "). Install kcodec with "
        "'pip install .' (or 'pip install kcodec'), or build in place with "
        "'python setup.py build_ext --inplace'; this needs a C compiler and Python headers."
    ) from exc
