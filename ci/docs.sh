#!/usr/bin/env bash
# Builds the documentation site with warnings as errors.
#   bash ci/docs.sh PYTHON [OUTDIR]
# PYTHON is a virtual environment's python in which kcodec is installed (the
# API reference is read from the installed package, compiled core included);
# the docs extra's packages (pyproject.toml) are installed into it first.
# OUTDIR defaults to $KCODEC_CI_DIR/site, else .ci-work/site in this checkout.
# About 30 s once the packages are installed.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${1:?usage: bash ci/docs.sh PYTHON [OUTDIR]}
out=${2:-${KCODEC_CI_DIR:-$repo/.ci-work}/site}

# The docs extra, read from pyproject.toml (one list, so the two never differ).
packages=$("$python" - "$repo/pyproject.toml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
try:
    import tomllib
    docs = tomllib.loads(text)["project"]["optional-dependencies"]["docs"]
except ImportError:                       # Python < 3.11: the one-line list
    docs = re.findall(r'"([^"]+)"', re.search(r"^docs = \[(.*)\]", text, re.M).group(1))
print("\n".join(docs))
PY
)
echo "== docs: installing $(tr '\n' ' ' <<<"$packages")"
mapfile -t requirements <<<"$packages"
"$python" -m pip install -q "${requirements[@]}"

echo "== docs: sphinx-build -W into $out"
# From outside the checkout: autodoc must import the installed kcodec, not
# the source tree (which has no compiled core).
cd "$(mktemp -d)"
"$python" -m sphinx -W --keep-going -q -b html "$repo/docs" "$out"
echo "== docs: built $out/index.html"
