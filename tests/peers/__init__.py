"""The peers kcodec is checked against (kafka-python, aiokafka, confluent-kafka)."""
import importlib
import os

import pytest


def missing_peer(reason):
    """A peer a test needs is missing: the test skips on a developer's machine
    (the whole module, when called at import) but fails under CI (the CI
    variable set), where every peer is installed: a missing peer must not
    turn its cross-checks into silent skips."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}, under CI")
    pytest.skip(f"{reason} (pip install 'kcodec[test]')", allow_module_level=True)


def require_module(name):
    """Import a peer's module, or see missing_peer."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing_peer(f"peer module {name} is not importable: {exc}")
