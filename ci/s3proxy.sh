#!/usr/bin/env bash
# Resolves S3Proxy (an S3-compatible server, org.gaul:s3proxy, its
# jar-with-dependencies) with Maven into Maven's local repository, for the
# object storage tests (tests/s3_server.py), and prints where it is:
#
#   bash ci/s3proxy.sh            # resolve (the first run downloads), then print:
#   KCODEC_S3PROXY_JAR=<the jar>
#
# A later run finds the jar in the repository and does not ask Maven.
set -euo pipefail
version=${KCODEC_S3PROXY_VERSION:-2.7.0}
repository=${KCODEC_M2_REPOSITORY:-$HOME/.m2/repository}
jar=$repository/org/gaul/s3proxy/$version/s3proxy-$version-jar-with-dependencies.jar
cache=${KCODEC_KAFKA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kcodec/kafka}

if [[ ! -f $jar ]]; then
    if ! command -v mvn >/dev/null; then
        echo "s3proxy.sh: mvn is not installed (ci/system-tools.sh installs it)" >&2
        exit 1
    fi
    echo "== resolving S3Proxy $version" >&2
    mkdir -p "$cache"
    log=$cache/s3proxy.mvn.log
    if ! mvn -B -q dependency:get -Dmaven.repo.local="$repository" -Dtransitive=false \
            -Dartifact="org.gaul:s3proxy:$version:jar:jar-with-dependencies" >"$log" 2>&1 \
            || [[ ! -f $jar ]]; then
        cat "$log" >&2
        echo "s3proxy.sh: could not resolve org.gaul:s3proxy:$version" >&2
        exit 1
    fi
fi
echo "KCODEC_S3PROXY_JAR=$jar"
