#!/usr/bin/env bash
# Resolves the jars of the test broker and of Spark's Kafka source with Maven
# (ci/kafka/pom.xml, ci/kafka/spark/pom.xml) into Maven's local repository and
# writes their classpaths to a cache directory. A later run whose poms did not
# change and whose jars are all still there does nothing but print them.
#
#   bash ci/kafka-broker.sh            # resolve (first run downloads), then print:
#   KCODEC_KAFKA_CLASSPATH=<the broker's classpath, ':'-separated>
#   KCODEC_SPARK_KAFKA_JARS=<Spark's Kafka source jars, ','-separated>
#
# tests/kafka_broker.py starts the broker from KCODEC_KAFKA_CLASSPATH, or from
# the cache written here when the variable is not set.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${KCODEC_KAFKA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kcodec/kafka}
mkdir -p "$cache"

for tool in java mvn; do
    if ! command -v "$tool" >/dev/null; then
        echo "kafka-broker.sh: $tool is not installed (ci/system-tools.sh installs it)" >&2
        exit 1
    fi
done
# Kafka 4 runs on Java 17 or later; an older java fails later with a bare
# UnsupportedClassVersionError, so say it here.
if ! java_settings=$(java -XshowSettings:properties -version 2>&1); then
    echo "kafka-broker.sh: java does not run:" >&2
    echo "$java_settings" >&2
    exit 1
fi
java_version=$(sed -n 's/^ *java\.specification\.version = //p' <<<"$java_settings" | tr -d '\r')
java_major=${java_version%%.*}
if [[ ! $java_major =~ ^[0-9]+$ ]] || (( java_major < 17 )); then
    echo "kafka-broker.sh: the Kafka broker needs Java 17 or later; java is" \
         "'${java_version:-of no known version}'" >&2
    exit 1
fi

# name, pom, extra arguments of dependency:build-classpath
resolve() {
    local name=$1 pom=$2; shift 2
    local out=$cache/$name.classpath stamp=$cache/$name.pom-sha256
    local sum; sum=$(sha256sum "$pom" | cut -d' ' -f1)
    if [[ -s $out && -f $stamp && $(cat "$stamp") == "$sum" ]] && all_present "$out"; then
        return
    fi
    echo "== resolving $name jars ($pom)" >&2
    local log=$cache/$name.mvn.log
    # offline first: quick when Maven's repository already holds everything
    if ! mvn -B -q -o -f "$pom" dependency:build-classpath -Dmdep.outputFile="$out.tmp" "$@" \
            >"$log" 2>&1; then
        if ! mvn -B -q -f "$pom" dependency:build-classpath -Dmdep.outputFile="$out.tmp" "$@" \
                >"$log" 2>&1; then
            cat "$log" >&2
            echo "kafka-broker.sh: could not resolve $name jars" >&2
            exit 1
        fi
    fi
    mv "$out.tmp" "$out"
    echo "$sum" >"$stamp"
}

all_present() {
    local jar
    IFS=: read -r -a jars <"$1"
    for jar in "${jars[@]}"; do
        [[ -f $jar ]] || return 1
    done
}

resolve broker "$here/kafka/pom.xml"
resolve spark-kafka "$here/kafka/spark/pom.xml" -DincludeScope=runtime \
    -DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2

echo "KCODEC_KAFKA_CLASSPATH=$(cat "$cache/broker.classpath")"
echo "KCODEC_SPARK_KAFKA_JARS=$(tr ':' ',' <"$cache/spark-kafka.classpath")"
