#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs the test suite the way a user
# gets kcodec: build the sdist and the wheel from this checkout, install the
# wheel (with its test extras) in a fresh virtual environment, and run the
# tests and the benchmarks (once each, as tests) from outside the source tree;
# then the core's input-facing tests again against a build under
# AddressSanitizer (ci/asan.sh).
# Downloads go through pip's and Maven's caches, so later runs are quick.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${KCODEC_CI_DIR:-$repo/.ci-work}
python=${PYTHON:-python3}

rm -rf "$work/dist" "$work/venv"
mkdir -p "$work"

echo "== system tools (JDK, Maven, tcpdump)"
bash "$repo/ci/system-tools.sh"

# The broker tests' Apache Kafka jars and Spark's Kafka source, resolved by
# Maven (cached: quick after the first run). Without them the broker tests
# would only skip, so a failure to resolve them fails the run.
echo "== Kafka broker jars"
kafka_env=$(bash "$repo/ci/kafka-broker.sh")
KCODEC_KAFKA_CLASSPATH=$(sed -n 's/^KCODEC_KAFKA_CLASSPATH=//p' <<<"$kafka_env")
KCODEC_SPARK_KAFKA_JARS=$(sed -n 's/^KCODEC_SPARK_KAFKA_JARS=//p' <<<"$kafka_env")
export KCODEC_KAFKA_CLASSPATH KCODEC_SPARK_KAFKA_JARS
# S3Proxy, the object storage tests' S3-compatible server (Maven, cached).
KCODEC_S3PROXY_JAR=$(bash "$repo/ci/s3proxy.sh" | sed -n 's/^KCODEC_S3PROXY_JAR=//p')
export KCODEC_S3PROXY_JAR

echo "== building sdist and wheel"
"$python" -m venv "$work/build-env"
"$work/build-env/bin/python" -m pip install -q --upgrade pip build
"$work/build-env/bin/python" -m build --outdir "$work/dist" "$repo"

echo "== installing the wheel in a fresh venv"
"$python" -m venv "$work/venv"
wheel=$(ls "$work"/dist/kcodec-*.whl)
"$work/venv/bin/python" -m pip install -q --upgrade pip
"$work/venv/bin/python" -m pip install -q "$wheel[test]"

echo "== running the tests from outside the source tree"
cd "$(mktemp -d)"
export KCODEC_REQUIRE_INSTALLED=1
# Everything the tests need was installed above: a missing peer, tool or jar
# fails its tests here rather than skipping them (tests/needs.py).
export CI=${CI:-true}
"$work/venv/bin/python" -m pytest -p no:cacheprovider "$repo/tests" "$repo/benchmarks" \
    --benchmark-disable "$@"

echo "== the compiled core under AddressSanitizer"
"$work/build-env/bin/python" -m pip install -q "Cython>=3.0,<4" "setuptools>=77"
bash "$repo/ci/asan.sh" "$work/build-env/bin/python" "$work/venv/bin/python"
