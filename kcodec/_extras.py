"""Modules that only some commands need, installed with an extra of kcodec's
(docs/dependencies.md): importing one that is missing names the extra."""
import importlib

EXTRAS = {
    "dpkt": "capture",        # pcap and pcapng reading: kcodec capture, kcodec.protocol.capture
    "tqdm": "progress",       # the progress bar of kcodec convert
    "pyspark": "spark",       # kcodec spark-convert and demo, kcodec.spark
    "pandas": "spark",        # PySpark's mapInArrow imports it
}


class MissingExtraError(ImportError):
    """A module that only some of kcodec needs is not installed; the message
    says which extra of kcodec installs it."""


def install_hint(module):
    """How to install `module`, one of EXTRAS: "pip install 'kcodec[capture]'"."""
    return f"pip install 'kcodec[{EXTRAS[module]}]'"


def require(module, needed_by):
    """Import `module` (one of EXTRAS), or raise MissingExtraError naming
    what needs it and the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{needed_by} needs {module}, which is not installed: {install_hint(module)}",
            name=module) from exc
