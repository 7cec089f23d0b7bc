#!/usr/bin/env bash
# The README's first command. On a fresh machine (Python 3.9+ with headers,
# a C compiler, Java 17+ for Spark) it creates a virtual environment,
# installs kcodec from this checkout with the spark extra (compiling the
# extension), and runs the main job on the embedded demo log: `kcodec demo`
# writes a multi-segment log, converts it with spark-convert on local[*] and
# prints a summary and a few decoded rows. Arguments go to `kcodec demo`
# (--verbose: Spark's log and the JVM's warnings too).
#
# A second run reinstalls nothing when the sources are those the installed
# kcodec was built from (a hash of them is kept in the venv after each
# install) and it imports; KCODEC_DEMO_REINSTALL=1 installs all the same.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${KCODEC_DEMO_DIR:-$repo/.demo}
python=${PYTHON:-python3}
# shellcheck source=ci/steps.sh
source "$repo/ci/steps.sh"

if ! command -v java >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ]; then
    echo "Spark needs Java 17 or later (Debian: apt-get install openjdk-17-jre-headless)" >&2
    exit 1
fi

# What the installed package is built from: the interpreter, the build
# files and the package's sources (not README.md, not build products).
source_hash() {
    (
        cd "$repo"
        "$work/venv/bin/python" -VV
        find setup.py pyproject.toml MANIFEST.in kcodec pyspark_kcodec -type f \
            ! -name '*.so' ! -name '*.c' ! -name '*.pyc' ! -name '*.html' -print0 \
            | LC_ALL=C sort -z | xargs -0 sha256sum
    ) | sha256sum | cut -d' ' -f1
}

stamp=$work/venv/kcodec-sources.sha256
[ -x "$work/venv/bin/python" ] || "$python" -m venv "$work/venv"
hash=$(source_hash)
if [[ -z ${KCODEC_DEMO_REINSTALL:-} && -f $stamp && $(cat "$stamp") == "$hash" ]] \
        && "$work/venv/bin/python" -I -c "import kcodec, pyspark" 2>/dev/null; then
    # (-I: the venv's kcodec, never this checkout's kcodec/ from the current directory)
    echo "== kcodec[spark] in $work/venv is built from these sources: not reinstalling"
else
    step "installing kcodec[spark] into $work/venv (compiles the core: about 1-2 minutes; the first time also downloads PySpark, about 450 MB)"
    rm -f "$stamp"
    quietly "$work/pip-upgrade.log" "$work/venv/bin/python" -m pip install --upgrade pip
    showing "$PIP_PROGRESS" "$work/pip-install.log" \
        "$work/venv/bin/python" -m pip install "$repo[spark]"
    echo "$hash" >"$stamp"
    step_done
fi

step "kcodec demo: writing the demo log, then converting it on Spark (local[*]: about 30-60 s)"
cd "$work"
status=0
"$work/venv/bin/kcodec" demo --dir "$work/run" "$@" || status=$?
step_done
exit "$status"
