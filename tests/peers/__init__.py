"""The peers kcodec is checked against (kafka-python, aiokafka, confluent-kafka)."""
import importlib
import os

import pytest


def require_module(name):
    """Import a peer's module. Without it a test skips on a developer's machine
    but fails under CI (the CI variable set), where every peer is installed:
    a missing peer must not turn its cross-checks into silent skips."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"peer module {name} is not importable under CI: {exc}")
        pytest.skip(f"peer module {name} is not installed: {exc} (pip install 'kcodec[test]')")
