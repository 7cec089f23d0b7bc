import json
import os
import subprocess
from pathlib import Path

import pytest

import kcodec
from kcodec._core.columns import handed_back_batches

REPO = Path(__file__).resolve().parents[1]


def pytest_configure(config):
    config.addinivalue_line("markers", "invalid_input: the test decodes data that fails "
                            "Kafka's checks (the compiled scan may hand batches back)")
    config.addinivalue_line("markers", "footprint: the test measures the process's resident "
                            "memory or page faults (ci/asan.sh leaves it out: the "
                            "sanitizer's allocator changes both)")
    config.addinivalue_line("markers", "memory_pool: the test needs the column memory pool "
                            "(KCODEC_TEST_NO_MEMORY_POOL=1 leaves it out)")
    if os.environ.get("KCODEC_TEST_NO_MEMORY_POOL") == "1":
        # ci/asan.sh: every block freed when it is given back, not kept for
        # reuse, so that a use after free is a use of freed memory.
        kcodec.kept_memory_limit(0)


@pytest.fixture(autouse=True)
def compiled_scan_takes_valid_input_whole(request):
    """On valid input the compiled scan hands no batch back to BatchReader: the
    rows would still be right, so only this shows a scan that wrongly rejects
    a batch (and reads it again, slower)."""
    before = handed_back_batches()
    yield
    if request.node.get_closest_marker("invalid_input") is None:
        assert handed_back_batches() == before, "the compiled scan handed a batch back"


def fixtures_dir():
    """The shared record-data fixtures: $KCODEC_FIXTURES, or shared/fixtures
    beside this checkout (where CI puts them), or beside the local checkout
    this one was cloned from (a clean clone made anywhere finds them too)."""
    env = os.environ.get("KCODEC_FIXTURES")
    if env:
        return Path(env)
    beside = REPO.parent / "shared" / "fixtures"
    if not beside.exists():
        try:
            origin = subprocess.run(["git", "-C", str(REPO), "remote", "get-url", "origin"],
                                    capture_output=True, text=True).stdout.strip()
        except OSError:                              # no git
            origin = ""
        if origin and Path(origin).is_dir():
            return Path(origin).resolve().parent / "shared" / "fixtures"
    return beside


@pytest.fixture(scope="session")
def fixtures_path():
    path = fixtures_dir()
    if not (path / "index.json").exists():
        # data kept beside the repository, not something ci/test.sh installs:
        # skipped (and counted as such) even under CI
        pytest.skip(f"shared fixtures not found at {path} (set KCODEC_FIXTURES)")
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
