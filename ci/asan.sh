#!/usr/bin/env bash
# The compiled core under AddressSanitizer: the extensions built again with
# -fsanitize=address in a scratch copy of the package, and the tests that feed
# the core corrupt, truncated and edge-case input (the fuzzers among them) run
# against that build, every Python allocation through malloc (PYTHONMALLOC),
# so a read or write past any buffer (the input's, a column's, a decompression
# buffer's) or after a free stops the run. pyarrow allocates through malloc
# too (its system pool), and kcodec keeps no freed column memory for reuse
# (KCODEC_TEST_NO_MEMORY_POOL), so that a use after free touches freed memory.
# The build keeps debug info (KCODEC_DEBUG=1), so reports name source lines.
# Left out: the footprint tests (the sanitizer's allocator changes what they
# measure) and the memory_pool tests (they need the pool).
#
# Usage: ci/asan.sh BUILD_PYTHON TEST_PYTHON: BUILD_PYTHON has Cython and
# setuptools, TEST_PYTHON kcodec's test extras (ci/test.sh passes both).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_python=$1
test_python=$2
cc=${CC:-gcc}
libasan=$("$cc" -print-file-name=libasan.so)
if [[ ! -e $libasan ]]; then
    echo "asan.sh: $cc has no libasan.so" >&2
    exit 1
fi

copy=$(mktemp -d)
run_dir=$(mktemp -d)
trap 'rm -rf "$copy" "$run_dir"' EXIT
cp -r "$repo/setup.py" "$repo/pyproject.toml" "$repo/README.md" "$repo/kcodec" "$copy/"
find "$copy/kcodec" \( -name '*.so' -o -name '*.c' -o -name __pycache__ \) -prune -exec rm -rf {} +
(cd "$copy" && CC=$cc KCODEC_DEBUG=1 CFLAGS="-fsanitize=address -fno-omit-frame-pointer" \
    LDFLAGS="-fsanitize=address" "$build_python" setup.py -q build_ext --inplace >/dev/null)

export LD_PRELOAD=$libasan PYTHONMALLOC=malloc PYTHONPATH=$copy
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export ARROW_DEFAULT_MEMORY_POOL=system KCODEC_TEST_NO_MEMORY_POOL=1
cd "$run_dir"
"$test_python" - "$copy" <<'PY'
import sys
import kcodec._core.columns as columns
assert columns.__file__.startswith(sys.argv[1]), f"not the sanitized build: {columns.__file__}"
PY
# --capture=sys: the sanitizer writes its report to fd 2 and aborts, so pytest
# must not be holding fd 2 in a file of its own.
"$test_python" -m pytest -p no:cacheprovider -q --capture=sys -m "not footprint and not memory_pool" \
    "$repo/tests/test_corrupt.py" "$repo/tests/test_protocol_corrupt.py" \
    "$repo/tests/test_validation_rules.py" "$repo/tests/test_system_codecs.py" \
    "$repo/tests/test_records.py" "$repo/tests/test_arrow.py" "$repo/tests/test_arrow_views.py" \
    "$repo/tests/test_decode_many.py" "$repo/tests/test_roundtrip.py" "$repo/tests/test_log_read.py" \
    "$repo/tests/test_values_avro_corrupt.py" "$repo/tests/test_values_avro_resolution.py" \
    "$repo/tests/test_values_avro.py" "$repo/tests/test_values_json.py"
