#!/usr/bin/env bash
# The README's first command. On a fresh machine (Python 3.9+ with headers,
# a C compiler, Java 17+ for Spark) it creates a virtual environment,
# installs kcodec from this checkout with the spark extra (compiling the
# extension), and runs the main job on the embedded demo log: `kcodec demo`
# writes a multi-segment log, converts it with spark-convert on local[*] and
# prints a summary and a few decoded rows. Arguments go to `kcodec demo`.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${KCODEC_DEMO_DIR:-$repo/.demo}
python=${PYTHON:-python3}

if ! command -v java >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ]; then
    echo "Spark needs Java 17 or later (Debian: apt-get install openjdk-17-jre-headless)" >&2
    exit 1
fi
echo "== installing kcodec[spark] into $work/venv"
[ -x "$work/venv/bin/python" ] || "$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip
"$work/venv/bin/python" -m pip install -q "$repo[spark]"

echo "== kcodec demo"
cd "$work"
exec "$work/venv/bin/kcodec" demo --dir "$work/run" "$@"
