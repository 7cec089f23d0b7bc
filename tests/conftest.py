import json
import os
from pathlib import Path

import pytest

from needs import unavailable

REPO = Path(__file__).resolve().parents[1]


def fixtures_dir():
    """The shared record-data fixtures: $KCODEC_FIXTURES, or shared/fixtures
    beside this checkout (where CI puts them)."""
    env = os.environ.get("KCODEC_FIXTURES")
    return Path(env) if env else REPO.parent / "shared" / "fixtures"


@pytest.fixture(scope="session")
def fixtures_path():
    path = fixtures_dir()
    if not (path / "index.json").exists():
        unavailable(f"shared fixtures not found at {path} (set KCODEC_FIXTURES)")
    return path


@pytest.fixture(scope="session")
def fixture_record_sets(fixtures_path):
    """(index entry, bytes) of every positive fixture that is a plain record set."""
    index = json.loads((fixtures_path / "index.json").read_text())
    sets = [(entry, (fixtures_path / entry["bin"]).read_bytes()) for entry in index["fixtures"]
            if not entry["expected_error"]
            and entry["framing"] in ("record_set", "v2_record_batch")]
    assert len(sets) >= 15
    return sets
