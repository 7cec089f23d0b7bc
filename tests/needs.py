"""What a test needs from outside kcodec: peers, tools, a broker, the shared
fixtures. One rule for when it is missing."""
import importlib
import os

import pytest


def unavailable(reason):
    """Something a test needs is missing: the test skips on a developer's
    machine (the whole module, when called at import) but fails under CI (the
    CI variable set), where everything is installed: a missing peer or tool
    must not turn its checks into silent skips."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}, under CI")
    pytest.skip(reason, allow_module_level=True)


def require_module(name):
    """Import a peer's module, or see unavailable."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        unavailable(f"peer module {name} is not importable: {exc} (pip install 'kcodec[test]')")
