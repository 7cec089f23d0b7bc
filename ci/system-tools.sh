#!/usr/bin/env bash
# System tools the test suite needs beyond Python: a JDK and Maven (the Kafka
# broker of the broker tests and its jars, Spark), tcpdump (the capture
# test) and openssl (the schema registry tests' TLS certificates). Installs
# with apt-get only what is missing, so a second run does nothing; without
# root it uses sudo, and without either it says what is missing and leaves
# it (those tests then skip, or fail under CI).
set -euo pipefail

missing=()
command -v java >/dev/null || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || missing+=(maven)
command -v tcpdump >/dev/null || missing+=(tcpdump)
command -v openssl >/dev/null || missing+=(openssl)
if [[ ${#missing[@]} -eq 0 ]]; then
    exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
    as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    echo "system-tools.sh: missing ${missing[*]}; install them (needs root)" >&2
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "system-tools.sh: missing ${missing[*]} and no apt-get to install them" >&2
    exit 0
fi
echo "== installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -q
"${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
